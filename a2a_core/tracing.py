"""OpenTelemetry export: every routed call as spans, sent over OTLP to the team's collector.

Off unless `OTEL_EXPORTER_OTLP_ENDPOINT` is set (read once, at the first call): then every hook
below returns at once and nothing is imported. On, each call through the hub gives

  a2a.request   the caller's request (a server span), continuing the caller's W3C trace
                context; without one, the span of the hub's forward to the calling agent
                when the call is a delegation from a task the hub forwarded (so one trace
                spans agents that do not propagate it), else a new trace with the hub's id
  a2a.decide    the policy's decision on it (child of the request), and who stands behind
                it (a2a.decided_by: the version and who published it, "policy v3 by alice")
  a2a.forward   the hub's call to the agent (a client span, child of the request, or of the
                wait for a human); its context goes to the agent as `traceparent`. To an
                inbox agent: from the queued delivery until the agent's report ends the task
                or asks for input, followed by the process that queued it
  a2a.forward   (fan-out) one per recipient's copy of a broadcast or knowledge share, child
                of the request: to an endpoint agent, the send until the agent answers; to an
                inbox agent, from the queued copy to the agent's ack (a copy has no task:
                taking it is all the agent answers). Any process may send or take a copy, so
                the fan-out's request span has an id every process derives from its message
  a2a.wait      the time a held message waited for a human: from its hold (a child of the
                held request) to its approval or redirect, with the human's decision and
                name (a2a.approver, and a2a.decided_by as on a2a.decide)
  a2a.hub.accepted, a2a.hub.judged, a2a.hub.committed, a2a.hub.delivered, a2a.agent,
  a2a.hub.recorded
                (children of a2a.forward, once the answer is recorded) where a forwarded
                call's time went, one after the other from its receipt to its answer's
                record: the hub's stretches (`a2a.share` hub) and the agent's (agent), as
                the trace's span panel splits it (`a2a_core.call_times`)

each with the A2A attributes: caller, target, skill, task and context ids, decision, reason.
The exporter and batching are the SDK's, configured by the standard `OTEL_*` variables.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from a2a_core.traceparent import header as traceparent_header
from a2a_core.traceparent import parse as parse_traceparent

if TYPE_CHECKING:
    from opentelemetry.trace import Span, SpanContext, Tracer

    from a2a_core.call_times import CallTimes
    from a2a_core.models import Agent
    from a2a_core.services.accepted import Accepted

# How many open forwards and held requests are remembered (to parent later spans to them).
REMEMBERED = 10_000


@dataclass
class _Request:
    """A call being served: when it began, and its span once the hub knows where it belongs."""

    caller: str
    target: str
    traceparent: str
    started: int
    span: Span | None = None


_request: contextvars.ContextVar[_Request | None] = contextvars.ContextVar(
    "a2a_request", default=None
)
# The span later work of this context hangs under (the wait for a human, for its delivery).
_parent: contextvars.ContextVar[SpanContext | None] = contextvars.ContextVar(
    "a2a_parent", default=None
)
# The trace id the next root span takes: the hub's own, so the dashboard and the collector
# name a trace alike.
_trace_id: contextvars.ContextVar[int] = contextvars.ContextVar("a2a_trace_id", default=0)
# The span id the next span takes (a fan-out's request), else a random one.
_span_id: contextvars.ContextVar[int] = contextvars.ContextVar("a2a_span_id", default=0)

_lock = threading.Lock()
_tracer: Tracer | None = None
_configured = False
# task id -> the open forward of that task; (trace id, agent slug) -> the task last forwarded
# to that agent in that trace; task id -> a held request's span.
_forwards: OrderedDict[str, Span] = OrderedDict()
_working: OrderedDict[tuple[str, str], str] = OrderedDict()
_held: OrderedDict[str, SpanContext] = OrderedDict()
# task id -> an ended forward's span, until the call's stretches are hung under it.
_ended: OrderedDict[str, SpanContext] = OrderedDict()


def _setup() -> Tracer | None:
    global _tracer, _configured
    with _lock:
        if _configured:
            return _tracer
        _configured = True
        if not os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
            return None
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

        class HubIds(RandomIdGenerator):
            def generate_trace_id(self) -> int:
                return _trace_id.get() or super().generate_trace_id()

            def generate_span_id(self) -> int:
                return _span_id.get() or super().generate_span_id()

        provider = TracerProvider(
            resource=Resource.create(
                {"service.name": os.environ.get("OTEL_SERVICE_NAME", "a2a-hub")}
            ),
            id_generator=HubIds(),
        )
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        _tracer = provider.get_tracer("a2a_hub")
        return _tracer


def enabled() -> bool:
    return (_tracer if _configured else _setup()) is not None


# --- the hooks ------------------------------------------------------------------------------


_OFF: contextlib.nullcontext[None] = contextlib.nullcontext()


def request(
    *, caller: str, target: str, headers: dict[str, str]
) -> contextlib.AbstractContextManager[None]:
    """Around serving one call: its request span ends when the call does."""
    if not enabled():
        return _OFF
    return _serving(caller, target, headers.get("traceparent", ""))


def now() -> int:
    return time.time_ns() if _tracer is not None else 0


@contextlib.contextmanager
def _serving(caller: str, target: str, traceparent: str) -> Iterator[None]:
    state = _Request(caller, target, traceparent, time.time_ns())
    token = _request.set(state)
    try:
        yield
    finally:
        _request.reset(token)
        if state.span is not None:
            state.span.end()


def routed(
    accepted: Accepted | None, *, reason: str = "", started: int = 0, decided_by: str = ""
) -> None:
    """The hub accepted (or, `accepted` None, refused with `reason`, by `decided_by`) the
    current call: its request and decide spans, `started` being when the decision began."""
    state = _request.get() if _tracer is not None else None
    if state is None or state.span is not None:
        return
    from opentelemetry import trace

    assert _tracer is not None
    parent = _remote(state.traceparent)
    if parent is None and accepted is not None and accepted.depth > 0:
        task_id = _working.get((accepted.trace_id, state.caller), "")
        forward = _forwards.get(task_id)
        parent = forward.get_span_context() if forward is not None else None
    context = trace.set_span_in_context(trace.NonRecordingSpan(parent)) if parent else None
    who = accepted.decided_by if accepted is not None else decided_by
    attributes = _attributes(accepted, caller=state.caller, target=state.target, reason=reason)
    if who:
        attributes["a2a.decided_by"] = who
    token = _trace_id.set(_hub_trace(accepted.trace_id) if accepted and not parent else 0)
    try:
        state.span = _tracer.start_span(
            "a2a.request",
            context=context,
            kind=trace.SpanKind.SERVER,
            start_time=state.started,
            attributes=attributes,
        )
    finally:
        _trace_id.reset(token)
    inside = trace.set_span_in_context(state.span)
    decide = _tracer.start_span(
        "a2a.decide", context=inside, start_time=started or state.started, attributes=attributes
    )
    decide.end()
    if accepted is None:
        state.span.set_status(trace.Status(trace.StatusCode.ERROR, reason))
    elif accepted.decision == "hold":
        _remember(_held, accepted.task_id, state.span.get_span_context())


def forward(target: Agent, accepted: Accepted) -> str:
    """The forward to `target` begins: its span, and the `traceparent` the agent gets ('' when
    tracing is off)."""
    if _tracer is None:
        return ""
    from opentelemetry import trace

    state = _request.get()
    parent = _parent.get() or (
        state.span.get_span_context() if state and state.span is not None else None
    )
    context = trace.set_span_in_context(trace.NonRecordingSpan(parent)) if parent else None
    token = _trace_id.set(_hub_trace(accepted.trace_id) if parent is None else 0)
    try:
        span = _tracer.start_span(
            "a2a.forward",
            context=context,
            kind=trace.SpanKind.CLIENT,
            attributes=_attributes(
                accepted,
                caller=state.caller if state else str(accepted.hub_fields.get("caller", "")),
                target=target.slug,
            ),
        )
    finally:
        _trace_id.reset(token)
    _remember(_forwards, accepted.task_id, span)
    _remember(_working, (accepted.trace_id, target.slug), accepted.task_id)
    return traceparent_of(span)


def forwarded(task_id: str, *, ok: bool = True, why: str = "") -> None:
    """The forward of task `task_id` is over (the agent answered, or it failed)."""
    if _tracer is None:
        return
    span = _forwards.pop(task_id, None)
    if span is not None:
        _remember(_ended, task_id, span.get_span_context())
        if not ok:
            from opentelemetry import trace

            span.set_status(trace.Status(trace.StatusCode.ERROR, why))
        span.end()


def call_split(task_id: str, times: CallTimes, *, judge_us: int = 0) -> None:
    """A forwarded call's answer is recorded: its stretches, from `times` (now: recorded),
    as child spans of its forward span."""
    if _tracer is None:
        return
    parent = _ended.pop(task_id, None)
    if parent is None:
        return
    from opentelemetry import trace

    recorded = time.time_ns()
    judging = times.judged - judge_us * 1000 if times.judged else 0
    stretches = (
        ("a2a.hub.accepted", "hub", times.received, judging),
        ("a2a.hub.judged", "hub", judging, times.judged),
        ("a2a.hub.committed", "hub", times.judged, times.committed),
        ("a2a.hub.delivered", "hub", times.committed, times.delivered),
        ("a2a.agent", "agent", times.delivered, times.answered),
        ("a2a.hub.recorded", "hub", times.answered, recorded),
    )
    context = trace.set_span_in_context(trace.NonRecordingSpan(parent))
    for name, share, start, end in stretches:
        if start and end >= start:
            _tracer.start_span(
                name,
                context=context,
                start_time=start,
                attributes={"a2a.share": share, "a2a.task_id": task_id},
            ).end(end_time=end)


def fanned_out(
    *, trace_id: str, message_pk: int, decision: str, reason: str, started: int, retry: bool
) -> None:
    """The hub accepted the current call as a fan-out (message `message_pk` of hub trace
    `trace_id`; `retry`: an earlier copy of it was accepted before): its request and decide
    spans, `started` being when accepting it began (time.time_ns())."""
    state = _request.get() if _tracer is not None else None
    if state is None or state.span is not None:
        return
    from opentelemetry import trace

    assert _tracer is not None
    parent = _remote(state.traceparent)
    context = trace.set_span_in_context(trace.NonRecordingSpan(parent)) if parent else None
    attributes = {
        "a2a.caller": state.caller,
        "a2a.target": state.target,
        "a2a.decision": decision,
        "a2a.reason": reason,
    }
    trace_token = _trace_id.set(_hub_trace(trace_id) if not parent else 0)
    span_token = _span_id.set(0 if retry else _fan_out_span(trace_id, message_pk))
    try:
        state.span = _tracer.start_span(
            "a2a.request",
            context=context,
            kind=trace.SpanKind.SERVER,
            start_time=state.started,
            attributes=attributes,
        )
    finally:
        _span_id.reset(span_token)
        _trace_id.reset(trace_token)
    decide = _tracer.start_span(
        "a2a.decide",
        context=trace.set_span_in_context(state.span),
        start_time=started or state.started,
        attributes=attributes,
    )
    decide.end()


@dataclass(frozen=True)
class Copy:
    """One recipient's copy of a fan-out, as its forward span names it."""

    trace_id: str
    message_pk: int
    caller: str
    target: str
    context_id: str
    decision: str
    reason: str


