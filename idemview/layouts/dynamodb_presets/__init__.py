"""Shipped DynamoDB layouts (TOML data files, see :mod:`idemview.layouts.dynamodb`)."""
