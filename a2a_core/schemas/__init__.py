"""Pydantic wire types: typed envelopes, agent cards, policy documents, events."""
