"""Domain layer: the normalized model (operations, attempts, findings) and filters. Imports nothing of
idemview's other layers (DESIGN §10)."""
