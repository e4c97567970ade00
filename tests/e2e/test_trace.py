"""The trace view in a real browser: a whole delegation on one time axis, live while it runs."""

from __future__ import annotations

import re

import pytest
from playwright.async_api import Page, expect

from a2a_core.asyncdb import db
from a2a_core.models import Escalation, Task
from a2a_core.models.task import TERMINAL_STATES
from a2a_core.services.escalations import escalation_approve
from a2a_core.services.policy import policy_publish
from tests.a2a_core.protocol.helpers import eventually, request, send
from tests.e2e.conftest import live, shot

pytestmark = pytest.mark.live


async def the_demo_cast(hub) -> str:
    """pm, architect and tester as in the demo; director starts the work. Returns its token."""
    for name in ("pm", "architect", "tester"):
        await hub.endpoint_agent(name)
    _, token = await hub.caller("director")
    return token


async def pending_escalation() -> Escalation:
    async def check() -> Escalation | None:
        return await db(lambda: Escalation.objects.filter(status="pending").first())

    return await eventually(check)


async def task_spans(page: Page) -> list[str]:
    return await page.locator(".wf-span.task .wf-label .pair").all_inner_texts()


async def test_the_trace_of_a_three_level_chain_shows_each_hop_a_held_wait_and_a_refusal(
    hub, sdk, dashboard
):
    await db(
        policy_publish,
        document={"matrix": [{"caller": "architect", "target": "tester", "action": "approve"}]},
        reason="testers are busy",
        actor_label="setup",
    )
    token = await the_demo_cast(hub)
    root = await send(
        await sdk("pm", token), request("delegate architect delegate tester delegate pm echo spec")
    )
    await db(escalation_approve, escalation_id=(await pending_escalation()).pk, actor_label="ops")

    async def all_ended() -> bool:
        states = await db(lambda: list(Task.objects.values_list("state", flat=True)))
        return len(states) == 3 and all(state in TERMINAL_STATES for state in states)

    await eventually(all_ended)

    page = await dashboard("viewer")
    await page.goto(f"{hub.url}/tasks/{root.id}/")
    await page.get_by_role("link", name="Trace of the whole delegation").click()
    await expect(page.locator("#trace-live")).to_have_attribute("data-running", "no")

    await expect(page.locator(".trace-agents")).to_have_text(
        "Agents: architect, director, pm, tester"
    )
    assert await task_spans(page) == ["director → pm", "pm → architect", "architect → tester"]
    lefts = await page.locator(".wf-span.task .wf-bar").evaluate_all(
        "bars => bars.map(b => parseFloat(b.style.left))"
    )
    assert lefts == sorted(lefts) and all(0 <= left <= 100 for left in lefts)
    wait = page.locator(".wf-span.wait")
    await expect(wait).to_have_count(1)
    await expect(wait).to_contain_text("waiting for a human")
    await expect(wait.locator(".badge")).to_have_text("approved")
    refused = page.locator(".wf-decision.refused")
    await expect(refused).to_have_text("refused: loop_detected")
    await expect(page.locator(".wf-decision.held")).to_have_text(
        re.compile(r"^held for a human, approved by \S+ at .+")
    )

    # A click opens a span's details: its events, the refusal's reason in words.
    tester = page.locator(".wf-span.task", has_text="architect → tester")
    await tester.locator("summary").click()
    await expect(tester.locator(".wf-events")).to_contain_text(
        re.compile(r"refused: loop_detected.*pm is already on this chain")
    )
    await shot(page, "trace-three-levels")

    # A refused call has no task; its row in the feed still leads to the trace it was part of.
    await page.goto(f"{hub.url}/traffic/")
    refusal = page.locator("#feed-rows tr[data-message]", has_text="loop_detected")
    await refusal.get_by_role("link", name="trace").click()
    await expect(page.locator(".wf-decision.refused")).to_have_text("refused: loop_detected")


async def test_a_trace_grows_live_while_its_chain_runs(hub, sdk, dashboard):
    await db(
        policy_publish,
        document={"matrix": [{"caller": "pm", "target": "architect", "action": "approve"}]},
        reason="architects are busy",
        actor_label="setup",
    )
    token = await the_demo_cast(hub)
    root = await send(
        await sdk("pm", token), request("delegate architect delegate tester echo grown")
    )
    escalation = await pending_escalation()
    trace_id = await db(lambda: Task.objects.get(pk=root.id).trace_id)

    page = await dashboard("viewer")
    await page.goto(f"{hub.url}/traces/{trace_id}/")
    await live(page)
    await expect(page.locator("#trace-live")).to_have_attribute("data-running", "yes")
    assert await task_spans(page) == ["director → pm", "pm → architect"]
    await expect(page.locator(".wf-span.wait.running")).to_have_count(1)

    await db(escalation_approve, escalation_id=escalation.pk, actor_label="ops")

    spans = page.locator(".wf-span.task .wf-label .pair")
    await expect(spans).to_have_text(["director → pm", "pm → architect", "architect → tester"])
    await expect(page.locator("#trace-live")).to_have_attribute("data-running", "no")
    await shot(page, "trace-live")


async def test_a_short_trace_and_a_long_conversation_trace_draw_every_hop(hub, sdk, dashboard):
    names = [f"stage{i}" for i in range(5)]
    for name in names:
        await hub.endpoint_agent(name)
    _, token = await hub.caller("director")
    short = await send(await sdk("stage0", token), request("echo just one hop"))
    chain = " ".join(f"delegate {name}" for name in names[1:])
    for run in range(5):
        await send(
            await sdk("stage0", token), request(f"{chain} echo run {run}", context_id="release-7")
        )

    page = await dashboard("viewer")
    await page.goto(f"{hub.url}/tasks/{short.id}/trace/")
    assert await task_spans(page) == ["director → stage0"]
    await shot(page, "trace-short")

    await page.goto(f"{hub.url}/contexts/release-7/")
    await page.get_by_role("link", name="Trace of the whole conversation").click()
    spans = page.locator(".wf-span.task")
    await expect(spans).to_have_count(25)
    pairs = await task_spans(page)
    assert pairs[:5] == [
        "director → stage0",
        "stage0 → stage1",
        "stage1 → stage2",
        "stage2 → stage3",
        "stage3 → stage4",
    ]
    await shot(page, "trace-long")

    # The conversation has every hop's messages, delegated ones included.
    await page.goto(f"{hub.url}/contexts/release-7/")
    await expect(page.locator(".context-tasks li")).to_have_count(25)
