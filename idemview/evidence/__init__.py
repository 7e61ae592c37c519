"""Evidence export (DESIGN §7): the export plan over the Ledger contract, the CSV writer and manifest."""
