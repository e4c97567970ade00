"""Fixtures shared by the whole suite."""

from __future__ import annotations

import pytest

from tests.factories import register


@pytest.fixture
def agent_pair(db):
    """Two registered endpoint agents, with their tokens."""
    return register("alpha"), register("beta")
