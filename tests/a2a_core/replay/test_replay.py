"""Replay through the hub: recorded tasks' inputs sent again, as the hub's own caller, to
another real a2a-sdk agent (or the same one), answers side by side with the recorded ones."""

from __future__ import annotations

import json

import pytest
from a2a.types.a2a_pb2 import TaskState

from a2a_core.asyncdb import db
from a2a_core.delivery.replay import replay_run
from a2a_core.models import Message, ReplayItem, Task
from a2a_core.selectors.replay import replay_jsonl, replay_set_get
from a2a_core.services.policy import policy_publish
from a2a_core.services.replay import replay_caller, replay_set_create
from tests.a2a_core.cli.helpers import run_cli
from tests.a2a_core.protocol.helpers import request, send

pytestmark = pytest.mark.live


async def recorded_tasks(hub, sdk, count: int) -> list[str]:
    """`count` tasks the `writer` agent answered for `lead`, oldest first (`hub.lead`: lead's
    client for writer)."""
    await hub.endpoint_agent("writer")
    await hub.endpoint_agent("writer2", voice="draft v2")
    _, token = await hub.caller("lead")
    client = hub.lead = await sdk("writer", token)
    ids = []
    for n in range(count):
        task = await send(client, request(f"echo item {n}"))
        ids.append(task.id)
    return ids


def originals(task_ids: list[str]) -> list[tuple]:
    """What a replay must leave alone: each original task and its messages as stored."""
    return [
        (
            *Task.objects.filter(pk=pk).values_list(
                "state", "status_timestamp", "updated_at", "event_seq", "context_id"
            )[0],
            list(Message.objects.filter(task_id=pk).order_by("pk").values_list("pk", "latency_ms")),
        )
        for pk in task_ids
    ]


def make_set(task_ids: list[str], target: str | None) -> int:
    from a2a_core.models import Agent

    caller = replay_caller()
    return replay_set_create(
        task_ids=task_ids,
        caller=caller,
        target=Agent.objects.get(slug=target) if target else None,
        name="writer v2",
    ).pk


def outcomes(set_id: int) -> list[tuple]:
    view = replay_set_get(set_id=set_id)
    return [
        (
            v.item.outcome,
            v.item.expected["state"],
            v.item.actual and v.item.actual["state"],
            v.item.expected["text"],
            v.item.actual and v.item.actual["text"],
            [(d.kind, d.text) for d in v.diff],
        )
        for v in view.items
    ]


async def test_replaying_20_tasks_to_another_agent_shows_each_answer_beside_the_recorded_one(
    hub, sdk
):
    task_ids = await recorded_tasks(hub, sdk, 20)
    before = await db(originals, task_ids)
    set_id = await db(make_set, task_ids, "writer2")
    seen: list[tuple[int, int]] = []

    ran = await replay_run(
        set_id, hub_url=hub.url, progress=lambda item, done, total: seen.append((done, total))
    )
    assert ran.runs == 1 and ran.status == "done"
    assert seen[-1] == (20, 20) and len(seen) == 20
    first = await db(outcomes, set_id)
    assert len(first) == 20
    for n, (outcome, expected, actual, before_text, after_text, diff) in enumerate(first):
        assert (outcome, expected, actual) == ("done", "completed", "completed")
        assert before_text == f"echo: item {n}"
        assert after_text == f"draft v2: item {n}"
        assert diff == [("gone", f"echo: item {n}"), ("new", f"draft v2: item {n}")]

    # Through the hub, as its own caller, marked as a replay; the originals are untouched.
    replays = await db(
        lambda: list(
            Task.objects.filter(caller__slug="replay").values_list("target__slug", "context_id")
        )
    )
    assert len(replays) == 20 and {slug for slug, _ in replays} == {"writer2"}
    writer2 = hub.agents[1]
    marks = [m["metadata"]["a2aHub"]["replay"] for m in writer2.state.messages]
    assert sorted(mark["of"] for mark in marks) == sorted(task_ids)
    assert {mark["set"] for mark in marks} == {set_id}
    assert await db(originals, task_ids) == before
    assert not {context for _, context in replays} & {row[4] for row in before}

    # Run again: the same answers, in new tasks.
    ran = await replay_run(set_id, hub_url=hub.url)
    assert ran.runs == 2
    assert await db(outcomes, set_id) == first
    assert await db(lambda: Task.objects.filter(caller__slug="replay").count()) == 40
    assert await db(originals, task_ids) == before

    # JSONL for evaluation tools: input, expected, actual.
    lines = [json.loads(line) for line in await db(lambda: list(replay_jsonl(set_id=set_id)))]
    assert len(lines) == 20
    assert lines[0]["input"]["parts"] == [{"text": "echo item 0"}]
    assert lines[0]["expected"]["text"] == "echo: item 0"
    assert lines[0]["actual"]["text"] == "draft v2: item 0"
    assert lines[0]["actual"]["artifacts"] == [{"name": "echo", "text": "draft v2: item 0"}]


