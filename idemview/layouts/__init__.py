"""Layouts: declarative TOML mappings of a ledger's tables onto the normalized model, and the shipped
presets (data files in ``idemview/layouts/presets``). Depends on the domain layer only."""