def copy_forward(copy: Copy, *, start: datetime | None = None) -> Span | None:
    """The forward of a fan-out copy begins (at `start`, else now): its span, under the
    fan-out's request (None when tracing is off)."""
    if not enabled():
        return None
    from opentelemetry import trace
    from opentelemetry.trace import SpanContext, TraceFlags

    assert _tracer is not None
    hub_trace = _hub_trace(copy.trace_id)
    if not hub_trace:
        return None
    request = SpanContext(
        hub_trace,
        _fan_out_span(copy.trace_id, copy.message_pk),
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )
    return _tracer.start_span(
        "a2a.forward",
        context=trace.set_span_in_context(trace.NonRecordingSpan(request)),
        kind=trace.SpanKind.CLIENT,
        start_time=_nanoseconds(start) if start is not None else None,
        attributes={
            "a2a.caller": copy.caller,
            "a2a.target": copy.target,
            "a2a.context_id": copy.context_id,
            "a2a.decision": copy.decision,
            "a2a.reason": copy.reason,
        },
    )


def copy_forwarded(span: Span | None, *, why: str = "") -> None:
    """The forward of a fan-out copy is over: the agent has it, or (`why`) it failed."""
    if span is None:
        return
    if why:
        from opentelemetry import trace

        span.set_status(trace.Status(trace.StatusCode.ERROR, why))
    span.end()


