"""Writes: keyword-only functions, atomic, publishing events after commit."""
