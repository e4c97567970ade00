"""The escalation inbox at volume, in real browsers: 100 messages from real agents held
through the live hub, then filtered, searched, claimed, approved in bulk and from the
keyboard — and each approved message reaches its agent."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from a2a.types.a2a_pb2 import Part, TaskState
from google.protobuf.json_format import ParseDict
from playwright.async_api import Page, expect

from a2a_core.asyncdb import db
from a2a_core.models import AuditEvent, Escalation
from a2a_core.schemas.envelopes import ENVELOPE_EXTENSION, ENVELOPE_MEDIA_TYPE
from a2a_core.services.policy import policy_publish
from tests.a2a_core.inbox.helpers import Inbox, close_opened_inboxes
from tests.a2a_core.protocol.helpers import eventually, request, send
from tests.e2e.conftest import SCREENSHOTS, live
from tests.factories import register

pytestmark = pytest.mark.live

# Who asks whom, and about what: 25 held messages per pair.
PAIRS = {
    "alpha": ("echo", "deploy service"),
    "beta": ("relay", "rotate key"),
    "gamma": ("echo", "migrate table"),
    "delta": ("relay", "restart worker"),
}
CALLERS = list(PAIRS)


@dataclass
class Busy:
    targets: dict[str, Any]  # slug -> ScriptedAgent
    texts: list[str]  # the held messages, in the order they were sent


def text_of(i: int) -> str:
    caller = CALLERS[i % 4]
    return f"{PAIRS[caller][1]} #{i}"


@pytest.fixture
async def busy(hub, sdk) -> Busy:
    """100 held messages: four callers, two endpoint agents, every message waiting."""
    await db(
        policy_publish,
        document={
            "matrix": [
                {"caller": caller, "target": target, "action": "approve"}
                for caller, (target, _) in PAIRS.items()
            ]
        },
        reason="hold everything for the inbox",
        actor_label="test",
    )
    targets = {slug: (await hub.endpoint_agent(slug))[0] for slug in ("echo", "relay")}
    clients = {}
    for caller, (target, _) in PAIRS.items():
        _, token = await hub.caller(caller)
        clients[caller] = await sdk(target, token)
    gate = asyncio.Semaphore(8)

    async def hold(i: int) -> None:
        async with gate:
            task = await send(clients[CALLERS[i % 4]], request(text_of(i)))
            assert task.status.state == TaskState.TASK_STATE_AUTH_REQUIRED

    await asyncio.gather(*(hold(i) for i in range(100)))
    return Busy(targets=targets, texts=[text_of(i) for i in range(100)])


async def inbox(page: Page, url: str, query: str = "") -> None:
    await page.goto(f"{url}/escalations/{query}")
    await live(page)


async def shot(page: Page, name: str) -> None:
    """The window as the operator sees it (a whole page of 50 cards is too tall to read)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(SCREENSHOTS / f"{name}.png"))


def cards(page: Page) -> Any:
    return page.locator("#escalation-list .escalations:not(.decided) article.escalation")


def received(agent: Any) -> list[str]:
    return [m["parts"][0]["text"] for m in agent.state.messages]


