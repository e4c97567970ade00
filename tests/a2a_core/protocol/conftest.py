"""Fixtures of the tests of agents' own identities (JWTs from a real identity provider)."""

from __future__ import annotations

import pytest

from tests.identity import IdentityProvider


@pytest.fixture
def provider():
    running = IdentityProvider()
    yield running
    running.stop()


@pytest.fixture
async def robot(hub, provider):
    """The agent `robot`, whose provider's client `robot-client` signs in as it; beside it the
    endpoint agent `echo`. Returns robot's hub token."""
    await hub.endpoint_agent("echo")
    agent, hub_token = await hub.caller("robot")
    await provider.trusted_for(agent)
    return hub_token