def traceparent_of(span: Span | None) -> str:
    """The W3C traceparent naming `span` ('' for None)."""
    if span is None:
        return ""
    ctx = span.get_span_context()
    return traceparent_header(f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}")


def waited(
    accepted: Accepted,
    *,
    caller: str,
    since: datetime,
    until: datetime | None,
    approver: str = "",
) -> contextlib.AbstractContextManager[None]:
    """Around starting the delivery of a message a human let through: the wait for the human,
    from `since` (the hold) to `until` (the human's decision; None: now), as a span naming
    who decided (`a2a.approver`), the parent of the delivery's spans."""
    if not enabled():
        return _OFF
    return _after_wait(accepted, caller, since, until, approver)


@contextlib.contextmanager
def _after_wait(
    accepted: Accepted, caller: str, since: datetime, until: datetime | None, approver: str
) -> Iterator[None]:
    from opentelemetry import trace

    assert _tracer is not None
    parent = _held.pop(accepted.task_id, None)
    context = trace.set_span_in_context(trace.NonRecordingSpan(parent)) if parent else None
    token = _trace_id.set(_hub_trace(accepted.trace_id) if parent is None else 0)
    try:
        attributes = _attributes(accepted, caller=caller, target=accepted.deliver_to)
        if approver:
            # The human decided: theirs is the decision, not the policy's that held it.
            attributes["a2a.approver"] = attributes["a2a.decided_by"] = approver
        span = _tracer.start_span(
            "a2a.wait",
            context=context,
            start_time=_nanoseconds(since),
            attributes=attributes,
        )
    finally:
        _trace_id.reset(token)
    span.end(end_time=_nanoseconds(until) if until is not None else None)
    reset = _parent.set(span.get_span_context())
    try:
        yield
    finally:
        _parent.reset(reset)


