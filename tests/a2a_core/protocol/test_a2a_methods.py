"""Every A2A method through the hub, with the official a2a-sdk client, on both bindings."""

from __future__ import annotations

import asyncio

import pytest
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import TaskNotCancelableError
from google.protobuf.json_format import MessageToDict

from a2a_core.asyncdb import db
from a2a_core.models import Artifact, TaskEvent
from tests.a2a_core.protocol.helpers import (
    BINDINGS,
    collect,
    eventually,
    request,
    send,
    stored_messages,
    stored_task,
)
from tests.a2a_core.protocol.test_metadata import direct_client

pytestmark = [pytest.mark.live, pytest.mark.parametrize("binding", BINDINGS)]


async def test_blocking_send_answers_with_the_finished_task_and_stores_what_crossed_the_wire(
    hub, sdk, binding
):
    scripted, _, _ = await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    client = await sdk("echo", token, binding=binding)

    task = await send(client, request("echo hello", message_id="m-hello"))

    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    [forwarded] = [r for r in scripted.state.requests if r.get("content-type")]
    assert forwarded["a2a-version"] == "1.0"
    assert [p.text for p in task.artifacts[0].parts] == ["echo: hello"]
    row = await stored_task(task.id)
    assert (row.caller.slug, row.target.slug, row.state) == ("alpha", "echo", "completed")
    assert row.remote_task_id and row.remote_task_id != task.id
    assert row.context_id == task.context_id
    messages = await stored_messages(task.id)
    assert [(m.message_id, m.direction, m.kind, m.delivery_state) for m in messages] == [
        ("m-hello", "request", "request", "delivered")
    ]
    assert messages[0].latency_ms is not None and messages[0].responded_at is not None
    artifacts = await db(
        lambda: list(Artifact.objects.filter(task_id=task.id).values_list("parts", flat=True))
    )
    assert artifacts == [[{"text": "echo: hello"}]]
    # What GetTask returns is what SendMessage returned: the stored rows are the wire's.
    fetched = await client.get_task(GetTaskRequest(id=task.id))
    assert MessageToDict(fetched) == MessageToDict(task)


async def test_an_agent_that_speaks_a2a_0_3_is_called_in_0_3(hub, sdk, binding):
    scripted, _, _ = await hub.endpoint_agent("elder", version="0.3")
    _, token = await hub.caller("alpha")
    client = await sdk("elder", token, binding=binding)

    task = await send(client, request("echo from 1.0", message_id="m-elder"))

    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert [p.text for p in task.artifacts[0].parts] == ["echo: from 1.0"]
    # The hub called the agent in 0.3 (no A2A-Version 1.0 header), which answered in kind.
    [forwarded] = [r for r in scripted.state.requests if r.get("content-type")]
    assert forwarded.get("a2a-version", "0.3") == "0.3"
    assert (await stored_task(task.id)).state == "completed"


async def test_return_immediately_answers_at_once_and_the_task_finishes_in_the_background(
    hub, sdk, binding
):
    await hub.endpoint_agent("worker")
    _, token = await hub.caller("alpha")
    client = await sdk("worker", token, binding=binding)

    task = await send(client, request("slow 0.4", return_immediately=True))

    assert task.status.state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)

    async def finished() -> Task | None:
        current = await client.get_task(GetTaskRequest(id=task.id))
        return current if current.status.state == TaskState.TASK_STATE_COMPLETED else None

    done = await eventually(finished)
    assert done.artifacts[0].parts[0].text == "done slowly"


