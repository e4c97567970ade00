"""What happens to each A2A call at the hub: accept, deliver, record, answer.

Every call is committed before anything is delivered. Endpoint agents are called with the
a2a-sdk client; what they answer is recorded and relayed in the hub's ids. Streams — to the
caller of SendStreamingMessage and to every SubscribeToTask subscriber alike — are read from
the task's recorded event log, woken by the channel layer, so all of them see the same
events in the same order.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from datetime import UTC, timedelta
from typing import Any

from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
)
from a2a.types.a2a_pb2 import (
    TaskState as WireState,
)
from a2a.utils.errors import (
    A2AError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    UnsupportedOperationError,
)
from channels.layers import get_channel_layer
from django.conf import settings
from django.utils import timezone
from google.protobuf.json_format import MessageToDict, ParseDict

from a2a_core import agent_cache, metrics, selectors, timeline, tracing
from a2a_core.asyncdb import db
from a2a_core.batching import Batcher
from a2a_core.delivery import push
from a2a_core.delivery.endpoint import (
    AgentRefused,
    AgentTimeout,
    NoSlotInTime,
    forwarder,
    traceparent,
)
from a2a_core.delivery.follow import follow as follow_to_end
from a2a_core.delivery.slots import Dequeued
from a2a_core.errors import (
    FieldProblem,
    PermissionDenied,
    PolicyRejected,
    TargetUnavailable,
    ValidationFailed,
)
from a2a_core.logging import get_logger, trace_id_var
from a2a_core.models import (
    INTERRUPTED_STATES,
    TERMINAL_STATES,
    Agent,
    DeliveryMode,
    TaskEvent,
    TaskEventKind,
    TaskState,
)
from a2a_core.models import (
    Scope as AgentScope,
)
from a2a_core.models import Task as TaskRow
from a2a_core.schemas.a2a import HUB_METADATA
from a2a_core.selectors.task_wire import state_from_wire, task_view
from a2a_core.services.fanout import NotFanOut, fanout_accept
from a2a_core.services.inbox import inbox_task_canceled
from a2a_core.services.messages import (
    Accepted,
    Inbound,
    message_duplicate_view,
    message_retry_answer,
    request_answered_by,
)
from a2a_core.services.push import (
    PushConfigInput,
    push_config_save,
    push_config_save_for_retry,
)
from a2a_core.services.tasks import Failure, Record, Reply, Report, Snapshot, StreamEvent
from a2a_core.services.writes import Outcome, Write, writes_commit
from a2a_core.storage.policy_state import retry_seconds

log = get_logger("dispatch")

# Group commit: concurrent calls' writes share transactions (see a2a_core/batching.py).
_writes: Batcher[Write, Any] = Batcher(writes_commit)


async def record(op: Record) -> Any:
    return await _writes.submit(op)


async def fail(task_id: str, reason: str, state: str = TaskState.FAILED) -> dict[str, Any]:
    tracing.forwarded(task_id, ok=False, why=reason)
    result: dict[str, Any] = await _writes.submit(Failure(task_id, reason, state))
    return result


# How often a stream re-reads the event log when no event arrives (the bus is best effort).
POLL_SECONDS = 2.0
MAX_PAGE_SIZE = 100


@dataclass(frozen=True)
class Call:
    """Who calls whom: the authenticated caller and the agent whose endpoint was called
    (None for the hub's own endpoint), with the request's headers (lower-cased names).
    `response_headers` are added to the HTTP response (e.g. Retry-After on a refusal)."""

    caller: Agent
    target: Agent | None
    headers: dict[str, str] = field(default_factory=dict)
    response_headers: dict[str, str] = field(default_factory=dict)
    # What serving the call found out (task_id, skill, trace_id), for its metrics and log.
    learned: dict[str, str] = field(default_factory=dict)

    @property
    def agent(self) -> Agent:
        if self.target is None:
            raise UnsupportedOperationError(
                "address an agent: send messages to /a2a/<agent>/, not to the hub itself"
            )
        return self.target


def _task(view: dict[str, Any]) -> Task:
    return ParseDict(view, Task(), ignore_unknown_fields=True)


def _stream_item(payload: dict[str, Any]) -> Any:
    response = ParseDict(payload, StreamResponse(), ignore_unknown_fields=True)
    return getattr(response, response.WhichOneof("payload") or "task")


def _history_length(value: Any, has: bool) -> int | None:
    if not has:
        return None
    if value < 0:
        raise ValidationFailed(
            "invalid historyLength",
            [FieldProblem("historyLength", f"must be a non-negative integer, got {value}")],
        )
    return int(value)


def forwarded(original: Message, accepted: Accepted) -> Message:
    """The caller's message as it goes on to an endpoint agent: the agent's own task and
    context ids, and the hub's fields under `metadata.a2aHub`."""
    message = Message()
    message.CopyFrom(original)
    message.task_id = accepted.remote_task_id
    message.context_id = accepted.remote_context_id
    message.metadata.update({HUB_METADATA: accepted.hub_fields})
    return message


def forwarded_metadata(metadata: dict[str, Any], accepted: Accepted) -> dict[str, Any]:
    """The caller's request metadata as it goes on to an endpoint agent: as the caller sent
    it, but for the hub's key, which carries the hub's fields there too."""
    if HUB_METADATA in metadata:
        return {**metadata, HUB_METADATA: accepted.hub_fields}
    return metadata


def _request_metadata(request: SendMessageRequest) -> dict[str, Any]:
    return MessageToDict(request.metadata) if request.HasField("metadata") else {}


def _reply(answer: Message, accepted: Accepted) -> Message:
    """An agent's direct answer as the caller sees it: the hub's context, no task."""
    reply = Message()
    reply.CopyFrom(answer)
    reply.context_id = accepted.context_id
    reply.task_id = ""
    if HUB_METADATA in reply.metadata:
        del reply.metadata[HUB_METADATA]
    return reply


def _headers_for(call: Call, target: Agent, accepted: Accepted) -> dict[str, str]:
    return {
        "traceparent": tracing.forward(target, accepted) or traceparent(accepted.trace_id),
        "A2A-Hub-Task-Id": accepted.task_id,
        "A2A-Hub-Caller": call.caller.slug,
    }


async def _accept(call: Call, request: SendMessageRequest) -> Accepted:
    started = tracing.now()
    try:
        accepted = await _submit_accept(call, request)
    except PolicyRejected as exc:
        tracing.routed(None, reason=exc.reason, started=started)
        metrics.decided("reject", exc.reason)
        if exc.retry_after is not None:
            call.response_headers["Retry-After"] = str(retry_seconds(exc.retry_after))
        raise
    tracing.routed(accepted, started=started)
    trace_id_var.set(accepted.trace_id)
    call.learned.update(task_id=accepted.task_id, skill=accepted.skill, trace_id=accepted.trace_id)
    if not accepted.duplicate:
        metrics.decided(accepted.decision, accepted.reason)
    return accepted


async def _deliver_to(call: Call, accepted: Accepted) -> Agent:
    """The agent that does the work: the one called, or the one the policy redirected to."""
    target = call.agent
    if accepted.deliver_to and accepted.deliver_to != target.slug:
        other = await db(agent_cache.agent_by_slug, accepted.deliver_to)
        if other is None:
            raise TargetUnavailable(f"{accepted.deliver_to} is no longer registered")
        return other
    return target


async def outcome(agent: Agent, accepted: Accepted, ok: bool) -> None:
    """Tell the agent's breaker how the call went (failures always; successes only when the
    breaker had something to forget)."""
    tracing.forwarded(accepted.task_id, ok=ok)
    if not ok or accepted.watch_breaker:
        await _writes.submit(Outcome(agent.slug, ok))


async def _submit_accept(call: Call, request: SendMessageRequest) -> Accepted:
    target = call.agent
    if not target.has_scope(AgentScope.RECEIVE):
        raise PermissionDenied(
            f"{target.slug} does not accept calls (its token lacks the a2a:receive scope)",
            details={"agent": target.slug, "missingScope": AgentScope.RECEIVE.value},
        )
    accepted: Accepted = await _writes.submit(
        Inbound(
            caller=call.caller,
            target=target,
            message=MessageToDict(request.message),
            request_metadata=MessageToDict(request.metadata)
            if request.HasField("metadata")
            else {},
            parent_hint=call.headers.get("a2a-hub-parent-task", ""),
            traceparent=call.headers.get("traceparent", ""),
        )
    )
    return accepted


def _ref(accepted: Accepted) -> tuple[int, Any]:
    return accepted.message_pk, accepted.message_created_at


def _relay_refusal(agent: Agent, exc: AgentRefused) -> A2AError:
    error = exc.error
    return type(error)(f"{agent.slug}: {error.message}", data=error.data)


# --- SendMessage --------------------------------------------------------------------------


async def send_message(call: Call, request: SendMessageRequest) -> Task | Message:
    """Blocking: answer when the task is done or needs input. `returnImmediately`: answer at
    once with the submitted task while the hub delivers it in the background. A message the
    policy holds is answered at once too: its task waits, auth-required, for a human. Sent to
    the hub itself, a broadcast or knowledge share is fanned out and answered with a Message
    listing where it went. A retry of a message (see `accept_batch`) is answered as the
    first call was (`_answer_retry`)."""
    if call.target is None:
        return await _fan_out(call, request)
    config = request.configuration
    history_length = _history_length(config.history_length, config.HasField("history_length"))
    answered = await _answer_to_request(call, request.message)
    if answered is not None:
        return answered
    inline_push = await _inline_push(request)
    accepted = await _accept(call, request)
    timeline.mark("commit")
    await _save_push(call, request, accepted, inline_push)
    if accepted.duplicate:
        return await _answer_retry(
            accepted, blocking=not config.return_immediately, history_length=history_length
        )
    if accepted.decision == "hold":
        view = await db(
            message_duplicate_view, task_id=accepted.task_id, history_length=history_length
        )
        return _task(view)
    target = await _deliver_to(call, accepted)
    if target.delivery_mode == DeliveryMode.INBOX:
        trace_inbox_forward(target, accepted)
        if not config.return_immediately:
            await _await_answer(accepted)
        view = await db(
            message_duplicate_view, task_id=accepted.task_id, history_length=history_length
        )
        return _task(view)
    modes = list(config.accepted_output_modes)
    if config.return_immediately:
        start_pump(
            call,
            target,
            accepted,
            request.message,
            accepted_output_modes=modes,
            metadata=forwarded_metadata(_request_metadata(request), accepted),
        )
        view = await db(
            message_duplicate_view, task_id=accepted.task_id, history_length=history_length
        )
        return _task(view)
    return await _forward_blocking(call, target, accepted, request, history_length, modes)


async def _fan_out(call: Call, request: SendMessageRequest) -> Message:
    started = tracing.now()
    try:
        result = await db(
            fanout_accept,
            caller=call.caller,
            message=MessageToDict(request.message),
            request_metadata=MessageToDict(request.metadata)
            if request.HasField("metadata")
            else {},
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
    return ParseDict(
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
        },
        Message(),
    )


async def _inline_push(request: SendMessageRequest) -> PushConfigInput | None:
    """A push notification config sent with the message, checked before the message is
    accepted (a refused one stores nothing)."""
    if not request.configuration.HasField("task_push_notification_config"):
        return None
    if not settings.HUB_PUSH_ENABLED:
        raise PushNotificationNotSupportedError("push notifications are not enabled on this hub")
    return await push.config_checked(
        request.configuration.task_push_notification_config, task_id="(this message's task)"
    )


async def _save_push(
    call: Call, request: SendMessageRequest, accepted: Accepted, config: PushConfigInput | None
) -> None:
    """Save a message's inline push config on its task; a retry's is saved too, unless the
    same config is there already."""
    if config is None:
        return
    config = replace(config, task_id=accepted.task_id)
    if accepted.duplicate:
        named = bool(request.configuration.task_push_notification_config.id)
        await db(
            push_config_save_for_retry,
            owner=call.caller,
            target=call.target,
            config=config,
            id_named=named,
        )
    else:
        await db(push_config_save, owner=call.caller, target=call.target, config=config)


async def _answer_retry(
    accepted: Accepted, *, blocking: bool, history_length: int | None
) -> Task | Message:
    """A retry gets what the first call answered: the agent's direct Message again, or the
    task as it is now. A blocking retry of a call still in flight waits like the first call
    (at most the call's timeout) for the task to end or need input, rather than answering
    with the task as it was submitted."""
    if blocking:
        await _await_answer(accepted)
    kind, view = await db(
        message_retry_answer,
        task_id=accepted.task_id,
        request_pk=accepted.message_pk,
        history_length=history_length,
    )
    return ParseDict(view, Message()) if kind == "message" else _task(view)


async def _answer_to_request(call: Call, message: Message) -> Task | None:
    """A `response` envelope answering a request the target sent the caller earlier: it
    completes that request's task (or is recorded late on it) instead of starting a new one."""
    if call.target is None or not any(part.HasField("data") for part in message.parts):
        return None
    wire = MessageToDict(message)
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
    return _task(await db(message_duplicate_view, task_id=task_id, history_length=None))


async def _await_answer(accepted: Accepted) -> None:
    """Wait (at most the call's timeout) until an inbox agent's task ends or needs input. The
    agent may take longer: the caller then gets the task as it is and follows it."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(accepted.timeout):
            async for _ in follow(accepted.task_id, after=0, stop_on_interrupt=True):
                pass


async def _forward_blocking(
    call: Call,
    target: Agent,
    accepted: Accepted,
    request: SendMessageRequest,
    history_length: int | None,
    output_modes: list[str],
) -> Task | Message:
    timeline.mark("forward")
    answers = forwarder().send(
        target,
        forwarded(request.message, accepted),
        streaming=False,
        headers=_headers_for(call, target, accepted),
        wait_seconds=accepted.timeout,
        accepted_output_modes=output_modes,
        task_id=accepted.task_id,
        metadata=forwarded_metadata(_request_metadata(request), accepted),
    )
    try:
        async with contextlib.aclosing(answers):
            async for answer in answers:
                timeline.mark("answered")
                await outcome(target, accepted, True)
                if answer.HasField("message"):
                    reply = MessageToDict(answer.message)
                    await record(Reply(accepted.task_id, reply, _ref(accepted)))
                    timeline.mark("record")
                    return _reply(answer.message, accepted)
                remote = MessageToDict(answer.task)
                view = await record(
                    Snapshot(accepted.task_id, remote, history_length, _ref(accepted))
                )
                timeline.mark("record")
                if view["status"]["state"] in _UNFINISHED:
                    await follow_to_end(accepted.task_id)
                return _task(view)
        raise TargetUnavailable(f"{target.slug} answered nothing")
    except Dequeued:
        # Canceled while it waited for a slot: the task is already as the cancel left it.
        return _task(await fail(accepted.task_id, "canceled", TaskState.CANCELED))
    except NoSlotInTime as exc:
        return _task(await fail(accepted.task_id, exc.message))
    except AgentTimeout as exc:
        await outcome(target, accepted, False)
        return _task(await fail(accepted.task_id, exc.message))
    except AgentRefused as exc:
        await outcome(target, accepted, True)
        await fail(accepted.task_id, f"{target.slug} refused: {exc.error.message}")
        raise _relay_refusal(target, exc) from None
    except TargetUnavailable as exc:
        await outcome(target, accepted, False)
        await fail(accepted.task_id, f"{target.slug} {exc.message}")
        # The same kind of failure (unreachable, failed, not A2A), in the agent's name.
        raise type(exc)(
            f"{target.slug} {exc.message}",
            details={"agent": target.slug, "taskId": accepted.task_id},
        ) from None


# --- delivery in the background (streams, returnImmediately, approved messages) -----------

_pumps: set[asyncio.Task[None]] = set()


def start_pump(
    call: Call,
    target: Agent,
    accepted: Accepted,
    message: Message,
    *,
    accepted_output_modes: list[str],
    metadata: dict[str, Any] | None = None,
) -> None:
    """Deliver in the background, recording every event the agent streams back. `metadata`:
    the request's, for the agent."""
    pump = asyncio.get_running_loop().create_task(
        _pump(
            call, target, accepted, forwarded(message, accepted), accepted_output_modes, metadata
        ),
        name=f"deliver-{accepted.task_id}",
    )
    _pumps.add(pump)
    pump.add_done_callback(_pumps.discard)


async def _pump(
    call: Call,
    target: Agent,
    accepted: Accepted,
    message: Message,
    output_modes: list[str],
    metadata: dict[str, Any] | None,
) -> None:
    answered = False
    state = ""
    try:
        async for event in forwarder().send(
            target,
            message,
            streaming=True,
            headers=_headers_for(call, target, accepted),
            wait_seconds=accepted.timeout,
            accepted_output_modes=output_modes,
            task_id=accepted.task_id,
            metadata=metadata,
        ):
            if not answered:
                answered = True
                await outcome(target, accepted, True)
            deadline = timezone.now() + timedelta(seconds=accepted.timeout)
            event_dict = MessageToDict(event)
            await record(StreamEvent(accepted.task_id, event_dict, deadline, _ref(accepted)))
            state = _reported_state(event_dict) or state
        if state in _UNFINISHED:
            # The stream closed before the task ended: the agent goes on without it.
            await follow_to_end(accepted.task_id)
    except Dequeued:
        return  # canceled while it waited for a slot
    except NoSlotInTime as exc:
        await fail(accepted.task_id, exc.message)
    except AgentTimeout as exc:
        await outcome(target, accepted, answered)
        await fail(accepted.task_id, exc.message)
    except AgentRefused as exc:
        await outcome(target, accepted, True)
        await fail(accepted.task_id, f"{target.slug} refused: {exc.error.message}")
    except TargetUnavailable as exc:
        await outcome(target, accepted, False)
        await fail(accepted.task_id, f"{target.slug} {exc.message}")
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("delivery failed", extra={"task_id": accepted.task_id})
        await fail(accepted.task_id, "the hub could not deliver this task")


# What an endpoint agent's task may still be when its answer or stream ends: then the hub
# follows it to its end.
_UNFINISHED = frozenset({"TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"})


def _reported_state(event: dict[str, Any]) -> str:
    """The task state a streamed event reports ('' for none; a message ends the task)."""
    if "task" in event:
        return str((event["task"].get("status") or {}).get("state", ""))
    if "statusUpdate" in event:
        return str((event["statusUpdate"].get("status") or {}).get("state", ""))
    return "TASK_STATE_COMPLETED" if "message" in event else ""


def trace_inbox_forward(target: Agent, accepted: Accepted) -> None:
    """When tracing: the forward to inbox agent `target` is a span from its queued delivery
    until the agent's report ends the task or asks for input (the agent's own calls meanwhile
    hang under it, as they do under an endpoint agent's forward), wherever the report lands."""
    if not tracing.forward(target, accepted):
        return
    watch = asyncio.get_running_loop().create_task(
        _inbox_forward_ends(accepted.task_id), name=f"trace-{accepted.task_id}"
    )
    _pumps.add(watch)
    watch.add_done_callback(_pumps.discard)


async def _inbox_forward_ends(task_id: str) -> None:
    try:
        async for _ in follow(task_id, after=0, stop_on_interrupt=True):
            pass
    finally:
        tracing.forwarded(task_id)


async def stop_pumps() -> None:
    for pump in list(_pumps):
        pump.cancel()
    await asyncio.gather(*_pumps, return_exceptions=True)


# --- streams ------------------------------------------------------------------------------


def _events_after(task_id: str, seq: int) -> tuple[list[tuple[int, str, dict[str, Any]]], str, int]:
    """The task's events after `seq`, its state, and the seq of the event that state came
    with."""
    # The state first: a task's state and its events commit together, so the events read
    # after it include every event up to that state, even if another writer (another worker,
    # or the loop's own thread) commits between the two reads. The other way round, a stream
    # could see the task ended without its last event.
    state, state_seq = TaskRow.objects.filter(pk=task_id).values_list(
        "state", "event_seq"
    ).first() or ("", 0)
    rows = list(
        TaskEvent.objects.filter(task_id=task_id, seq__gt=seq)
        .order_by("seq")
        .values_list("seq", "kind", "payload")
    )
    return rows, state, state_seq


def _snapshot(task_id: str, history_length: int | None) -> tuple[dict[str, Any], int, str]:
    task = TaskRow.objects.get(pk=task_id)
    return task_view(task, history_length=history_length), task.event_seq, task.state


async def follow(
    task_id: str, *, after: int, stop_on_interrupt: bool
) -> AsyncIterator[dict[str, Any]]:
    """Yield the task's status and artifact events after `after`, in order, until it ends
    (or, with `stop_on_interrupt`, until it needs input or auth after `after`: a message that
    answers the task's question finds it still waiting until the agent takes the answer)."""
    layer = get_channel_layer()
    channel = await layer.new_channel() if layer else ""
    if layer:
        await layer.group_add(f"task.{task_id}", channel)
    try:
        last = after
        while True:
            rows, state, state_seq = await db(_events_after, task_id, last)
            for seq, kind, payload in rows:
                last = seq
                if kind in (TaskEventKind.STATUS, TaskEventKind.ARTIFACT):
                    yield payload
            interrupted = stop_on_interrupt and state in INTERRUPTED_STATES and state_seq > after
            if state in TERMINAL_STATES or interrupted:
                return
            try:
                async with asyncio.timeout(POLL_SECONDS):
                    if layer:
                        await layer.receive(channel)
                    else:
                        await asyncio.sleep(POLL_SECONDS)
            except TimeoutError:
                pass
    finally:
        if layer:
            await layer.group_discard(f"task.{task_id}", channel)


async def stream_message(call: Call, request: SendMessageRequest) -> AsyncIterator[Any]:
    """SendStreamingMessage: the task first (unless the message answers the task's question),
    then its events until it ends or needs input."""
    inline_push = await _inline_push(request)
    accepted = await _accept(call, request)
    await _save_push(call, request, accepted, inline_push)
    view, seq, state = await db(_snapshot, accepted.task_id, None)
    settled = accepted.duplicate or accepted.decision == "hold"
    # A message answering the agent's question: as the agent's own stream does, this one
    # starts with the task moving on, not with the task as it was, still asking.
    if settled or state not in INTERRUPTED_STATES:
        yield _task(view)
    if settled:
        if state in TERMINAL_STATES or state in INTERRUPTED_STATES:
            return
    else:
        target = await _deliver_to(call, accepted)
        if target.delivery_mode == DeliveryMode.ENDPOINT:
            modes = list(request.configuration.accepted_output_modes)
            start_pump(
                call,
                target,
                accepted,
                request.message,
                accepted_output_modes=modes,
                metadata=forwarded_metadata(_request_metadata(request), accepted),
            )
        else:
            trace_inbox_forward(target, accepted)
    async for payload in follow(accepted.task_id, after=seq, stop_on_interrupt=True):
        yield _stream_item(payload)


async def subscribe(call: Call, request: SubscribeToTaskRequest) -> AsyncIterator[Any]:
    """SubscribeToTask: the task as it is now, then its events until it reaches a terminal state."""
    task = await db(
        selectors.task_visible, task_id=request.id, agent=call.caller, target=call.target
    )
    if task.state in TERMINAL_STATES:
        raise UnsupportedOperationError(
            f"task {task.pk} is {task.state}; there is nothing to follow"
        )
    view, seq, _ = await db(_snapshot, task.pk, None)
    yield _task(view)
    async for payload in follow(task.pk, after=seq, stop_on_interrupt=False):
        yield _stream_item(payload)


# --- reads and cancel ---------------------------------------------------------------------


async def get_task(call: Call, request: GetTaskRequest) -> Task:
    history_length = _history_length(request.history_length, request.HasField("history_length"))

    def read() -> dict[str, Any]:
        task = selectors.task_visible(task_id=request.id, agent=call.caller, target=call.target)
        return task_view(task, history_length=history_length)

    return _task(await db(read))


async def list_tasks(call: Call, request: ListTasksRequest) -> ListTasksResponse:
    problems = []
    page_size = request.page_size if request.HasField("page_size") else 50
    if not 1 <= page_size <= MAX_PAGE_SIZE:
        problems.append(
            FieldProblem(
                "pageSize", f"must be between 1 and {MAX_PAGE_SIZE} inclusive, got {page_size}"
            )
        )
    history_length = None
    try:
        history_length = _history_length(request.history_length, request.HasField("history_length"))
    except ValidationFailed as exc:
        problems.extend(exc.problems)
    state = ""
    if request.status:
        state = state_from_wire(WireState.Name(request.status))
    if problems:
        raise ValidationFailed("invalid ListTasks parameters", problems)
    after = (
        request.status_timestamp_after.ToDatetime(tzinfo=UTC)
        if request.HasField("status_timestamp_after")
        else None
    )
    include_artifacts = (
        request.include_artifacts if request.HasField("include_artifacts") else False
    )

    def read() -> dict[str, Any]:
        page = selectors.task_list(
            agent=call.caller,
            target=call.target,
            context_id=request.context_id,
            state=state,
            updated_after=after,
            page_size=page_size,
            page_token=request.page_token,
        )
        return {
            "tasks": [
                task_view(t, history_length=history_length, include_artifacts=include_artifacts)
                for t in page.tasks
            ],
            "nextPageToken": page.next_page_token,
            "pageSize": page_size,
            "totalSize": page.total_size,
        }

    return ParseDict(await db(read), ListTasksResponse(), ignore_unknown_fields=True)


async def cancel_task(call: Call, request: CancelTaskRequest) -> Task:
    task = await db(
        selectors.task_visible, task_id=request.id, agent=call.caller, target=call.target
    )
    if task.state in TERMINAL_STATES:
        raise TaskNotCancelableError(f"task {task.pk} is already {task.state}")
    target: Agent = await db(lambda: task.target)
    reason = f"canceled by {call.caller.slug}"
    if target.delivery_mode == DeliveryMode.ENDPOINT and task.remote_task_id:
        try:
            remote = await forwarder().cancel(
                target,
                task.remote_task_id,
                headers={"traceparent": traceparent(task.trace_id), "A2A-Hub-Task-Id": task.pk},
                wait_seconds=10.0,
            )
        except AgentRefused as exc:
            if isinstance(exc.error, TaskNotCancelableError):
                raise TaskNotCancelableError(f"{target.slug}: {exc.error.message}") from None
            raise _relay_refusal(target, exc) from None
        except (AgentTimeout, TargetUnavailable) as exc:
            reason = f"canceled at the hub by {call.caller.slug}; {target.slug} {exc.message}"
        else:
            view = await record(Snapshot(task.pk, remote))
            if view["status"]["state"] == "TASK_STATE_CANCELED":
                return _task(view)
    canceled = _task(await fail(task.pk, reason, TaskState.CANCELED))
    # A call still waiting for one of the agent's slots (in this process) is not sent at all.
    forwarder().slots.withdraw(task.pk)
    if target.delivery_mode == DeliveryMode.INBOX:
        await db(inbox_task_canceled, agent_id=target.pk, task_id=task.pk)
    return canceled
