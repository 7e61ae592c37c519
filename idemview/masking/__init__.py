"""Masking (DESIGN §6): sensitive field names and value detectors, keyed tags, the log filter."""
