"""The README's first command brings up a living system: `manage.py a2a serve` starts the hub
with its demo, a browser logged in with the admin login it prints watches every scenario kind
of the demo go by in the live feed, and Ctrl-C stops it all, cleanly.

The hub here is a process of its own (SQLite in a fresh data directory, the in-memory channel
layer), as a user starts it; this test does not use the suite's hub.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Browser, Page

from tests.a2a_core.demo.helpers import Serve, migrate, running
from tests.e2e.conftest import SCREENSHOTS, live, shot
from tests.servers import free_port

pytestmark = [pytest.mark.live, pytest.mark.e2e]

# From the start of `a2a serve`: the hub and its demo are up within a minute, and the dashboard
# has shown every scenario kind within two.
UP_SECONDS = 60
ALL_KINDS_SECONDS = 120

# The screenshot shown in the README, updated when HUB_UPDATE_README_SHOT=1.
README_SHOT = Path(__file__).resolve().parents[2] / "docs" / "dashboard.png"
README_SOURCE = "demo-overview"

# What the live feed shows, row by row (templates/dashboard/traffic.html#row and #task-row).
FEED_ROWS = """() => Array.from(document.querySelectorAll(
    "#feed-rows tr[data-message], #feed-rows tr[data-task]")).map(tr => {
  const cell = n => tr.cells[n] || null;
  const text = (n, selector) => {
    const el = cell(n) && (selector ? cell(n).querySelector(selector) : cell(n));
    return el ? el.textContent.trim() : "";
  };
  const badge = cell(3) && cell(3).querySelector(".badge");
  const [sender, target] = text(1).split("\u2192").map(s => s.trim());
  return {
    key: tr.dataset.message ? "m" + tr.dataset.message : "t" + tr.dataset.task + "@" + text(0),
    sender: sender || "", target: target || "",
    kind: text(2, ".kind"),
    decision: badge ? Array.from(badge.classList).filter(c => c !== "badge").join(" ") : "",
    reason: text(3, ".reason"),
    state: text(4, ".badge"),
    summary: text(6),
  };
})"""

Row = dict[str, str]


class Feed:
    """Every row the live feed has shown, the latest version of each (a task's state badge
    changes in place), in the order they were first seen; and the header's escalation count."""

    def __init__(self) -> None:
        self.rows: dict[str, Row] = {}
        self.pending_escalations = 0

    async def read(self, page: Page) -> None:
        for row in await page.evaluate(FEED_ROWS):
            self.rows[row["key"]] = row
        count = (await page.inner_text("#escalation-count")).strip()
        self.pending_escalations = int(count) if count.isdigit() else 0

    def find(self, **fields: str | Callable[[str], bool]) -> list[Row]:
        """The rows whose fields are these values (or pass these tests)."""

        def matches(row: Row) -> bool:
            return all(
                want(row[name]) if callable(want) else row[name] == want
                for name, want in fields.items()
            )

        return [row for row in self.rows.values() if matches(row)]

    def review_cycle(self) -> bool:
        """A review that asked for changes, and (seen later) one that approved."""
        verdicts = [
            row["summary"].split(":", 1)[0]
            for row in self.rows.values()
            if {row["sender"], row["target"]} == {"implementer", "reviewer"}
        ]
        return (
            "changes_requested" in verdicts
            and "approved" in verdicts[verdicts.index("changes_requested") :]
        )

    def kinds(self) -> dict[str, bool]:
        """Each scenario kind the demo plays (a2a_core.demo.director.Director): shown yet?"""
        ended = ("completed", "failed").__contains__
        return {
            "delegation chain director -> pm -> architect -> tester": all(
                self.find(sender=sender, target=target, kind="task_request")
                for sender, target in (
                    ("director", "pm"),
                    ("pm", "architect"),
                    ("architect", "tester"),
                )
            ),
            "review: changes_requested, then approved": self.review_cycle(),
            "knowledge share fanned out": bool(
                self.find(sender="scribe", kind="knowledge_share", reason="fan_out")
            ),
            "broadcast fanned out": bool(
                self.find(sender="scribe", kind="broadcast", reason="fan_out")
            ),
            "request with a deadline, answered or timed out": bool(
                self.find(sender="director", target="ledger", kind="request", state=ended)
            ),
            "loop stopped (loop_detected)": bool(
                self.find(sender="pong", target="ping", decision="reject", reason="loop_detected")
            ),
            "burst rate limited (rate_limit_minute)": bool(
                self.find(sender="monitor", decision="reject", reason="rate_limit_minute")
            ),
            "denied pair (denied_by_matrix)": bool(
                self.find(sender="monitor", decision="reject", reason="denied_by_matrix")
            ),
            "breaker open (circuit_open)": bool(
                self.find(target="flaky", decision="reject", reason="circuit_open")
            ),
            "an agent's question waits for a human (input-required)": bool(
                self.find(sender="director", target="ops", state="input-required")
            ),
            "an escalation held for a human (held row, header badge)": bool(
                self.find(kind="escalation", decision="hold", reason="approval_required")
            )
            and self.pending_escalations > 0,
        }

    def missing(self) -> list[str]:
        return [kind for kind, shown in self.kinds().items() if not shown]


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return migrate(tmp_path / "data")


