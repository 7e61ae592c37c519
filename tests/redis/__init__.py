"""Tests: redis."""
