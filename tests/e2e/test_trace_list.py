"""The trace list, replays and envelopes in a real browser: finding a trace by agent and by
how long it took, live while traces run; replaying a filtered list to another agent and
reading the answers side by side; a typed envelope read as fields in a conversation."""

from __future__ import annotations

import re

import pytest
from a2a.types.a2a_pb2 import Part
from google.protobuf.json_format import ParseDict
from playwright.async_api import expect

from a2a_core.asyncdb import db
from a2a_core.models import ReplaySet, Task
from a2a_core.models.task import TERMINAL_STATES
from tests.a2a_core.protocol.helpers import eventually, request, send
from tests.e2e.conftest import live, shot
from tests.e2e.test_trace import the_demo_cast

pytestmark = pytest.mark.live

ENVELOPE_MEDIA = "application/vnd.a2a-hub.envelope+json"
ENVELOPE_EXTENSION = "https://a2a-hub.dev/extensions/envelope/v1"


async def ended(count: int) -> None:
    async def check() -> bool:
        states = await db(lambda: list(Task.objects.values_list("state", flat=True)))
        return len(states) == count and all(state in TERMINAL_STATES for state in states)

    await eventually(check, within=20)


async def test_the_trace_list_finds_a_chain_by_agent_and_by_duration_live(hub, sdk, dashboard):
    token = await the_demo_cast(hub)
    pm = await sdk("pm", token)
    await send(pm, request("echo quick"))
    await send(await sdk("architect", token), request("echo a quick design"))
    chain = await send(pm, request("delegate architect delegate tester slow 1"))
    await ended(5)
    chain_trace = await db(lambda: Task.objects.get(pk=chain.id).trace_id)

    page = await dashboard("viewer")
    await page.goto(f"{hub.url}/")
    await page.get_by_role("link", name="Traces").click()
    await live(page)
    rows = page.locator("#trace-rows tr[data-trace]")
    await expect(rows).to_have_count(3)

    # By agent: only the chain has tester on it.
    await page.fill("input[name=agent]", "tester")
    await page.press("input[name=agent]", "Enter")
    await expect(rows).to_have_count(1)
    await expect(rows.first).to_have_attribute("data-trace", chain_trace)
    await expect(rows.first.locator(".trace-agents")).to_have_text(
        "architect, director, pm, tester"
    )
    await expect(page).to_have_url(re.compile(r"/traces/\?agent=tester$"))

    # By duration: only the chain took a second or more.
    await page.fill("input[name=agent]", "")
    await page.fill("input[name=min]", "1s")
    await page.press("input[name=min]", "Enter")
    await expect(rows).to_have_count(1)
    await expect(rows.first).to_have_attribute("data-trace", chain_trace)
    assert int(await rows.first.get_attribute("data-duration-ms") or 0) >= 1000
    await expect(page).to_have_url(re.compile(r"/traces/\?min=1s$"))
    # The filters are in the URL: a reload shows the same.
    await page.reload()
    await expect(rows).to_have_count(1)
    await shot(page, "trace-list-filtered")

    # Live: a new trace appears while the page is open (its filters still apply).
    await page.goto(f"{hub.url}/traces/?agent=pm")
    await live(page)
    await expect(rows).to_have_count(2)
    await send(pm, request("echo while you look"))
    await expect(rows).to_have_count(3)
    await shot(page, "trace-list")

    await rows.first.get_by_role("link").first.click()
    await expect(page.locator(".wf-span.task")).to_have_count(1)


