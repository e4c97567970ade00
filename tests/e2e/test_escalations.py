"""The escalation inbox in real browsers, with real agents through the live hub: a human
answers an agent's question and its task continues; two operators decide on the same held
message at once and exactly one decision counts."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from a2a.types.a2a_pb2 import GetTaskRequest, TaskState
from django.utils import timezone
from playwright.async_api import Page, expect

from a2a_core.asyncdb import db
from a2a_core.models import AuditEvent, Escalation, Task
from a2a_core.schemas.a2a import ENVELOPE_MEDIA_TYPE
from a2a_core.services.policy import policy_publish
from tests.a2a_core.inbox.helpers import Inbox, close_opened_inboxes
from tests.a2a_core.protocol.helpers import eventually, request, send
from tests.e2e.conftest import live, shot
from tests.factories import question_escalation, register

pytestmark = pytest.mark.live


@pytest.fixture
async def inbox_agent(hub) -> AsyncIterator[Any]:
    """`await inbox_agent("duc")` -> a connected inbox agent's raw websocket."""

    async def connect(slug: str) -> Inbox:
        registration = await db(register, slug, inbox=True)
        return await Inbox.open(hub.url, slug, registration.token)

    yield connect
    await close_opened_inboxes()


async def hold_messages_from_alpha_to_echo(hub: Any) -> Any:
    await db(
        policy_publish,
        document={"matrix": [{"caller": "alpha", "target": "echo", "action": "approve"}]},
        reason="approve alpha -> echo",
        actor_label="test",
    )
    scripted, _, _ = await hub.endpoint_agent("echo")
    return scripted


async def open_inbox_page(page: Page, url: str) -> None:
    await page.goto(f"{url}/escalations/")
    await live(page)


def card(page: Page, text: str) -> Any:
    return page.locator("article.escalation", has_text=text)


async def test_an_operator_answers_a_question_and_the_agents_task_continues(
    hub, sdk, dashboard, inbox_agent
):
    await hold_messages_from_alpha_to_echo(hub)
    _, alpha = await hub.caller("alpha")
    duc = await inbox_agent("duc")
    to_duc = await sdk("duc", alpha)
    task = await send(to_duc, request("ship the release", return_immediately=True))
    work = await duc.next_of("delivery")
    await duc.send({"type": "ack", "deliveryId": work["deliveryId"]})
    await send(await sdk("echo", alpha), request("echo deploy <b>now</b>"))  # held

    watcher = await dashboard("viewer")
    await watcher.goto(f"{hub.url}/traffic/")
    await live(watcher)
    await expect(watcher.locator("#escalation-count")).to_have_text("1")

    await duc.send(
        {
            "type": "status",
            "taskId": task.id,
            "state": "input-required",
            "askHuman": True,
            "priority": "high",
            "text": "The changelog mentions a breaking change: go ahead?",
        }
    )
    await expect(watcher.locator("#escalation-count")).to_have_text("2")

    operator = await dashboard("operator")
    await open_inbox_page(operator, hub.url)
    asked = card(operator, "breaking change")
    held = card(operator, "deploy")
    await expect(operator.locator("#escalation-list article.pending")).to_have_count(2)
    # The question is more urgent than the held message: it comes first.
    await expect(operator.locator("#escalation-list article.pending").first).to_contain_text(
        "breaking change"
    )
    await expect(held).to_contain_text("echo deploy <b>now</b>")  # agent markup is text
    await expect(held.locator("[data-deadline]")).to_contain_text(re.compile(r"^in 59m \d+s$"))
    await asked.locator("textarea[name=text]").fill("Yes: ship it, and mention the break.")
    await shot(operator, "escalations")

    await asked.get_by_role("button", name="Send answer").click()
    await expect(asked.get_by_role("status")).to_contain_text("Answer sent")

    answer = await duc.next_of("delivery")
    assert answer["taskId"] == task.id
    assert answer["message"]["parts"] == [{"text": "Yes: ship it, and mention the break."}]
    await duc.send({"type": "ack", "deliveryId": answer["deliveryId"]})
    await duc.send({"type": "status", "taskId": task.id, "state": "completed", "text": "shipped"})

    async def completed() -> Any:
        done = await to_duc.get_task(GetTaskRequest(id=task.id))
        return done if done.status.state == TaskState.TASK_STATE_COMPLETED else None

    assert (await eventually(completed)).status.message.parts[0].text == "shipped"
    await expect(watcher.locator("#escalation-count")).to_have_text("1")
    await expect(operator.locator("#escalation-count")).to_have_text("1")
    await expect(operator.locator("#escalation-list .decided article")).to_contain_text(
        "Answered by operator"
    )