async def test_stream_relays_every_event_in_order_and_ends_with_the_task(hub, sdk, binding):
    await hub.endpoint_agent("streamer")
    _, token = await hub.caller("alpha")
    client = await sdk("streamer", token, binding=binding, streaming=True)

    events = await collect(client.send_message(request("stream 4")))

    first, *rest = events
    assert first["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
    task_id = first["task"]["id"]
    shape = [
        ("status", e["statusUpdate"]["status"]["state"])
        if "statusUpdate" in e
        else ("artifact", e["artifactUpdate"]["artifact"]["parts"][0]["text"])
        for e in rest
    ]
    assert shape == [
        ("status", "TASK_STATE_WORKING"),
        ("artifact", "chunk 0;"),
        ("artifact", "chunk 1;"),
        ("artifact", "chunk 2;"),
        ("artifact", "chunk 3;"),
        ("status", "TASK_STATE_COMPLETED"),
    ]
    assert all(
        (e.get("statusUpdate") or e.get("artifactUpdate"))["taskId"] == task_id for e in rest
    )
    assert rest[-2]["artifactUpdate"]["lastChunk"] is True
    stored = await db(lambda: Artifact.objects.get(task_id=task_id))
    assert [p["text"] for p in stored.parts] == ["chunk 0;", "chunk 1;", "chunk 2;", "chunk 3;"]
    assert stored.complete


async def test_subscribers_see_the_task_then_the_same_events_as_the_caller(hub, sdk, binding):
    await hub.endpoint_agent("worker")
    _, token = await hub.caller("alpha")
    client = await sdk("worker", token, binding=binding, streaming=True)
    watcher = await sdk("worker", token, binding=binding, streaming=True)
    starter = await sdk("worker", token, binding=binding)

    task_id = (await send(starter, request("stream 4 0.5", return_immediately=True))).id
    caller_events, watcher_events = await asyncio.gather(
        collect(client.subscribe(SubscribeToTaskRequest(id=task_id))),
        collect(watcher.subscribe(SubscribeToTaskRequest(id=task_id))),
    )

    # Each subscriber gets the task as it was when it joined, then every later event exactly
    # once, in order: snapshot plus events reconstructs the same life for both.
    def life(events: list[dict]) -> list[object]:
        snapshot = events[0]["task"]
        assert snapshot["id"] == task_id
        seen: list[object] = [snapshot["status"]["state"]]
        for e in events[1:]:
            if "artifactUpdate" in e:
                seen.append(e["artifactUpdate"]["artifact"]["parts"][0]["text"])
            else:
                seen.append(e["statusUpdate"]["status"]["state"])
        return seen[1:] if seen[0] == "TASK_STATE_SUBMITTED" else seen

    chunks = ["chunk 0;", "chunk 1;", "chunk 2;", "chunk 3;"]
    assert (
        life(caller_events)
        == life(watcher_events)
        == ["TASK_STATE_WORKING", *chunks, "TASK_STATE_COMPLETED"]
    )
    log = await db(
        lambda: list(TaskEvent.objects.filter(task_id=task_id).values_list("seq", flat=True))
    )
    assert log == sorted(log) and len(log) == len(set(log))


async def test_input_required_is_continued_with_the_same_task_id(hub, sdk, binding):
    await hub.endpoint_agent("asker")
    _, token = await hub.caller("alpha")
    client = await sdk("asker", token, binding=binding)

    question = await send(client, request("ask which colour?"))
    assert question.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert question.status.message.parts[0].text == "which colour?"

    answered = await send(
        client, request("blue", task_id=question.id, context_id=question.context_id)
    )

    assert answered.id == question.id
    assert answered.status.state == TaskState.TASK_STATE_COMPLETED
    assert answered.artifacts[0].parts[0].text == "answer: blue"
    messages = await stored_messages(question.id)
    assert [(m.direction, m.role) for m in messages] == [
        ("request", "user"),
        ("reply", "agent"),
        ("request", "user"),
    ]


async def test_a_streamed_answer_to_a_question_streams_what_the_agent_does(hub, sdk, binding):
    scripted, _, _ = await hub.endpoint_agent("asker")
    _, token = await hub.caller("alpha")
    through = await sdk("asker", token, binding=binding, streaming=True)
    direct = await direct_client(hub, scripted.url, streaming=True)

    streams = []
    for client in (direct, through):
        asked = await collect(client.send_message(request("ask which colour?")))
        task = asked[0]["task"]
        answer = request("blue", task_id=task["id"], context_id=task["contextId"])
        streams.append(
            [
                (kind, event.get("status", {}).get("state"))
                for item in await collect(client.send_message(answer))
                for kind, event in item.items()
            ]
        )

    # No task first (still asking): the stream goes on from the question to the answer.
    assert (
        streams[1]
        == streams[0]
        == [
            ("statusUpdate", "TASK_STATE_WORKING"),
            ("artifactUpdate", None),
            ("statusUpdate", "TASK_STATE_COMPLETED"),
        ]
    )


async def test_multi_turn_conversation_keeps_one_context(hub, sdk, binding):
    scripted, _, _ = await hub.endpoint_agent("duc")
    _, token = await hub.caller("baron")
    client = await sdk("duc", token, binding=binding)

    first = await send(client, request("echo monolith or services?"))
    second = await send(
        client, request("echo and the data migration?", context_id=first.context_id)
    )

    assert second.id != first.id
    assert second.context_id == first.context_id
    assert {m["contextId"] for m in scripted.state.messages} == {first.context_id}
    listed = await client.list_tasks(ListTasksRequest(context_id=first.context_id))
    assert {t.id for t in listed.tasks} == {first.id, second.id}


async def test_list_tasks_pages_with_a_cursor_and_filters_by_state(hub, sdk, binding):
    await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    client = await sdk("echo", token, binding=binding)
    sent = [await send(client, request(f"echo {i}")) for i in range(5)]
    failed = await send(client, request("fail on purpose"))

    page1 = await client.list_tasks(ListTasksRequest(page_size=2))
    page2 = await client.list_tasks(ListTasksRequest(page_size=2, page_token=page1.next_page_token))
    rest = await client.list_tasks(ListTasksRequest(page_size=10, page_token=page2.next_page_token))

    ids = [t.id for t in [*page1.tasks, *page2.tasks, *rest.tasks]]
    assert ids == [failed.id, *[t.id for t in reversed(sent)]]
    assert page1.total_size == 6 and rest.next_page_token == ""
    assert all(not t.artifacts for t in page1.tasks)
    only_failed = await client.list_tasks(ListTasksRequest(status=TaskState.TASK_STATE_FAILED))
    assert [t.id for t in only_failed.tasks] == [failed.id]


async def test_cancel_stops_a_running_task_and_a_finished_one_cannot_be_canceled(hub, sdk, binding):
    await hub.endpoint_agent("sleeper")
    _, token = await hub.caller("alpha")
    client = await sdk("sleeper", token, binding=binding)
    running = await send(client, request("hang", return_immediately=True))

    async def remote_known():
        return (await stored_task(running.id)).remote_task_id

    await eventually(remote_known)
    canceled = await client.cancel_task(CancelTaskRequest(id=running.id))

    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    assert (await stored_task(running.id)).state == "canceled"
    with pytest.raises(TaskNotCancelableError):
        await client.cancel_task(CancelTaskRequest(id=running.id))


async def test_two_level_delegation_chain_records_parent_root_depth_and_one_trace(
    hub, sdk, binding
):
    baron, _, _ = await hub.endpoint_agent("baron")
    duc, _, _ = await hub.endpoint_agent("duc")
    marie, _, _ = await hub.endpoint_agent("marie")
    _, token = await hub.caller("orchestrator")
    client = await sdk("baron", token, binding=binding)

    task = await send(client, request("delegate duc delegate marie echo test plan"))

    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert task.artifacts[0].parts[0].text == "duc said: marie said: echo: test plan"
    root = await stored_task(task.id)
    child = await db(lambda: root.children.select_related("caller", "target").get())
    grandchild = await db(lambda: child.children.select_related("caller", "target").get())
    assert (child.caller.slug, child.target.slug, child.depth, child.root_id) == (
        "baron",
        "duc",
        1,
        root.pk,
    )
    assert (
        grandchild.caller.slug,
        grandchild.target.slug,
        grandchild.depth,
        grandchild.root_id,
    ) == ("duc", "marie", 2, root.pk)
    assert root.trace_id == child.trace_id == grandchild.trace_id
    # W3C trace context reached every agent on the chain with the same trace id.
    for agent in (baron, duc, marie):
        traces = {
            h["traceparent"].split("-")[1] for h in agent.state.requests if "traceparent" in h
        }
        assert traces == {root.trace_id}