async def test_a_filtered_trace_list_is_replayed_to_another_agent_side_by_side(hub, sdk, dashboard):
    await hub.endpoint_agent("writer")
    await hub.endpoint_agent("writer2", voice="draft v2")
    _, token = await hub.caller("lead")
    writer = await sdk("writer", token)
    for n in range(3):
        await send(writer, request(f"echo note {n}"))
    await ended(3)

    page = await dashboard("operator")
    await page.goto(f"{hub.url}/traces/?agent=writer")
    await page.get_by_role("link", name="Replay these…").click()
    await expect(page.locator(".replay-new")).to_contain_text("3 tasks")
    await page.select_option("select[name=to]", "writer2")
    await page.fill("input[name=name]", "writer v2")
    await page.get_by_role("button", name="Replay 3 tasks").click()

    await expect(page.locator("#replay-live")).to_have_attribute("data-status", "done")
    items = page.locator(".replay-item")
    await expect(items).to_have_count(3)
    await expect(items.locator(".badge.replay-done")).to_have_count(3)
    first = items.first  # the newest trace first, as the list showed them
    await expect(first.locator(".recorded .answer-text")).to_have_text("echo: note 2")
    await expect(first.locator(".replayed .answer-text")).to_have_text("draft v2: note 2")
    await expect(first.locator(".text-diff li.gone")).to_have_text("\u2212echo: note 2")
    await expect(first.locator(".text-diff li.new")).to_have_text("+draft v2: note 2")
    await shot(page, "replay-comparison")

    # Run again, from the page: the same answers.
    await page.get_by_role("button", name="Run again").click()
    await expect(page.locator("#replay-live")).to_have_attribute("data-status", "done")
    await expect(page.locator(".page-head")).to_contain_text("run 2")
    await expect(items.locator(".replayed .answer-text")).to_have_text(
        [f"draft v2: note {n}" for n in (2, 1, 0)]
    )
    assert await db(lambda: ReplaySet.objects.get().runs) == 2

    # A viewer reads it, but cannot make one.
    viewer = await dashboard("viewer")
    await viewer.goto(f"{hub.url}/traces/?agent=writer")
    await expect(viewer.get_by_role("link", name="Replay these…")).to_have_count(0)
    response = await viewer.goto(f"{hub.url}/replays/new/?agent=writer")
    assert response is not None and response.status == 403


async def test_the_conversation_view_shows_an_envelope_as_fields_folded_with_raw_json(
    hub, sdk, dashboard
):
    await hub.endpoint_agent("reviewer")
    _, token = await hub.caller("lead")
    envelope = {
        "kind": "review_request",
        "priority": "high",
        "payload": {"title": "Login page", "files": ["app/login.py", "app/forms.py"]},
    }
    data = ParseDict({"data": envelope, "mediaType": ENVELOPE_MEDIA}, Part())
    ask = request(
        "echo please review", context_id="review-42", parts=[Part(text="Please review"), data]
    )
    ask.message.extensions.append(ENVELOPE_EXTENSION)
    await send(await sdk("reviewer", token), ask)

    page = await dashboard("viewer")
    await page.goto(f"{hub.url}/contexts/review-42/")
    folded = page.locator(".part-envelope").first
    await expect(folded).not_to_have_attribute("open", "")
    await expect(folded.locator(":scope > summary")).to_contain_text("review_request")
    await expect(folded.locator(":scope > summary")).to_contain_text("Login page")
    fields = folded.locator(".envelope-fields")
    await expect(fields).to_be_hidden()
    await expect(page.locator("pre.part-data:visible")).to_have_count(0)

    await folded.locator(":scope > summary").first.click()
    await expect(fields).to_be_visible()
    await expect(fields.locator("dt")).to_contain_text(["priority", "payload / title"])
    title = fields.locator("dt", has_text="payload / title")
    await expect(title.locator("+ dd")).to_have_text("Login page")
    await expect(fields.locator("dt", has_text="payload / files").locator("+ dd")).to_have_text(
        "app/login.py\napp/forms.py"
    )
    await shot(page, "conversation-envelope")

    raw = folded.locator(".raw-json")
    await expect(raw.locator("pre")).to_be_hidden()
    await raw.locator("summary").click()
    await expect(raw.locator("pre")).to_contain_text('"title": "Login page"')
