"""Shipped layouts (TOML data files); found with importlib.resources like third-party ones."""