async def test_a_structured_answer_fits_the_schema_the_agent_declared(
    hub, sdk, dashboard, inbox_agent
):
    _, alpha = await hub.caller("alpha")
    duc = await inbox_agent("duc")
    to_duc = await sdk("duc", alpha)
    task = await send(to_duc, request("plan the release", return_immediately=True))
    work = await duc.next_of("delivery")
    await duc.send({"type": "ack", "deliveryId": work["deliveryId"]})
    schema = {
        "type": "object",
        "required": ["window"],
        "properties": {"window": {"type": "string", "enum": ["tonight", "monday"]}},
    }
    await duc.send(
        {
            "type": "status",
            "taskId": task.id,
            "state": "input-required",
            "askHuman": True,
            "parts": [
                {"text": "Which release window?"},
                {
                    "data": {
                        "kind": "question",
                        "payload": {"text": "Which release window?", "answerSchema": schema},
                    },
                    "mediaType": ENVELOPE_MEDIA_TYPE,
                },
            ],
        }
    )

    operator = await dashboard("operator")
    await open_inbox_page(operator, hub.url)
    asked = card(operator, "Which release window?")
    await asked.locator("textarea[name=text]").fill("The quiet one.")
    # The schema's form is there; the data can also be given as JSON.
    await expect(asked.locator("select[name='data.window']")).to_be_visible()
    await asked.get_by_text("or give it as JSON").click()
    await asked.locator("textarea[name=data]").fill('{"window": "friday"}')
    await asked.get_by_role("button", name="Send answer").click()
    await expect(asked.locator(".field-error")).to_contain_text("must be one of")
    await expect(asked.locator("textarea[name=text]")).to_have_value("The quiet one.")

    await asked.locator("textarea[name=data]").fill('{"window": "monday"}')
    await asked.get_by_role("button", name="Send answer").click()
    await expect(asked.get_by_role("status")).to_contain_text("Answer sent")
    answer = await duc.next_of("delivery")
    assert answer["message"]["parts"] == [
        {"text": "The quiet one."},
        {"data": {"window": "monday"}, "mediaType": "application/json"},
    ]


async def test_two_operators_decide_on_one_held_message_at_once_and_one_wins(hub, sdk, dashboard):
    echo = await hold_messages_from_alpha_to_echo(hub)
    _, alpha = await hub.caller("alpha")
    to_echo = await sdk("echo", alpha)
    task = await send(to_echo, request("echo release notes"))
    assert task.status.state == TaskState.TASK_STATE_AUTH_REQUIRED

    first = await dashboard("operator")
    second = await dashboard("operator")  # operator2
    for page in (first, second):
        await open_inbox_page(page, hub.url)
    approving, rejecting = card(first, "release notes"), card(second, "release notes")
    await rejecting.locator("input[name=reason]").fill("not before the freeze ends")

    await asyncio.gather(
        approving.get_by_role("button", name="Approve", exact=True).click(),
        rejecting.get_by_role("button", name="Reject").click(),
    )

    async def decided_one() -> Escalation | None:
        found = await db(lambda: Escalation.objects.select_related("decided_by").get())
        return None if found.is_open else found

    decided = await eventually(decided_one)
    assert decided.status in ("approved", "rejected")
    won_approving = decided.status == "approved"
    winner, loser = (first, second) if won_approving else (second, first)
    assert decided.decided_by.username == ("operator" if won_approving else "operator2")
    lost = card(loser, "release notes")
    await expect(lost.get_by_role("status")).to_contain_text(
        f"Already {decided.status} by {decided.decided_by.username}; your "
        + ("rejection" if won_approving else "approval")
        + " was not applied."
    )
    for page in (winner, loser):  # every window shows the outcome, no button left to press
        shown = card(page, "release notes")
        await expect(shown).to_have_attribute("data-status", decided.status)
        await expect(shown.locator("button")).to_have_count(0)
        await expect(page.locator("#escalation-count")).to_have_text("0")
    # The loser's notice survives the live refresh that moved the card under "decided".
    await expect(loser.locator("#escalation-list .decided article")).to_contain_text("Already")
    await shot(loser, "escalation-conflict")

    decisions = await db(
        lambda: list(
            AuditEvent.objects.filter(action__startswith="escalation.").values_list(
                "action", flat=True
            )
        )
    )
    assert decisions == [f"escalation.{'approve' if won_approving else 'reject'}"]
    if won_approving:
        done = await eventually(
            lambda: _task_state(to_echo, task.id, TaskState.TASK_STATE_COMPLETED)
        )
        assert done.artifacts[0].parts[0].text == "echo: release notes"
        assert [m["parts"][0]["text"] for m in echo.state.messages] == ["echo release notes"]
    else:
        stored = await db(lambda: Task.objects.get(pk=task.id))
        assert (stored.state, stored.reason) == ("rejected", "not before the freeze ends")
        assert echo.state.messages == []


async def _task_state(client: Any, task_id: str, state: Any) -> Any:
    task = await client.get_task(GetTaskRequest(id=task_id))
    return task if task.status.state == state else None


async def test_a_card_entering_the_warning_window_turns_into_a_warning_while_it_is_open(
    hub, dashboard, settings
):
    settings.HUB_NOTIFY_WARN_SECONDS = 600

    def asked_with_deadline_in(seconds: int) -> Escalation:
        escalation = question_escalation("rotate the certificates?")
        escalation.deadline = timezone.now() + timedelta(seconds=seconds)
        escalation.save(update_fields=["deadline"])
        return escalation

    await db(asked_with_deadline_in, 603)  # just outside the window when the page renders
    operator = await dashboard("operator")
    await open_inbox_page(operator, hub.url)
    asked = card(operator, "rotate the certificates")
    await expect(asked).not_to_have_class(re.compile(r"\bexpiring\b"))
    await expect(asked.locator(".expiry-warning")).to_be_hidden()

    # A few seconds later the deadline is inside the window: the open page says so.
    await expect(asked.locator(".expiry-warning")).to_have_text("expiring soon", timeout=15_000)
    await expect(asked).to_have_class(re.compile(r"\bexpiring\b"))
    await operator.goto(f"{hub.url}/escalations/")  # the server renders the same
    await expect(card(operator, "rotate the certificates").locator(".expiry-warning")).to_have_text(
        "expiring soon"
    )
    await expect(operator.locator("#escalation-expiring")).to_have_text("1 expiring")
