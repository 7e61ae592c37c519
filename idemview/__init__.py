"""idemview: an inspector for operation ledgers (idempotency keys, attempts, outcomes)."""
__version__ = "0.1.0"
