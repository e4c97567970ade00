"""Inbox agents end to end: the official SDK client calls, a real websocket receives."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from a2a.client import A2AClientError
from a2a.types.a2a_pb2 import TaskState

from a2a_core.asyncdb import db
from a2a_core.models import Agent, Delivery, Message, Task
from a2a_core.services.policy import policy_publish
from tests.a2a_core.inbox.helpers import Inbox
from tests.a2a_core.protocol.helpers import collect, eventually, request, send
from tests.a2a_core.test_metrics import scrape
from tests.factories import register

pytestmark = pytest.mark.live


async def inbox_agent(slug: str = "duc") -> tuple[Agent, str]:
    registration = await db(register, slug, inbox=True)
    return registration.agent, registration.token


async def deliveries(**filters: Any) -> list[Delivery]:
    return await db(lambda: list(Delivery.objects.filter(**filters).order_by("pk")))


async def status(agent_slug: str) -> str:
    return await db(lambda: Agent.objects.get(slug=agent_slug).status)


async def test_a_task_to_an_inbox_agent_is_delivered_and_answered(hub, sdk):
    _, duc_token = await inbox_agent("duc")
    _, alpha = await hub.caller("alpha")
    inbox = await Inbox.open(hub.url, "duc", duc_token)
    assert inbox.hello["agent"] == "duc"
    client = await sdk("duc", alpha)

    call = asyncio.create_task(send(client, request("review the login page")))
    delivery = await inbox.next_of("delivery")
    assert delivery["from"] == "alpha"
    assert delivery["message"]["parts"] == [{"text": "review the login page"}]
    assert delivery["message"]["taskId"] == delivery["taskId"]

    assert (await inbox.send({"type": "ack", "deliveryId": delivery["deliveryId"]}))["type"] == "ok"
    await inbox.send(
        {"type": "status", "taskId": delivery["taskId"], "state": "working", "text": "reading"}
    )
    await inbox.send(
        {
            "type": "artifact",
            "taskId": delivery["taskId"],
            "artifactId": "notes",
            "name": "notes",
            "parts": [{"text": "looks fine"}],
        }
    )
    done = await inbox.send(
        {"type": "status", "taskId": delivery["taskId"], "state": "completed", "text": "approved"}
    )
    assert done == {
        "type": "ok",
        "ref": None,
        "taskId": delivery["taskId"],
        "late": False,
        "duplicate": False,
        "state": "completed",
    }

    task = await call
    assert task.id == delivery["taskId"]
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert task.status.message.parts[0].text == "approved"
    assert task.artifacts[0].parts[0].text == "looks fine"
    [stored] = await deliveries()
    assert (stored.state, stored.attempts) == ("acked", 1)
    await inbox.close()


async def test_streaming_caller_sees_the_inbox_agents_chunks_as_they_come(hub, sdk):
    _, duc_token = await inbox_agent("duc")
    _, alpha = await hub.caller("alpha")
    inbox = await Inbox.open(hub.url, "duc", duc_token)
    client = await sdk("duc", alpha, streaming=True)

    async def agent() -> None:
        delivery = await inbox.next_of("delivery")
        task_id = delivery["taskId"]
        await inbox.send({"type": "status", "taskId": task_id, "state": "working"})
        for i, last in ((0, False), (1, False), (2, True)):
            await inbox.send(
                {
                    "type": "artifact",
                    "taskId": task_id,
                    "artifactId": "story",
                    "parts": [{"text": f"part {i} "}],
                    "append": i > 0,
                    "lastChunk": last,
                }
            )
        await inbox.send({"type": "status", "taskId": task_id, "state": "completed"})

    working = asyncio.create_task(agent())
    events = await collect(client.send_message(request("write a story")))
    await working
    kinds = [next(iter(e)) for e in events]
    assert kinds[0] == "task"
    assert kinds[1:] == [
        "statusUpdate",
        "artifactUpdate",
        "artifactUpdate",
        "artifactUpdate",
        "statusUpdate",
    ]
    assert [e["artifactUpdate"]["artifact"]["parts"][0]["text"] for e in events[2:5]] == [
        "part 0 ",
        "part 1 ",
        "part 2 ",
    ]
    assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    task = await db(
        lambda: Task.objects.prefetch_related("artifacts").get(pk=events[0]["task"]["id"])
    )
    assert [a.parts for a in task.artifacts.all()] == [
        [{"text": "part 0 "}, {"text": "part 1 "}, {"text": "part 2 "}]
    ]
    await inbox.close()


async def test_an_unacknowledged_delivery_comes_again_after_a_reconnect_and_nothing_doubles(
    hub, sdk
):
    _, duc_token = await inbox_agent("duc")
    _, alpha = await hub.caller("alpha")
    client = await sdk("duc", alpha)
    first = await Inbox.open(hub.url, "duc", duc_token)
    task = await send(client, request("summarise the report", return_immediately=True))
    delivery = await first.next_of("delivery")
    await first.send(
        {
            "type": "status",
            "taskId": task.id,
            "state": "working",
            "text": "on it",
            "messageId": "m-1",
        }
    )
    await first.close()  # gone mid-task, the delivery never acknowledged... but reported on

    second = await Inbox.open(hub.url, "duc", duc_token)
    assert second.hello["waiting"] == 0  # reporting on the task acknowledged it
    # A delivery never acknowledged at all is sent again on reconnect, as the same delivery.
    other = await send(client, request("and the appendix", return_immediately=True))
    again = await second.next_of("delivery")
    await second.close()
    third = await Inbox.open(hub.url, "duc", duc_token)
    assert third.hello["waiting"] == 1
    resent = await third.next_of("delivery")
    assert (resent["deliveryId"], resent["attempt"]) == (again["deliveryId"], 2)
    assert resent["taskId"] == other.id

    # Reports sent twice (the agent unsure they arrived) are recorded once.
    repeat = await third.send(
        {
            "type": "status",
            "taskId": task.id,
            "state": "working",
            "text": "on it",
            "messageId": "m-1",
        }
    )
    assert repeat["duplicate"] is True
    for frame_task in (task.id, other.id):
        await third.send(
            {"type": "status", "taskId": frame_task, "state": "completed", "text": "done"}
        )
    assert (await third.send({"type": "ack", "deliveryId": resent["deliveryId"]}))[
        "acknowledged"
    ] == 0

    stored = await deliveries()
    assert [(d.task_id, d.state) for d in stored] == [(task.id, "acked"), (other.id, "acked")]
    assert stored[1].attempts == 2 and delivery["deliveryId"] == stored[0].pk
    replies = await db(
        lambda: list(
            Message.objects.filter(task_id=task.id, direction="reply").values_list(
                "message_id", flat=True
            )
        )
    )
    assert replies.count("m-1") == 1
    await third.close()


async def test_an_offline_agents_work_queues_and_drains_when_it_connects(hub, sdk):
    _, duc_token = await inbox_agent("duc")
    _, alpha = await hub.caller("alpha")
    client = await sdk("duc", alpha)
    assert await status("duc") == "offline"
    tasks = [await send(client, request(f"job {i}", return_immediately=True)) for i in range(3)]
    assert {t.status.state for t in tasks} == {TaskState.TASK_STATE_SUBMITTED}
    assert [d.state for d in await deliveries()] == ["pending"] * 3
    _, samples = await scrape(hub.url)
    assert samples[("a2a_queue_size", ())] == 3

    inbox = await Inbox.open(hub.url, "duc", duc_token)
    assert inbox.hello["waiting"] == 3
    received = [await inbox.next_of("delivery") for _ in range(3)]
    assert [d["taskId"] for d in received] == [t.id for t in tasks]
    assert await status("duc") == "online"
    await inbox.close()
    await eventually(lambda: _is(status("duc"), "offline"))


async def _is(value: Any, expected: Any) -> bool:
    return (await value) == expected


async def test_a_full_inbox_queue_refuses_more_with_a_clear_error(hub, sdk):
    await db(
        policy_publish,
        document={"agentLimits": {"duc": {"inboxQueue": 2}}},
        reason="small",
        actor_label="test",
    )
    await inbox_agent("duc")
    _, alpha = await hub.caller("alpha")
    client = await sdk("duc", alpha)
    for i in range(2):
        await send(client, request(f"job {i}", return_immediately=True))
    with pytest.raises(A2AClientError, match="-32057") as caught:
        await send(client, request("one too many", return_immediately=True))
    assert "duc has 2 deliveries waiting (queue size 2)" in str(caught.value)
    refused = await db(lambda: list(Message.objects.filter(decision="reject")))
    assert [(m.decision_reason, m.task_id) for m in refused] == [("queue_full", None)]
    assert len(await deliveries()) == 2


async def test_an_inbox_agent_asks_for_input_and_the_caller_answers(hub, sdk):
    _, duc_token = await inbox_agent("duc")
    _, alpha = await hub.caller("alpha")
    client = await sdk("duc", alpha)
    inbox = await Inbox.open(hub.url, "duc", duc_token)

    call = asyncio.create_task(send(client, request("deploy it")))
    first = await inbox.next_of("delivery")
    await inbox.send(
        {
            "type": "status",
            "taskId": first["taskId"],
            "state": "input-required",
            "text": "to staging or production?",
        }
    )
    asked = await call
    assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert asked.status.message.parts[0].text == "to staging or production?"

    answer = asyncio.create_task(
        send(client, request("staging", task_id=asked.id, context_id=asked.context_id))
    )
    second = await inbox.next_of("delivery")
    assert (second["taskId"], second["message"]["parts"]) == (asked.id, [{"text": "staging"}])
    await inbox.send(
        {"type": "status", "taskId": asked.id, "state": "completed", "text": "deployed"}
    )
    done = await answer
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    await inbox.close()


async def test_a_canceled_task_is_announced_and_takes_no_more_reports(hub, sdk):
    _, duc_token = await inbox_agent("duc")
    _, alpha = await hub.caller("alpha")
    client = await sdk("duc", alpha)
    inbox = await Inbox.open(hub.url, "duc", duc_token)
    task = await send(client, request("long job", return_immediately=True))
    await inbox.next_of("delivery")
    from a2a.types.a2a_pb2 import CancelTaskRequest

    canceled = await client.cancel_task(CancelTaskRequest(id=task.id))
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    assert (await inbox.next_of("canceled"))["taskId"] == task.id
    late = await inbox.send({"type": "status", "taskId": task.id, "state": "completed"})
    assert (late["type"], late["code"]) == ("error", "illegal_transition")
    await inbox.close()


async def test_an_agent_asks_a_human_and_the_operators_answer_reaches_it(hub, sdk):
    from a2a_core.models import Escalation
    from a2a_core.services.escalations import escalation_answer

    _, duc_token = await inbox_agent("duc")
    _, alpha = await hub.caller("alpha")
    client = await sdk("duc", alpha)
    inbox = await Inbox.open(hub.url, "duc", duc_token)
    task = await send(client, request("ship the release", return_immediately=True))
    await inbox.next_of("delivery")
    asked = await inbox.send(
        {
            "type": "status",
            "taskId": task.id,
            "state": "input-required",
            "askHuman": True,
            "priority": "high",
            "text": "the changelog mentions a breaking change: go ahead?",
        }
    )
    assert asked["state"] == "input-required"
    escalation = await db(lambda: Escalation.objects.get(task_id=task.id))
    assert (escalation.kind, escalation.status, escalation.priority) == (
        "input_required",
        "pending",
        "high",
    )
    assert escalation.question == "the changelog mentions a breaking change: go ahead?"

    await db(
        escalation_answer, escalation_id=escalation.pk, text="yes, ship it", actor_label="operator"
    )
    answer = await inbox.next_of("delivery")
    assert (answer["taskId"], answer["kind"]) == (task.id, "response")
    assert answer["message"]["parts"] == [{"text": "yes, ship it"}]
    assert await db(lambda: Task.objects.get(pk=task.id).state) == "working"
    assert await db(lambda: Escalation.objects.get(pk=escalation.pk).status) == "answered"


async def test_a_question_the_caller_answers_first_is_withdrawn_from_the_humans(hub, sdk):
    from a2a_core.errors import Conflict
    from a2a_core.models import Escalation
    from a2a_core.services.escalations import escalation_answer

    _, duc_token = await inbox_agent("duc")
    _, alpha = await hub.caller("alpha")
    client = await sdk("duc", alpha)
    inbox = await Inbox.open(hub.url, "duc", duc_token)
    task = await send(client, request("ship it", return_immediately=True))
    await inbox.next_of("delivery")
    await inbox.send(
        {
            "type": "status",
            "taskId": task.id,
            "state": "input-required",
            "askHuman": True,
            "text": "sure?",
        }
    )
    await send(
        client, request("yes", task_id=task.id, context_id=task.context_id, return_immediately=True)
    )
    escalation = await db(lambda: Escalation.objects.get(task_id=task.id))
    assert escalation.status == "withdrawn"
    with pytest.raises(Conflict, match="already withdrawn"):
        await db(
            escalation_answer, escalation_id=escalation.pk, text="late", actor_label="operator"
        )
