"""Services used by the CLI and the GUI alike: open a ledger, page, detail, search, reveal, scan, the
demo ledger, and the cancel token that stops a running statement in the database."""
