"""A call's life at the hub, top to bottom: the conductor of SendMessage.

A newcomer's path through the code starts here. Each step is one call into the room that owns
it; the names are the stretches a trace shows for the call (`a2a_core.call_times`).

1. **received** — `protocol/handler.py` (JSON-RPC, REST) or `protocol/grpc_binding.py` has
   authenticated the caller (`protocol/gate.py`) and made a `Call` (`delivery/call.py`).
2. **checked** — the request's own fields (`checked_history_length`), and whether it answers a
   request the target sent the caller earlier (`_answer_to_request`), which completes that
   request's task instead of starting one.
3. **judged** and **committed** — `delivery/accept.py` hands the message to the group commit
   (`services/writes.py`), which places it in a task and has the policy decide on it
   (`services/decisions.py` -> `policy/decide.py`): deliver, redirect, hold or reject. The
   decision and the message are committed together before anything is delivered. A retry
   of a message is answered as its first call was.
4. **delivered** — to an inbox agent, by its queue (`services/inbox.py`); to an endpoint
   agent, by the a2a-sdk client (`delivery/endpoint.py`), waiting for one of its slots
   (`delivery/slots.py`); in the background when the caller asked `returnImmediately`
   (`delivery/pump.py`).
5. **recorded** — the agent's answer, in the hub's ids, through the group commit again
   (`services/tasks.py`); an answer that leaves the task unfinished is followed to its end
   (`delivery/follow.py`).
6. **answered** — the caller gets the task as the hub recorded it, or the agent's Message
   (`delivery/wire.py` makes the wire forms).

Streaming calls (`delivery/streams.py`) and the task methods (`delivery/task_calls.py`) take the
same steps from their own modules.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import replace
from typing import Any

from a2a.utils.errors import UnsupportedOperationError

from a2a_core import metrics, timeline, tracing
from a2a_core.asyncdb import db
from a2a_core.delivery.accept import accept, deliver_to, inline_push, save_inline_push
from a2a_core.delivery.agent_errors import AgentRefused, AgentTimeout, NoSlotInTime
from a2a_core.delivery.call import Call, MessageSend
from a2a_core.delivery.endpoint import forwarder
from a2a_core.delivery.follow import follow_agent_task, settles_by
from a2a_core.delivery.pump import deliver_request
from a2a_core.delivery.slots import Dequeued
from a2a_core.delivery.streams import trace_inbox_forward, watch_task_events
from a2a_core.delivery.wire import (
    UNFINISHED,
    Answer,
    checked_history_length,
    forward_headers,
    forwarded,
    forwarded_metadata,
    message_answer,
    message_ref,
    relayed_refusal,
    task_answer,
    wants_receipt,
)
from a2a_core.errors import AgentAuthFailed, PolicyRejected, TargetUnavailable
from a2a_core.models import Agent, DeliveryMode, TaskState
from a2a_core.schemas.a2a import HUB_METADATA
from a2a_core.selectors.message_retries import (
    message_duplicate_view,
    message_retry_answer,
    message_retry_wait,
    request_answered_by,
)
from a2a_core.services.accepted import Accepted
from a2a_core.services.fanout import NotFanOut, fanout_accept
from a2a_core.services.ledger_audit import ledger_receipt
from a2a_core.services.tasks import Reply, Report, Snapshot
from a2a_core.services.writes import record, record_failure, record_outcome
from a2a_core.storage.policy_state import retry_seconds


async def send_message(call: Call, request: MessageSend) -> Answer:
    """`_send_message`; with `metadata.a2aHub.receipt: true` in the request (or its
    message), the answer's `metadata.a2aHub.receipt` carries a signed receipt of the call's
    decision (`a2a_core.services.ledger_audit.ledger_receipt`). Callers that do not ask pay
    nothing."""
    answer = await _send_message(call, request)
    if "message_pk" in call.learned and wants_receipt(request):
        token = await db(ledger_receipt, int(call.learned["message_pk"]))
        if token is not None:
            metadata = dict(answer.data.get("metadata") or {})
            metadata[HUB_METADATA] = {**(metadata.get(HUB_METADATA) or {}), "receipt": token}
            answer = replace(answer, data={**answer.data, "metadata": metadata})
    return answer


async def _send_message(call: Call, request: MessageSend) -> Answer:
    """Blocking: answer when the task is done or needs input. `returnImmediately`: answer at
    once with the submitted task while the hub delivers it in the background. A message the
    policy holds is answered at once too: its task waits, auth-required, for a human. Sent to
    the hub itself, a broadcast or knowledge share is fanned out and answered with a Message
    listing where it went. A retry of a message (see `accept_batch`) is answered as the
    first call was (`_answer_retry`)."""
    if call.target is None:
        return await _fan_out(call, request)
    config = request.configuration
    blocking = not request.return_immediately

    # checked
    history_length = checked_history_length(config.get("historyLength"), "historyLength" in config)
    answered = await _answer_to_request(call, request.message)
    if answered is not None:
        return answered
    push_config = await inline_push(request)

    # judged and committed
    accepted = await accept(call, request)
    timeline.mark("commit")
    call.times.now("committed")
    await save_inline_push(call, request, accepted, push_config)
    if accepted.duplicate:
        return await _answer_retry(accepted, blocking=blocking, history_length=history_length)
    if accepted.decision == "hold":
        return await _task_now(accepted, history_length)

    # delivered, recorded, answered
    target = await deliver_to(call, accepted)
    if target.delivery_mode == DeliveryMode.INBOX:
        trace_inbox_forward(target, accepted)
        if blocking:
            await _await_answer(accepted)
        return await _task_now(accepted, history_length)
    if not blocking:
        deliver_request(call, target, accepted, request)
        return await _task_now(accepted, history_length)
    return await _forward_blocking(call, target, accepted, request, history_length)


async def _task_now(accepted: Accepted, history_length: int | None) -> Answer:
    """The message's task as the hub has it now, as the caller gets it."""
    view = await db(message_duplicate_view, task_id=accepted.task_id, history_length=history_length)
    return task_answer(view)


