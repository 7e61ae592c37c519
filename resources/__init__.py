"""Installed as ``idemview.resources``: the app icon, .desktop entry and AppStream metainfo (data only).

Read them through :mod:`idemview.appinfo`."""
