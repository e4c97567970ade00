"""A browser that does not take its frames: what it is sent meanwhile is merged, past the
backlog it is told to reload, and the relay goes on sending to the others."""

from __future__ import annotations

import asyncio
from collections import deque

from channels.layers import get_channel_layer

from a2a_core.schemas.events import PolicyActivated, wire
from a2a_core.selectors.traffic import TrafficFilter
from dashboard import consumers, live
from dashboard.consumers import DashboardConsumer, Shown


class Browser(DashboardConsumer):
    """An open policy page whose socket takes a frame only while `taking` is set; what it
    took is in `written`, one entry per websocket message."""

    def __init__(self) -> None:
        super().__init__()
        self.page, self.task_id, self.root_id, self.paused = "policy", "", "", False
        self.filters, self.agent_id = TrafficFilter(), None
        self.refreshed_at, self.refresh_later = -1.0, None
        self.shown, self.outbox = Shown(), deque()
        self.taking = asyncio.Event()
        self.taking.set()
        self.written: list[str] = []
        self.arrived = asyncio.Event()

    async def send(
        self, text_data: str | None = None, bytes_data: bytes | None = None, close: bool = False
    ) -> None:
        await self.taking.wait()
        assert text_data is not None
        self.written.append(text_data)
        self.arrived.set()

    async def took(self, text: str) -> None:
        """Return once a message holding `text` has been written."""
        while not any(text in frame for frame in self.written):
            self.arrived.clear()
            await self.arrived.wait()


def activated(number: int) -> live.Update:
    return live.Update(policy=f"<div>policy v{number}</div>")


async def test_a_frame_is_written_before_the_offer_returns_when_the_browser_keeps_up():
    browser = Browser()

    browser.offer(activated(1))

    assert browser.written == ["<div>policy v1</div>"]
    assert browser.pending() is None


async def test_frames_for_a_browser_that_has_not_taken_the_last_are_merged_in_order():
    browser = Browser()
    browser.taking.clear()

    for number in (1, 2, 3):
        browser.offer(activated(number))
    assert browser.written == []
    pending = browser.pending()
    assert pending is not None
    browser.taking.set()
    await asyncio.wait_for(pending, 5)

    # The first was on its way; the two sent meanwhile go as one message.
    assert browser.written == ["<div>policy v1</div>", "<div>policy v2</div><div>policy v3</div>"]
    assert browser.pending() is None


async def test_past_the_backlog_a_browser_is_told_to_reload_instead(monkeypatch):
    monkeypatch.setattr(consumers, "MAX_BACKLOG", 3)
    browser = Browser()
    browser.taking.clear()

    for number in range(1, 8):
        browser.offer(activated(number))
    browser.taking.set()
    await asyncio.wait_for(browser.pending() or asyncio.sleep(0), 5)

    first, rest = browser.written
    assert first == "<div>policy v1</div>"
    # What came past the backlog replaced it: the reload banner, then what followed it.
    assert rest.startswith('<div id="live-banner"') and "fell behind" in rest
    assert rest.endswith("<div>policy v6</div><div>policy v7</div>")
    assert "policy v2<" not in rest and "policy v4<" not in rest


async def test_the_relay_goes_on_sending_to_the_others_while_one_browser_takes_nothing(
    db, monkeypatch
):
    # `db`: the relay's thread checks the connection an earlier test may have left it.
    monkeypatch.setattr(live, "FLUSH_SECONDS", 0.2)
    stalled, keeping_up = Browser(), Browser()
    stalled.taking.clear()
    relay = live.relay()
    relay.join(stalled)
    relay.join(keeping_up)
    layer = get_channel_layer()
    try:
        await asyncio.sleep(0.2)  # the relay has joined the event groups

        for number in (1, 2, 3):
            await layer.group_send("policy", wire(PolicyActivated(number=number)))
            await asyncio.wait_for(keeping_up.took(f"Policy v{number} "), 10)
        assert stalled.written == []

        stalled.taking.set()
        await asyncio.wait_for(stalled.took("Policy v3 "), 10)
        assert "Policy v1 " in stalled.written[0]
    finally:
        relay.leave(stalled)
        relay.leave(keeping_up)
        await live.stop()