def _reply(answer: dict[str, Any], accepted: Accepted, parts: Any = None) -> Answer:
    """An agent's direct answer (ProtoJSON) as the caller sees it: the hub's context, no
    task, no hub fields (its metadata stays, empty, when the agent sent some); `parts`: as the
    hub recorded them, when its content rules redacted them."""
    reply = {**answer}
    if parts is not None:
        reply["parts"] = parts
    reply.pop("taskId", None)
    if accepted.context_id:
        reply["contextId"] = accepted.context_id
    else:
        reply.pop("contextId", None)
    if HUB_METADATA in (reply.get("metadata") or {}):
        reply["metadata"] = {k: v for k, v in reply["metadata"].items() if k != HUB_METADATA}
    return message_answer(reply)


async def _fan_out(call: Call, request: MessageSend) -> Answer:
    started = tracing.now()
    try:
        result = await db(
            fanout_accept,
            caller=call.caller,
            message=request.message,
            request_metadata=request.metadata,
            traceparent=call.headers.get("traceparent", ""),
        )
    except NotFanOut as exc:
        raise UnsupportedOperationError(exc.message) from None
    tracing.fanned_out(
        trace_id=result.trace_id,
        message_pk=result.message_pk,
        decision="reject" if result.refusal is not None else "deliver",
        reason=result.refusal.reason if result.refusal is not None else "fan_out",
        started=started,
        retry=result.duplicate,
    )
    if not result.duplicate:
        for entry in result.deliveries:
            metrics.decided(entry["decision"], entry["reason"])
    if result.refusal is not None:
        refusal = result.refusal
        if refusal.retry_after is not None:
            call.response_headers["Retry-After"] = str(retry_seconds(refusal.retry_after))
        raise PolicyRejected(
            f"refused by the hub's policy for every recipient: {refusal.detail}",
            reason=refusal.reason,
            retry_after=refusal.retry_after,
        )
    return message_answer(
        {
            "messageId": result.answer_id,
            "role": "ROLE_AGENT",
            "contextId": result.context_id,
            "parts": [
                {"text": result.summary()},
                {
                    "data": {"deliveries": result.deliveries, "unknown": result.unknown},
                    "mediaType": "application/json",
                },
            ],
        }
    )


async def _answer_retry(
    accepted: Accepted, *, blocking: bool, history_length: int | None
) -> Answer:
    """A retry gets what the first call answered: the agent's direct Message again, or the
    task as it is now. A blocking retry of a call still in flight waits for the task to end
    or need input, as the spec says a blocking call does: an endpoint agent's task until the
    hub has settled it (`settles_by`: its deadline, and after a lost server process the time
    the hub takes to ask the agent how it went), an inbox agent's at most the call's timeout
    like the first call. An endpoint agent's task still unsettled then is the
    `TargetUnavailable` error, never the task as it was submitted."""
    if blocking:
        await _await_settled(accepted)
    answer = await db(
        message_retry_answer,
        task_id=accepted.task_id,
        request_pk=accepted.message_pk,
        history_length=history_length,
    )
    if answer.kind == "message":
        return message_answer(answer.view, ignore_unknown_fields=False)
    return task_answer(answer.view)


