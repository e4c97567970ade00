"""Inbox tests close every websocket they opened, and wait for the hub to see them go, before
the test database is reset."""

from __future__ import annotations

import pytest

from a2a_core.asyncdb import db
from a2a_core.models import InboxSession
from tests.a2a_core.inbox.helpers import Inbox
from tests.a2a_core.protocol.helpers import eventually


@pytest.fixture(autouse=True)
async def _close_inboxes(hub):
    yield
    opened, Inbox.opened[:] = list(Inbox.opened), []
    for inbox in opened:
        await inbox.close()

    async def gone() -> bool:
        return not await db(InboxSession.objects.filter(transport="websocket").exists)

    await eventually(gone)
