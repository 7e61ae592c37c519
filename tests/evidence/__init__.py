"""Tests: evidence."""
