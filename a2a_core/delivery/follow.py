"""Following an endpoint agent's task to the end the agent gives it.

Some agents answer a blocking call with a task still submitted or working and finish it on
their own; a stream may close before the task ends; a server process may stop while it
delivers a task. In each case the hub's task would stay as it was. A follower brings it to
what the agent's task is: it subscribes to the task at the agent (`SubscribeToTask`) when the
agent streams, and otherwise asks for it (`GetTask`) with backoff, recording every change like
any answer (so the hub's subscribers and push configs get each one), until the task ends or
needs input, or its deadline passes.

A task whose remote id the hub never learned (its process stopped before the agent answered)
is looked up by the context the hub sent it in (`ListTasks`): found, it is recorded as the
agent has it and followed. Not found, the task fails, and says only what the hub knows: that
the agent never received it (send it again) when the agent keeps a task for what it receives
(its earlier answers were tasks, never a Message); otherwise — it answers with Messages and
keeps no task, or it has not answered anything yet, or it cannot be asked — that whether it
received it is unknown. The status message says which in `metadata.a2aHub.delivery`
("notReceived" or "unknown").

Followers hold no database connection while they wait. Each followed task has one follower
across all processes (a lease in `TaskFollow`, see `a2a_core.services.follow`); a process
that stops leaves its leases to run out, and the follow loop of another (or of the same one,
restarted) resumes them.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from a2a_core.asyncdb import db
from a2a_core.backoff import backoff
from a2a_core.delivery.agent_errors import AgentNotA2A, AgentRefused, AgentTimeout
from a2a_core.delivery.endpoint import forwarder
from a2a_core.errors import TargetUnavailable
from a2a_core.logging import get_logger
from a2a_core.models import ACTIVE_STATES, Agent, Task
from a2a_core.services.follow import (
    Followed,
    follow_begin,
    follow_claim_due,
    follow_end,
    follow_release,
    follow_renew,
    followed,
    new_claim,
)
from a2a_core.services.tasks import Failure, Record, Snapshot, StreamEvent, tasks_record
from a2a_core.services.writes import Outcome, writes_commit
from a2a_core.traceparent import header as traceparent

log = get_logger("follow")

# GetTask polls: the first soon after the answer, then backing off to at most POLL_MAX apart.
POLL_FIRST = 0.25
POLL_MAX = 1.5
# How long one GetTask or ListTasks call to the agent may take.
CALL_SECONDS = 10.0
# Tasks one pass of the follow loop takes over.
CLAIM_LIMIT = 50
# After a task's deadline and HUB_ABANDONED_GRACE_SECONDS: the sweep and follow passes that
# hand it over, and a lookup at the agent (ListTasks in a context or two, or a last GetTask).
SETTLE_SECONDS = 3 * CALL_SECONDS + 2.0

# task id -> (its follower, the claim it holds)
_followers: dict[str, tuple[asyncio.Task[None], str]] = {}


def settles_by(deadline: datetime) -> float:
    """When (a `time.time()`) an endpoint agent's task with this deadline is settled at the
    latest — ended, or needing input — also when the server process delivering it stopped: by
    its deadline the process gives it up; past it and the grace period the sweeper hands it
    to a follower, who asks the agent how it went (`_find`, `_last_look`)."""
    return deadline.timestamp() + settings.HUB_ABANDONED_GRACE_SECONDS + SETTLE_SECONDS


def _lease() -> timedelta:
    return timedelta(seconds=settings.HUB_FOLLOW_LEASE_SECONDS)


async def follow_agent_task(task_id: str) -> None:
    """Follow the task from this process (an endpoint agent answered it with a task still
    submitted or working). The hand-over is committed before this returns: if the process
    stops, another resumes it. Nothing happens if the task is followed already."""
    if task_id in _followers:
        return
    claim = new_claim()
    if await db(follow_begin, task_id=task_id, claim=claim, lease=_lease()):
        _spawn(task_id, claim)


async def follow_due() -> int:
    """Take over the followed tasks no process holds (their process stopped, or the sweeper
    handed them over) and follow them; how many were taken."""
    claims = await db(follow_claim_due, limit=CLAIM_LIMIT, lease=_lease(), skip=set(_followers))
    for task_id, claim in claims:
        _spawn(task_id, claim)
    return len(claims)


async def stop_followers() -> None:
    """Stop following in this process; the tasks are left for the next process to resume."""
    held = {task_id: claim for task_id, (_, claim) in _followers.items()}
    runners = [runner for runner, _ in _followers.values()]
    for runner in runners:
        runner.cancel()
    await asyncio.gather(*runners, return_exceptions=True)
    if held:
        with contextlib.suppress(Exception):
            await db(follow_release, claims=held)


def _spawn(task_id: str, claim: str) -> None:
    runner = asyncio.get_running_loop().create_task(_run(task_id, claim), name=f"follow-{task_id}")
    _followers[task_id] = (runner, claim)

    def forget(_: asyncio.Task[None]) -> None:
        if _followers.get(task_id, (None, ""))[0] is runner:
            del _followers[task_id]

    runner.add_done_callback(forget)


async def _run(task_id: str, claim: str) -> None:
    me = asyncio.current_task()
    assert me is not None
    renewer = asyncio.get_running_loop().create_task(_renew(task_id, claim, me))
    try:
        await _converge(task_id)
    except asyncio.CancelledError:
        raise  # stopping, or the lease was lost: whoever holds the task goes on
    except Exception:
        log.exception("following a task failed", extra={"task_id": task_id})
        await _fail(task_id, "the hub could not learn how the agent ended this task")
    finally:
        renewer.cancel()
    await db(follow_end, task_id=task_id, claim=claim)


async def _renew(task_id: str, claim: str, follower: asyncio.Task[None]) -> None:
    lease = _lease()
    while True:
        await asyncio.sleep(lease.total_seconds() / 3)
        try:
            held = await db(follow_renew, task_id=task_id, claim=claim, lease=lease)
        except Exception:
            log.warning("renewing a follow lease failed", exc_info=True)
            continue
        if not held:
            follower.cancel()
            return


async def _record(op: Record) -> Any:
    [result] = await db(tasks_record, [op])
    return result


async def _fail(task_id: str, reason: str) -> None:
    await _record(Failure(task_id, reason))


async def _breaker_failure(agent: Agent) -> None:
    await db(writes_commit, [Outcome(agent.slug, False)])


def _state(task_id: str) -> str:
    return Task.objects.filter(pk=task_id).values_list("state", flat=True).first() or ""


def _streams(agent: Agent) -> bool:
    return bool((agent.card.get("capabilities") or {}).get("streaming"))


async def _converge(task_id: str) -> None:
    task = await db(followed, task_id=task_id)
    if task is None or task.state not in ACTIVE_STATES:
        return
    agent = task.agent
    headers = {"traceparent": traceparent(task.trace_id), "A2A-Hub-Task-Id": task_id}
    remote_id = task.remote_task_id or await _find(task, headers)
    subscribe = _streams(agent)
    polls = 0
    last: dict[str, Any] = {}
    while remote_id and await db(_state, task_id) in ACTIVE_STATES:
        left = (task.deadline - timezone.now()).total_seconds()
        if left <= 0:
            await _last_look(task_id, agent, remote_id, headers)
            return
        try:
            if subscribe:
                subscribe = False
                with contextlib.suppress(AgentRefused, AgentTimeout, TimeoutError):
                    await _subscribe(task_id, agent, remote_id, headers, left)
                continue
            polls += 1
            await asyncio.sleep(min(backoff(polls, POLL_FIRST, POLL_MAX), left))
            remote = await forwarder().get_task(
                agent, remote_id, headers=headers, wait_seconds=min(CALL_SECONDS, left)
            )
            if remote != last:  # an unchanged task is not written again
                await _record(Snapshot(task_id, remote))
                last = remote
        except AgentNotA2A as exc:
            await _breaker_failure(agent)
            await _fail(task_id, f"{agent.slug} {exc.message}")
            return
        except AgentRefused as exc:
            await _fail(task_id, f"{agent.slug} no longer has this task: {exc.error.message}")
            return
        except (AgentTimeout, TargetUnavailable):
            continue  # asked again until the deadline


async def _last_look(task_id: str, agent: Agent, remote_id: str, headers: dict[str, str]) -> None:
    """At the deadline: the task as the agent has it, failed if it is still unfinished."""
    try:
        remote = await forwarder().get_task(
            agent, remote_id, headers=headers, wait_seconds=CALL_SECONDS
        )
    except (AgentTimeout, AgentRefused, TargetUnavailable):
        pass
    else:
        await _record(Snapshot(task_id, remote))
    if await db(_state, task_id) in ACTIVE_STATES:
        await _fail(task_id, f"{agent.slug} had not finished it by its deadline")


async def _subscribe(
    task_id: str, agent: Agent, remote_id: str, headers: dict[str, str], left: float
) -> None:
    """Record what SubscribeToTask streams: the task as it is, then each change."""
    first = True
    async with asyncio.timeout(left):
        async for event in forwarder().subscribe(
            agent, remote_id, headers=headers, wait_seconds=left
        ):
            if first and "task" in event:
                await _record(Snapshot(task_id, event["task"]))
            else:
                await _record(StreamEvent(task_id, event))
            first = False


# Whether an agent received a delivery the hub lost (`metadata.a2aHub.delivery`).
UNKNOWN, NOT_RECEIVED = "unknown", "notReceived"
LOST = "the hub lost this delivery (its server process stopped)"


async def _find(task: Followed, headers: dict[str, str]) -> str:
    """The agent's id of a task the hub sent but never learned the answer to: looked up in
    the contexts it was sent in, and recorded as the agent has it. When the agent does not
    have it, or cannot say, the task fails saying what is known; the result is then ''."""
    agent = task.agent
    delivery = UNKNOWN
    try:
        for context_id in task.context_ids:
            listed = await forwarder().list_tasks(
                agent, context_id, headers=headers, wait_seconds=CALL_SECONDS
            )
            found = _match(listed, task)
            if found is not None:
                await _record(Snapshot(task.task_id, found))
                return str(found.get("id") or "")
    except AgentNotA2A as exc:
        await _breaker_failure(agent)
        reason = f"{agent.slug} {exc.message}"
    except AgentRefused as exc:
        reason = (
            f"{LOST} and {agent.slug} cannot say whether it received it "
            f"(ListTasks: {exc.error.message})"
        )
    except (AgentTimeout, TargetUnavailable) as exc:
        reason = f"{LOST} and could not ask {agent.slug} how it went: {agent.slug} {exc.message}"
    else:
        reason, delivery = _not_found(task)
    await _record(Failure(task.task_id, reason, delivery=delivery))
    return ""


def _not_found(task: Followed) -> tuple[str, str]:
    """Why a lost delivery the agent has no task for failed, and whether the agent received
    it: only an agent that keeps a task for what it receives (its answers so far were tasks,
    never a Message) would have one, so only then is it known not to have received it."""
    slug = task.agent.slug
    if task.keeps_tasks:
        return (
            f"the hub lost this delivery before {slug} received it (its server process "
            "stopped); send it again with a new messageId (this one is answered with this "
            "failed task)",
            NOT_RECEIVED,
        )
    if task.keeps_tasks is False:
        return (
            f"{LOST}; {slug} keeps no task (it answers with a Message), so whether it "
            "received this is unknown",
            UNKNOWN,
        )
    return (
        f"{LOST}; {slug} has no task for it and has not answered the hub before, so whether "
        "it received this is unknown",
        UNKNOWN,
    )


def _match(listed: list[dict[str, Any]], task: Followed) -> dict[str, Any] | None:
    """The agent's task holding one of the task's requests; failing that, the only task of
    the context the hub does not know already, when the agent keeps no history."""
    sent = set(task.message_ids)
    for candidate in listed:
        if any(m.get("messageId") in sent for m in candidate.get("history") or []):
            return candidate
    unknown = [
        t for t in listed if t.get("id") not in task.known_remote_ids and not t.get("history")
    ]
    return unknown[0] if len(unknown) == 1 else None
