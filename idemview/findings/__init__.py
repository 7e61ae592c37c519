"""Findings: the DESIGN §5 finding kinds, computed in SQL through the Ledger contract."""
