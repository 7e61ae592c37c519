"""Tests: presets."""