async def _answer_to_request(call: Call, wire: dict[str, Any]) -> Answer | None:
    """A `response` envelope answering a request the target sent the caller earlier: it
    completes that request's task (or is recorded late on it) instead of starting a new one."""
    if call.target is None or not any("data" in part for part in wire.get("parts") or []):
        return None
    task_id = await db(request_answered_by, caller=call.caller, target=call.target, message=wire)
    if task_id is None:
        return None
    call.learned.update(task_id=task_id)
    answer = {**wire, "role": "ROLE_AGENT"}
    answer.pop("taskId", None)
    answer.pop("contextId", None)
    await record(
        Report(task_id, call.caller.pk, status={"state": "TASK_STATE_COMPLETED", "message": answer})
    )
    return task_answer(await db(message_duplicate_view, task_id=task_id, history_length=None))


async def _await_answer(accepted: Accepted, seconds: float | None = None) -> bool:
    """Wait (at most `seconds`, by default the call's timeout) until the task ends or needs
    input; False if it did not. An inbox agent may take longer: the caller then gets the task
    as it is and follows it."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(accepted.timeout if seconds is None else seconds):
            async for _ in watch_task_events(accepted.task_id, after=0, stop_on_interrupt=True):
                pass
            return True
    return False


async def _await_settled(accepted: Accepted) -> None:
    """Wait for the task of a blocking retry to end or need input (see `_answer_retry`)."""
    task = await db(message_retry_wait, task_id=accepted.task_id)
    if task.endpoint and task.deadline is not None:
        seconds = max(settles_by(task.deadline) - time.time(), accepted.timeout)
        if not await _await_answer(accepted, seconds):
            raise TargetUnavailable(
                f"the hub does not know yet how {task.agent} ended this message's task; "
                f"ask for it with GetTask (task {accepted.task_id})",
                details={"agent": task.agent, "taskId": accepted.task_id},
            )
        return
    await _await_answer(accepted)


async def _forward_blocking(
    call: Call,
    target: Agent,
    accepted: Accepted,
    request: MessageSend,
    history_length: int | None,
) -> Answer:
    timeline.mark("forward")
    headers = forward_headers(call, target, accepted)
    call.times.now("delivered")
    answers = forwarder().send(
        target,
        forwarded(request.message, accepted),
        streaming=False,
        headers=headers,
        wait_seconds=accepted.timeout,
        accepted_output_modes=request.accepted_output_modes,
        task_id=accepted.task_id,
        metadata=forwarded_metadata(request.metadata, accepted),
    )
    try:
        async with contextlib.aclosing(answers):
            async for answer in answers:
                timeline.mark("answered")
                call.times.now("answered")
                await record_outcome(target, accepted, True)
                if "message" in answer:
                    reply = answer["message"]
                    said = _reply(reply, accepted)  # a copy: recording keeps `reply` as it is
                    recorded = await record(
                        Reply(accepted.task_id, reply, message_ref(accepted, call.times))
                    )
                    timeline.mark("record")
                    tracing.call_split(accepted.task_id, call.times, judge_us=accepted.judge_us)
                    if isinstance(recorded, dict) and "status" in recorded:
                        # A content rule refused the answer: the caller gets the failed task.
                        return task_answer(recorded)
                    if isinstance(recorded, dict) and recorded.get("parts") != reply.get("parts"):
                        return _reply(reply, accepted, recorded["parts"])
                    return said
                remote = answer["task"]
                view = await record(
                    Snapshot(
                        accepted.task_id, remote, history_length, message_ref(accepted, call.times)
                    )
                )
                timeline.mark("record")
                tracing.call_split(accepted.task_id, call.times, judge_us=accepted.judge_us)
                if view["status"]["state"] in UNFINISHED:
                    await follow_agent_task(accepted.task_id)
                return task_answer(view)
        raise TargetUnavailable(f"{target.slug} answered nothing")
    except Dequeued:
        # Canceled while it waited for a slot: the task is already as the cancel left it.
        return task_answer(await record_failure(accepted.task_id, "canceled", TaskState.CANCELED))
    except NoSlotInTime as exc:
        return task_answer(await record_failure(accepted.task_id, exc.message))
    except AgentTimeout as exc:
        await record_outcome(target, accepted, False)
        return task_answer(await record_failure(accepted.task_id, exc.message))
    except AgentRefused as exc:
        await record_outcome(target, accepted, True)
        await record_failure(accepted.task_id, f"{target.slug} refused: {exc.error.message}")
        raise relayed_refusal(target, exc) from None
    except AgentAuthFailed as exc:
        # The agent refused the hub's credential: it is up, so its breaker is not told.
        await record_failure(accepted.task_id, f"{target.slug} {exc.message}")
        raise AgentAuthFailed(
            f"{target.slug} {exc.message}", details={**exc.details, "taskId": accepted.task_id}
        ) from None
    except TargetUnavailable as exc:
        await record_outcome(target, accepted, False)
        await record_failure(accepted.task_id, f"{target.slug} {exc.message}")
        # The same kind of failure (unreachable, failed, not A2A), in the agent's name.
        raise type(exc)(
            f"{target.slug} {exc.message}",
            details={"agent": target.slug, "taskId": accepted.task_id},
        ) from None