async def log_in(browser: Browser, url: str, username: str, password: str) -> Page:
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    page.set_default_timeout(15_000)
    await page.goto(f"{url}/login/")
    await shot(page, "login")
    await page.fill("input[name=username]", username)
    await page.fill("input[name=password]", password)
    await page.click("button[type=submit]")
    await page.wait_for_url(f"{url}/")
    return page


async def watch_the_feed(page: Page, url: str, until: float) -> Feed:
    """Keep the live traffic page open, reading its rows every second (the feed keeps only
    its newest rows), until every kind has shown or `until` (time.monotonic())."""
    feed = Feed()
    await page.goto(f"{url}/traffic/")
    await live(page)
    while True:
        await feed.read(page)
        if not feed.missing() or time.monotonic() >= until:
            return feed
        await asyncio.sleep(1)


async def visit(page: Page, url: str) -> None:
    """Open a live page, and let the rows it came with stop flashing as new (for the
    screenshot)."""
    await page.goto(url)
    await live(page)
    await page.wait_for_timeout(1500)


async def chain_depth_on_the_tasks_page(page: Page, url: str) -> bool:
    """The tasks board, filtered to the tester: a task architect gave it, two levels down."""
    await page.goto(f"{url}/tasks/?agent=tester")
    cards = page.locator("li.task-card", has_text="architect").filter(
        has=page.locator(".reason", has_text="↳ 2")
    )
    return await cards.count() > 0


@pytest.mark.embedded
@pytest.mark.timeout(360)
async def test_serve_brings_up_the_hub_and_the_browser_shows_every_demo_scenario(
    browser: Browser, data_dir: Path, tmp_path: Path
):
    port = free_port()
    with (
        (tmp_path / "stderr.txt").open("wb") as stderr,
        Serve(data_dir, "--port", str(port), stderr=stderr) as serve,
    ):
        started = time.monotonic()
        up = await asyncio.to_thread(serve.wait_for, "demo agents:", UP_SECONDS)
        assert up, f"not up within {UP_SECONDS} s:\n{serve.output}"
        found = re.search(r"A2A Hub is running: (http://\S+)/", serve.output)
        login = re.search(r"Log in as +(\S+) / (\S+)", serve.output)
        assert found and login, serve.output
        url = found.group(1)
        assert url == f"http://127.0.0.1:{port}"

        traffic = await log_in(browser, url, login.group(1), login.group(2))
        feed = await watch_the_feed(traffic, url, until=started + ALL_KINDS_SECONDS)
        took = time.monotonic() - started
        missing = feed.missing()
        assert not missing, (
            f"not shown by the dashboard within {ALL_KINDS_SECONDS} s: {', '.join(missing)} "
            f"({len(feed.rows)} rows seen in {took:.0f} s)"
        )

        # The other screens, in a second tab; the live feed stays open in the first.
        page = await traffic.context.new_page()
        assert await chain_depth_on_the_tasks_page(page, url), "no task two levels down"
        await visit(page, f"{url}/escalations/")
        assert await page.locator("article.escalation[data-status=pending]").count() > 0
        await shot(page, "demo-escalations")
        await visit(page, f"{url}/")
        await page.locator("#stat-rate polyline.spark").wait_for()
        await page.locator("#rejections ul.bars li").first.wait_for()
        await shot(page, "demo-overview")
        await visit(page, f"{url}/agents/")
        await shot(page, "demo-agents")
        await visit(page, f"{url}/agents/architect/")
        await shot(page, "demo-agent")
        await shot(traffic, "demo-traffic")

        # Ctrl-C, with the dashboard still open in the browser.
        children = serve.children()
        code = await asyncio.to_thread(serve.interrupt, 30)
        await traffic.context.close()

    errors = (tmp_path / "stderr.txt").read_text()
    assert code == 0, errors
    assert len(children) == 3, children  # the hub, the endpoint agents, the inbox agents
    assert [pid for pid in children if running(pid)] == []
    assert "Traceback" not in errors, errors

    if os.environ.get("HUB_UPDATE_README_SHOT") == "1":
        README_SHOT.parent.mkdir(exist_ok=True)
        shutil.copyfile(SCREENSHOTS / f"{README_SOURCE}.png", README_SHOT)


def test_the_feed_reading_names_what_it_has_not_seen():
    feed = Feed()
    feed.rows = {
        "m1": row("director", "pm", "task_request"),
        "m2": row("pong", "ping", "request", decision="reject", reason="loop_detected"),
        "t3@1": row("implementer", "reviewer", "task", summary="changes_requested: 2 concerns"),
        "t4@2": row("implementer", "reviewer", "task", summary="approved: all addressed"),
    }

    missing = feed.missing()

    assert "loop stopped (loop_detected)" not in missing
    assert "review: changes_requested, then approved" not in missing
    assert "delegation chain director -> pm -> architect -> tester" in missing
    assert "an escalation held for a human (held row, header badge)" in missing


def row(sender: str, target: str, kind: str, **fields: Any) -> Row:
    return {
        "key": "",
        "sender": sender,
        "target": target,
        "kind": kind,
        "decision": "deliver",
        "reason": "",
        "state": "completed",
        "summary": "",
        **fields,
    }