async def test_a_replay_to_a_pair_the_policy_denies_is_refused_and_reported_per_item(hub, sdk):
    task_ids = await recorded_tasks(hub, sdk, 3)
    writer = hub.agents[0]
    delivered = len(writer.state.messages)
    await db(
        policy_publish,
        document={"matrix": [{"caller": "replay", "target": "writer", "action": "deny"}]},
        reason="no replays to the live writer",
        actor_label="setup",
    )
    set_id = await db(make_set, task_ids, None)  # each to the agent that answered it
    await replay_run(set_id, hub_url=hub.url)

    view = await db(replay_set_get, set_id=set_id)
    assert view.counts == {"refused": 3}
    assert all(v.item.reason.startswith("denied_by_matrix") for v in view.items)
    assert all(v.item.actual is None for v in view.items)
    assert len(writer.state.messages) == delivered  # nothing reached the agent


async def test_replays_count_in_the_replay_caller_s_rate_window_not_the_original_caller_s(hub, sdk):
    await db(
        policy_publish,
        document={"agentLimits": {"lead": {"perMinute": 4}, "replay": {"perMinute": 2}}},
        reason="tight windows",
        actor_label="setup",
    )
    task_ids = await recorded_tasks(hub, sdk, 3)  # lead has room for one more this minute
    set_id = await db(make_set, task_ids, "writer2")
    await replay_run(set_id, hub_url=hub.url)

    view = await db(replay_set_get, set_id=set_id)
    # The replay caller's own window: two go through, the third is refused for its limit.
    assert [v.item.outcome for v in view.items] == ["done", "done", "refused"]
    assert view.items[2].item.reason.startswith("rate_limit_minute")
    # lead's window holds its own three calls only: its fourth still goes through.
    fourth = await send(hub.lead, request("echo four"))
    assert fourth.status.state == TaskState.TASK_STATE_COMPLETED


async def test_a2a_replay_on_the_command_line_reports_progress_and_exports_jsonl(
    hub, sdk, tmp_path
):
    task_ids = await recorded_tasks(hub, sdk, 3)
    args = ["replay", "run", "--to", "writer2", "--hub", hub.url, "--name", "cli"]
    for task_id in task_ids:
        args += ["--task", task_id]
    done = await _cli(*args)
    assert done.returncode == 0, done.stderr
    progress = [line for line in done.stderr.splitlines() if line.startswith("[")]
    assert [line.split("]")[0] + "]" for line in progress] == ["[1/3]", "[2/3]", "[3/3]"]
    assert "3 done" in done.stdout
    set_id = await db(lambda: ReplayItem.objects.get(original_id=task_ids[0]).replay_set_id)

    again = await _cli("replay", "rerun", str(set_id), "--hub", hub.url)
    assert again.returncode == 0, again.stderr
    shown = await _cli("replay", "show", str(set_id))
    assert "draft v2: item 0" in shown.stdout and "echo: item 0" in shown.stdout
    out = tmp_path / "replay.jsonl"
    exported = await _cli("replay", "export", str(set_id), "-o", str(out))
    assert exported.returncode == 0, exported.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [row["actual"]["text"] for row in rows] == [f"draft v2: item {n}" for n in range(3)]
    assert {row["run"] for row in rows} == {2}

    refused = await _cli("replay", "run", "--to", "nobody-here", "--hub", hub.url, "--task", "x")
    assert refused.returncode != 0 and "nobody-here" in refused.stderr
    bad = await _cli("replay", "run", "--state", "sleeping", "--hub", hub.url)
    assert bad.returncode != 0 and "--state: unknown state 'sleeping'" in bad.stderr

    # The roots of the traces the trace list's filters find, newest first.
    by_filter = await _cli(
        "replay", "run", "--agent", "writer", "--to", "writer2", "--limit", "2", "--hub", hub.url
    )
    assert by_filter.returncode == 0, by_filter.stderr
    newest = await db(
        lambda: list(
            ReplayItem.objects.filter(replay_set__runs=1, replay_set__name="")
            .order_by("position")
            .values_list("original_id", flat=True)
        )
    )
    assert newest == [task_ids[2], task_ids[1]]


async def _cli(*args: str):
    import asyncio

    return await asyncio.to_thread(run_cli, *args)
