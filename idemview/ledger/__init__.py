"""Ledger layer: read-only connections, reflection and validation, SQL compilation and the
:class:`~idemview.ledger.reader.Ledger` read contract — the only code that builds SQL against a ledger."""