# --- helpers --------------------------------------------------------------------------------


def _attributes(accepted: Accepted | None, *, caller: str, target: str, reason: str = "") -> dict:
    values = {"a2a.caller": caller, "a2a.target": target}
    if accepted is None:
        values.update({"a2a.decision": "reject", "a2a.reason": reason})
        return values
    values.update(
        {
            "a2a.skill": accepted.skill,
            "a2a.task_id": accepted.task_id,
            "a2a.context_id": accepted.context_id,
            "a2a.decision": accepted.decision,
            "a2a.reason": accepted.reason,
        }
    )
    return values


def _nanoseconds(moment: datetime) -> int:
    return int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1000


def _fan_out_span(trace_id: str, message_pk: int) -> int:
    """The span id of the request that made fan-out message `message_pk`: derived, so that
    whichever process sends or takes a copy names it alike."""
    digest = hashlib.blake2b(f"{trace_id}:{message_pk}".encode(), digest_size=8).digest()
    return int.from_bytes(digest) or 1


def _hub_trace(trace_id: str) -> int:
    try:
        return int(trace_id, 16) if len(trace_id) == 32 else 0
    except ValueError:
        return 0


def _remote(header: str) -> SpanContext | None:
    """The caller's span, from its W3C `traceparent`; None when absent or malformed."""
    parent = parse_traceparent(header)
    if parent is None:
        return None
    from opentelemetry.trace import SpanContext, TraceFlags

    return SpanContext(
        int(parent.trace_id, 16),
        int(parent.span_id, 16),
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED if parent.sampled else TraceFlags.DEFAULT),
    )


def _remember(store: OrderedDict[Any, Any], key: Any, value: Any) -> None:
    store[key] = value
    store.move_to_end(key)
    while len(store) > REMEMBERED:
        store.popitem(last=False)
