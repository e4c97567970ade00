"""A trace's span opened in a real browser: its request and answer, what the hub decided, and
where its time went — the hub's share, the agent's and a human's, adding up to the span."""

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
from tests.e2e.conftest import shot
from tests.e2e.test_trace import the_demo_cast

pytestmark = pytest.mark.live


async def all_ended(count: int) -> None:
    async def check() -> bool:
        states = await db(lambda: list(Task.objects.values_list("state", flat=True)))
        return len(states) == count and all(state in TERMINAL_STATES for state in states)

    await eventually(check)


async def open_span(page: Page, pair: str) -> None:
    await page.locator(".wf-span.task summary", has_text=pair).click()
    await expect(page.locator("#span-panel")).to_be_visible()
    caller, _, target = pair.partition(" → ")
    await expect(page.locator("#span-panel .span-head .pair")).to_have_text(f"{caller}→{target}")


async def split_us(page: Page) -> tuple[int, dict[str, int], list[int]]:
    """The span's duration, each one's total, and each stretch, as the panel shows them (µs)."""
    panel = page.locator("#span-panel .span-panel-body")
    duration = int(await panel.get_attribute("data-duration-us") or "-1")
    totals = {
        str(await li.get_attribute("data-who")): int(await li.get_attribute("data-us") or "0")
        for li in await panel.locator(".split-total").all()
    }
    stretches = [
        int(us)
        for us in await panel.locator("tr.split-segment").evaluate_all(
            "rows => rows.map(r => r.dataset.us)"
        )
    ]
    return duration, totals, stretches


async def test_a_span_opens_with_its_request_answer_and_the_hub_agent_split(hub, sdk, dashboard):
    token = await the_demo_cast(hub)
    root = await send(
        await sdk("pm", token), request("delegate architect delegate tester echo the spec")
    )
    await all_ended(3)
    trace_id = await db(lambda: Task.objects.get(pk=root.id).trace_id)

    page = await dashboard("viewer")
    await page.goto(f"{hub.url}/traces/{trace_id}/")
    await open_span(page, "architect → tester")
    panel = page.locator("#span-panel")
    await expect(panel.locator(".span-request")).to_have_text(re.compile(r"echo the spec"))
    await expect(panel.locator(".span-answer")).to_contain_text("echo: the spec")
    await expect(panel.locator(".span-answer .span-artifact")).to_contain_text("echo")
    await expect(panel.locator(".span-decisions")).to_contain_text("Delivered")
    await expect(panel.locator(".span-statuses")).to_contain_text("completed")
    await expect(panel.locator(".span-attributes")).to_contain_text("architect → tester")

    duration, totals, stretches = await split_us(page)
    assert duration > 0
    # The hub's share and the agent's are both there, and nothing is left unaccounted for.
    assert totals.keys() == {"hub", "agent"}, totals
    assert sum(totals.values()) == duration
    assert sum(stretches) == duration
    whats = await panel.locator("tr.split-segment td:first-child").all_inner_texts()
    assert [w for w in whats if w != "in the hub"] == [
        "accepted",
        "judged",
        "committed",
        "delivered",
        "working",
        "recorded",
    ], whats
    await shot(page, "span-panel")

    # The middle hop: the agent's time holds its own call to the tester.
    await open_span(page, "pm → architect")
    duration, totals, stretches = await split_us(page)
    assert sum(totals.values()) == duration == sum(stretches)
    assert totals["agent"] > totals["hub"]

    # A span has a page of its own too.
    tester = await db(lambda: Task.objects.get(target__slug="tester").pk)
    await page.goto(f"{hub.url}/traces/{trace_id}/spans/{tester}/")
    await expect(page.locator(".span-request")).to_contain_text("echo the spec")


async def test_a_held_span_shows_a_humans_wait_beside_the_hub_and_the_agent(hub, sdk, dashboard):
    await db(
        policy_publish,
        document={"matrix": [{"caller": "director", "target": "pm", "action": "approve"}]},
        reason="a human looks first",
        actor_label="setup",
    )
    token = await the_demo_cast(hub)
    root = await send(await sdk("pm", token), request("echo after a look"))

    async def pending() -> Escalation | None:
        return await db(lambda: Escalation.objects.filter(status="pending").first())

    escalation = await eventually(pending)
    await db(escalation_approve, escalation_id=escalation.pk, actor_label="ops")
    await all_ended(1)
    trace_id = await db(lambda: Task.objects.get(pk=root.id).trace_id)

    page = await dashboard("viewer")
    await page.goto(f"{hub.url}/traces/{trace_id}/")
    await open_span(page, "director → pm")
    duration, totals, stretches = await split_us(page)
    assert {"hub", "agent", "human"} <= totals.keys(), totals
    assert sum(totals.values()) == duration == sum(stretches)
    await expect(page.locator("#span-panel .split-totals")).to_contain_text("a human")
    await shot(page, "span-panel-held")
