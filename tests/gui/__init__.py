"""Tests: gui."""
