"""Inbox tests close every websocket they opened, and wait for the hub to see them go, before
the test database is reset."""

from __future__ import annotations

import pytest

from tests.a2a_core.inbox.helpers import close_opened_inboxes


@pytest.fixture(autouse=True)
async def _close_inboxes(hub):
    yield
    await close_opened_inboxes()
