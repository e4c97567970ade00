"""Delivery in the background (streams, returnImmediately, approved messages): each one a
task of the event loop that records every event the agent streams back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from datetime import timedelta
from typing import Any

from django.utils import timezone

from a2a_core import tracing
from a2a_core.delivery.agent_errors import AgentRefused, AgentTimeout, NoSlotInTime
from a2a_core.delivery.call import Call, MessageSend
from a2a_core.delivery.endpoint import forwarder
from a2a_core.delivery.follow import follow_agent_task
from a2a_core.delivery.slots import Dequeued
from a2a_core.delivery.wire import (
    UNFINISHED,
    forward_headers,
    forwarded,
    forwarded_metadata,
    message_ref,
)
from a2a_core.errors import AgentAuthFailed, TargetUnavailable
from a2a_core.logging import get_logger
from a2a_core.models import Agent
from a2a_core.services.accepted import Accepted
from a2a_core.services.tasks import StreamEvent
from a2a_core.services.writes import record, record_failure, record_outcome

log = get_logger("dispatch")

_pumps: set[asyncio.Task[None]] = set()


def start_pump(
    call: Call,
    target: Agent,
    accepted: Accepted,
    message: dict[str, Any],
    *,
    accepted_output_modes: list[str],
    metadata: dict[str, Any] | None = None,
) -> None:
    """Deliver in the background, recording every event the agent streams back. `metadata`:
    the request's, for the agent."""
    in_background(
        _pump(
            call, target, accepted, forwarded(message, accepted), accepted_output_modes, metadata
        ),
        name=f"deliver-{accepted.task_id}",
    )


def deliver_request(call: Call, target: Agent, accepted: Accepted, request: MessageSend) -> None:
    """Deliver a caller's request in the background, as it asked (its output modes, and its
    metadata with the hub's fields)."""
    start_pump(
        call,
        target,
        accepted,
        request.message,
        accepted_output_modes=request.accepted_output_modes,
        metadata=forwarded_metadata(request.metadata, accepted),
    )


def in_background(work: Coroutine[Any, Any, None], *, name: str) -> None:
    """Run `work` as a task of the event loop that `stop_pumps` cancels at shutdown."""
    task = asyncio.get_running_loop().create_task(work, name=name)
    _pumps.add(task)
    task.add_done_callback(_pumps.discard)


async def _pump(
    call: Call,
    target: Agent,
    accepted: Accepted,
    message: dict[str, Any],
    output_modes: list[str],
    metadata: dict[str, Any] | None,
) -> None:
    answered = False
    state = ""
    headers = forward_headers(call, target, accepted)
    call.times.now("delivered")
    try:
        async for event in forwarder().send(
            target,
            message,
            streaming=True,
            headers=headers,
            wait_seconds=accepted.timeout,
            accepted_output_modes=output_modes,
            task_id=accepted.task_id,
            metadata=metadata,
        ):
            if not answered:
                answered = True
                await record_outcome(target, accepted, True)
            deadline = timezone.now() + timedelta(seconds=accepted.timeout)
            event_dict = event
            call.times.now("answered")
            ref = message_ref(accepted, call.times)
            await record(StreamEvent(accepted.task_id, event_dict, deadline, ref))
            state = _reported_state(event_dict) or state
        if answered:
            tracing.call_split(accepted.task_id, call.times, judge_us=accepted.judge_us)
        if state in UNFINISHED:
            # The stream closed before the task ended: the agent goes on without it.
            await follow_agent_task(accepted.task_id)
    except Dequeued:
        return  # canceled while it waited for a slot
    except NoSlotInTime as exc:
        await record_failure(accepted.task_id, exc.message)
    except AgentTimeout as exc:
        await record_outcome(target, accepted, answered)
        await record_failure(accepted.task_id, exc.message)
    except AgentRefused as exc:
        await record_outcome(target, accepted, True)
        await record_failure(accepted.task_id, f"{target.slug} refused: {exc.error.message}")
    except AgentAuthFailed as exc:  # the agent is up: its breaker is not told
        await record_failure(accepted.task_id, f"{target.slug} {exc.message}")
    except TargetUnavailable as exc:
        await record_outcome(target, accepted, False)
        await record_failure(accepted.task_id, f"{target.slug} {exc.message}")
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("delivery failed", extra={"task_id": accepted.task_id})
        await record_failure(accepted.task_id, "the hub could not deliver this task")


# What an endpoint agent's task may still be when its answer or stream ends: then the hub


def _reported_state(event: dict[str, Any]) -> str:
    """The task state a streamed event reports ('' for none; a message ends the task)."""
    if "task" in event:
        return str((event["task"].get("status") or {}).get("state", ""))
    if "statusUpdate" in event:
        return str((event["statusUpdate"].get("status") or {}).get("state", ""))
    return "TASK_STATE_COMPLETED" if "message" in event else ""


async def stop_pumps() -> None:
    for pump in list(_pumps):
        pump.cancel()
    await asyncio.gather(*_pumps, return_exceptions=True)