async def test_filters_and_search_narrow_100_escalations_and_the_url_reproduces_the_view(
    hub, dashboard, busy
):
    operator = await dashboard("operator")
    await inbox(operator, hub.url)
    await expect(operator.locator("#pending-total")).to_have_text("100")
    await expect(cards(operator)).to_have_count(50)
    await shot(operator, "escalation-inbox-busy")

    await operator.select_option("select[name=agent]", "beta")
    await expect(cards(operator)).to_have_count(25)
    await expect(operator).to_have_url(f"{hub.url}/escalations/?agent=beta")
    await operator.fill("input[name=q]", "rotate key #1")
    # beta asked #1, #5, #9, #13, #17, ...: "#1" begins three of them.
    await expect(cards(operator)).to_have_count(3)
    await expect(operator.locator("#pending-total")).to_have_text("3")
    shared = operator.url
    assert shared == f"{hub.url}/escalations/?agent=beta&q=rotate+key+%231"

    colleague = await dashboard("viewer")
    await inbox(colleague, hub.url)
    await colleague.goto(shared)
    await expect(cards(colleague)).to_have_count(3)
    await expect(colleague.locator("input[name=q]")).to_have_value("rotate key #1")
    # Their order is how the held messages raced in (eight were sent at a time).
    said = await cards(colleague).locator("pre.said").all_text_contents()
    assert sorted(text.strip() for text in said) == [
        "rotate key #1",
        "rotate key #13",
        "rotate key #17",
    ]

    await colleague.goto(f"{hub.url}/escalations/?group=agent&pair=gamma:echo")
    await expect(colleague.locator(".escalation-group")).to_have_count(1)
    await expect(cards(colleague)).to_have_count(25)
    await colleague.goto(f"{hub.url}/escalations/?group=agent")
    await expect(colleague.locator(".escalation-group")).to_have_count(4)
    # 50 cards are shown; each group still counts all 25 of its agent's.
    await expect(colleague.locator(".escalation-group h3 .badge")).to_have_text(["25"] * 4)
    await shot(colleague, "escalation-inbox-grouped")


async def test_a_claim_in_one_window_shows_in_another_that_keeps_its_filters(hub, dashboard, busy):
    first = await dashboard("operator")
    second = await dashboard("operator")  # operator2
    await inbox(first, hub.url, "?agent=delta&sort=oldest")
    await inbox(second, hub.url, "?agent=delta&sort=oldest")
    await expect(cards(second)).to_have_count(25)
    # The held messages were sent eight at a time, so which of delta's is oldest varies; both
    # windows sort alike, so their first cards are the same one.
    target = cards(first).first
    await expect(target).to_contain_text(re.compile(r"restart worker #\d+"))
    await expect(cards(second).first).to_contain_text(
        (await target.locator("pre.said").first.text_content() or "").strip()
    )

    started = time.monotonic()
    await target.get_by_role("button", name="I'm on it").click()
    seen = cards(second).first
    await expect(seen).to_contain_text("operator is on it")
    print(f"claim seen in the other window after {time.monotonic() - started:.3f} s")
    await expect(seen.get_by_role("button", name="Take over")).to_be_visible()
    await expect(target).to_contain_text("you are on it")
    # The live refresh kept the second window's view: still delta's 25, oldest first.
    await expect(cards(second)).to_have_count(25)
    await expect(second.locator("select[name=agent]")).to_have_value("delta")
    await shot(second, "escalation-inbox-claimed")

    await seen.get_by_role("button", name="Take over").click()
    await expect(target).to_contain_text("operator2 is on it")
    await target.get_by_role("button", name="Take over").click()
    await expect(seen).to_contain_text("operator is on it")
    actions = await db(
        lambda: list(
            AuditEvent.objects.filter(action__startswith="escalation.")
            .order_by("pk")
            .values_list("action", "actor_label")
        )
    )
    assert actions == [
        ("escalation.claim", "operator"),
        ("escalation.take_over", "operator2"),
        ("escalation.take_over", "operator"),
    ]


async def test_a_bulk_approve_of_20_delivers_20_messages_each_to_its_agent(hub, dashboard, busy):
    operator = await dashboard("operator")
    await inbox(operator, hub.url, "?sort=oldest")
    boxes = cards(operator).locator("input.pick")
    for i in range(20):
        await boxes.nth(i).check()
    # The 20 oldest: which they are depends on how the held messages raced in.
    chosen = [
        text.strip()
        for text in (await cards(operator).locator("pre.said").all_text_contents())[:20]
    ]
    await expect(operator.locator("#bulk-count")).to_have_text("20")
    await operator.get_by_role("button", name="Approve selected").click()
    await expect(operator.locator("#bulk-notice")).to_have_text("Approved 20 of 20.")
    await expect(operator.locator("#pending-total")).to_have_text("80")

    target_of = {phrase: target for target, phrase in PAIRS.values()}
    expected = {
        slug: sorted(t for t in chosen if target_of[t.rsplit(" #", 1)[0]] == slug)
        for slug in busy.targets
    }

    async def all_delivered() -> bool:
        return all(len(received(busy.targets[slug])) >= len(expected[slug]) for slug in expected)

    await eventually(all_delivered, within=30)
    for slug, agent in busy.targets.items():
        assert sorted(received(agent)) == expected[slug]
    decided = await db(
        lambda: list(
            Escalation.objects.exclude(status="pending").values_list("status", "decided_by_name")
        )
    )
    assert decided == [("approved", "operator")] * 20
    await expect(operator.locator("#escalation-list .decided article").first).to_contain_text(
        "Approved by operator"
    )


