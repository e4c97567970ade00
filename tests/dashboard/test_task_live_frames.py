"""What the tasks screens get over the dashboard websocket when tasks change."""

from __future__ import annotations

import asyncio
from collections import deque

from a2a_core.schemas.events import TaskItem, Traffic, wire
from a2a_core.selectors.traffic import TrafficFilter
from dashboard.consumers import DashboardConsumer, Shown
from dashboard.live import Update, render_update


class Page(DashboardConsumer):
    """A page's consumer with no socket: what it would write to the browser is kept."""

    def __init__(self) -> None:
        super().__init__()
        self.written: list[str] = []
        self.arrived = asyncio.Event()

    async def send(
        self, text_data: str | None = None, bytes_data: bytes | None = None, close: bool = False
    ) -> None:
        assert text_data is not None
        self.written.append(text_data)
        self.arrived.set()


def open_page(page: str, *, task: str = "", root: str = "") -> Page:
    """A consumer as `connect` leaves it for `page`."""
    consumer = Page()
    consumer.page, consumer.task_id, consumer.root_id = page, task, root
    consumer.paused = False
    consumer.filters, consumer.agent_id = TrafficFilter(), None
    consumer.refreshed_at = -1.0
    consumer.refresh_later = None
    consumer.shown = Shown()
    consumer.outbox = deque()
    return consumer


def task_changed(task_id: str, root_id: str | None = None) -> list:
    item = TaskItem(
        change="updated",
        task_id=task_id,
        context_id="ctx",
        state="working",
        caller_id=None,
        target_id=None,
        root_id=root_id,
        seq=1,
    )
    return [wire(Traffic(items=[item]))]


async def test_a_busy_board_refreshes_at_once_then_once_more_when_the_burst_is_over():
    board = open_page("tasks")

    first = board.frame(Update(tasks={"t1"}))
    burst = [board.frame(Update(tasks={f"t{i}"})) for i in range(2, 20)]

    assert 'id="board-refresh"' in first and 'hx-include="#task-filters"' in first
    assert burst == [""] * 18
    await asyncio.wait_for(board.arrived.wait(), 5)
    (last,) = board.written  # at the end of the window, once
    assert 'id="board-refresh"' in last
    assert not board.outbox
    assert board.frame(Update()) == ""  # nothing changed, nothing sent


async def test_a_task_page_refreshes_when_any_task_of_its_chain_changes():
    page = open_page("task", task="child", root="root")
    elsewhere = open_page("task", task="other", root="other")

    update = render_update(task_changed("grandchild", "root"))

    assert "root" in update.chains
    assert 'hx-get="/tasks/child/"' in page.frame(update)
    assert elsewhere.frame(update) == ""
