"""Tests: packaging."""