async def test_enter_in_the_bulk_reason_rejects_the_selected_and_approves_nothing(
    hub, dashboard, busy
):
    operator = await dashboard("operator")
    await inbox(operator, hub.url, "?sort=oldest")
    boxes = cards(operator).locator("input.pick")
    await boxes.nth(0).check()
    await boxes.nth(1).check()
    await expect(operator.locator("#bulk-count")).to_have_text("2")
    reason = operator.get_by_label("Reason for rejecting the selected")
    await reason.fill("not during the freeze")
    await reason.press("Enter")
    await expect(operator.locator("#bulk-notice")).to_have_text("Rejected 2 of 2.")
    decided = await db(
        lambda: list(Escalation.objects.exclude(status="pending").values_list("status", "answer"))
    )
    assert decided == [("rejected", "not during the freeze")] * 2
    assert all(received(agent) == [] for agent in busy.targets.values())


async def test_an_operator_approves_with_the_keyboard_alone(hub, dashboard, busy):
    operator = await dashboard("operator")
    await inbox(operator, hub.url, "?sort=oldest&agent=alpha")
    await operator.keyboard.press("?")
    await expect(operator.locator("dialog#shortcuts")).to_be_visible()
    await operator.keyboard.press("Escape")
    await expect(operator.locator("dialog#shortcuts")).to_be_hidden()

    await operator.keyboard.press("j")
    await operator.keyboard.press("j")
    current = operator.locator("article.escalation.current")
    # The second oldest of alpha's held messages; which it is depends on how they raced in.
    second = (await cards(operator).nth(1).locator("pre.said").first.text_content() or "").strip()
    assert re.fullmatch(r"deploy service #\d+", second), second
    await expect(current).to_contain_text(second)
    await operator.keyboard.press("c")
    await expect(current).to_contain_text("you are on it")
    await operator.keyboard.press("a")
    await expect(operator.locator("#pending-total")).to_have_text("24")

    echo = busy.targets["echo"]

    async def delivered() -> list[str]:
        return received(echo)

    assert await eventually(delivered) == [second]
    await operator.keyboard.press("/")
    await operator.keyboard.type("#8")
    # alpha's still waiting: #8, #80, #84, #88, but for the one just approved.
    searched = {f"deploy service #{n}" for n in (8, 80, 84, 88)} - {second}
    await expect(cards(operator)).to_have_count(len(searched))


async def test_editing_the_envelope_changes_what_the_agent_receives_and_a_bad_edit_sends_nothing(
    hub, sdk, dashboard
):
    await db(
        policy_publish,
        document={"matrix": [{"caller": "alpha", "target": "echo", "action": "approve"}]},
        reason="hold alpha -> echo",
        actor_label="test",
    )
    echo = (await hub.endpoint_agent("echo"))[0]
    _, token = await hub.caller("alpha")
    operator = await dashboard("operator")
    await inbox(operator, hub.url)
    await expect(operator.locator("#escalation-list .panel.empty").first).to_contain_text(
        "Nothing waits for a human"
    )
    await shot(operator, "escalation-inbox-empty")

    envelope = {
        "kind": "task_request",
        "priority": "high",
        "payload": {"title": "Migrate the users table", "complexity": "high"},
    }
    typed = request(
        "",
        parts=[
            Part(text="migrate please"),
            ParseDict({"data": envelope, "mediaType": ENVELOPE_MEDIA_TYPE}, Part()),
        ],
    )
    typed.message.extensions.append(ENVELOPE_EXTENSION)
    task = await send(await sdk("echo", token), typed)
    assert task.status.state == TaskState.TASK_STATE_AUTH_REQUIRED

    held = cards(operator).first
    await expect(held).to_contain_text("migrate please")
    await held.get_by_text("Edit, then approve").click()
    title = held.locator("[name='env.payload.title']")
    await expect(title).to_have_value("Migrate the users table")
    await expect(held.locator("[name='env.payload.complexity']")).to_have_value("high")

    await title.fill("")
    await held.locator("[name='env.payload.complexity']").select_option("trivial")
    await held.get_by_role("button", name="Approve edited message").click()
    error = held.locator(".field-error[data-field='payload.title']")
    await expect(error).to_contain_text("at least 1 character")
    await expect(held.locator("[name='env.payload.complexity']")).to_have_value("trivial")
    await held.locator("details.edit summary").scroll_into_view_if_needed()
    await shot(operator, "escalation-inbox-editing")
    assert echo.state.messages == []
    assert await db(lambda: Escalation.objects.get().status) == "pending"

    await held.locator("[name='env.payload.title']").fill("Migrate users in batches of 1000")
    await held.get_by_role("button", name="Approve edited message").click()
    await expect(operator.locator("#pending-total")).to_have_text("0")

    async def delivered() -> list[Any]:
        return echo.state.messages

    [got] = await eventually(delivered)
    assert got["parts"][0]["text"] == "migrate please"
    assert got["parts"][1]["data"]["payload"]["title"] == "Migrate users in batches of 1000"
    assert got["parts"][1]["data"]["payload"]["complexity"] == "trivial"
    event = await db(lambda: AuditEvent.objects.get(action="escalation.edit_approve"))
    assert [d["path"] for d in event.data["diff"]] == [
        "parts[1].data.payload.title",
        "parts[1].data.payload.complexity",
    ]


@pytest.fixture
async def duc(hub) -> AsyncIterator[Inbox]:
    """A connected inbox agent, `duc`."""
    registration = await db(register, "duc", inbox=True)
    yield await Inbox.open(hub.url, "duc", registration.token)
    await close_opened_inboxes()


async def test_an_agents_options_are_quick_replies_and_its_schema_a_form(hub, sdk, dashboard, duc):
    _, alpha = await hub.caller("alpha")
    to_duc = await sdk("duc", alpha)
    task = await send(to_duc, request("plan the release", return_immediately=True))
    work = await duc.next_of("delivery")
    await duc.send({"type": "ack", "deliveryId": work["deliveryId"]})
    schema = {
        "type": "object",
        "required": ["window", "retries"],
        "properties": {
            "window": {"type": "string", "enum": ["tonight", "monday"]},
            "retries": {"type": "integer", "minimum": 0, "maximum": 3},
        },
    }
    question = {"text": "Which window?", "options": ["tonight", "monday"], "answerSchema": schema}
    await duc.send(
        {
            "type": "status",
            "taskId": task.id,
            "state": "input-required",
            "askHuman": True,
            "parts": [
                {"text": "Which window?"},
                {
                    "data": {"kind": "question", "payload": question},
                    "mediaType": ENVELOPE_MEDIA_TYPE,
                },
            ],
        }
    )
    operator = await dashboard("operator")
    await inbox(operator, hub.url)
    asked = cards(operator).first
    await expect(asked).to_contain_text("Which window?")
    # Questions have a deadline now (HUB_QUESTION_DEADLINE_SECONDS, an hour by default).
    await expect(asked.locator("[data-deadline]")).to_contain_text(re.compile(r"^in 59m \d+s$"))
    await asked.locator("[name='data.window']").select_option("monday")
    await asked.locator("[name='data.retries']").fill("7")
    await asked.get_by_role("button", name="monday").click()
    await expect(asked.locator(".field-error[data-field='retries']")).to_have_text("at most 3")
    await shot(operator, "escalation-inbox-question")

    await asked.locator("[name='data.retries']").fill("2")
    await asked.get_by_role("button", name="monday").click()
    answer = await duc.next_of("delivery")
    assert answer["message"]["parts"] == [
        {"text": "monday"},
        {"data": {"window": "monday", "retries": 2}, "mediaType": "application/json"},
    ]
