"""The W3C Trace Context `traceparent` header: the one place it is read and written.

`00-<trace id: 32 hex>-<parent span id: 16 hex>-<flags: 2 hex>`, lowercase, neither id all
zeros (https://www.w3.org/TR/trace-context/#traceparent-header). A header of a later version
may carry more fields after these four; version `ff` is invalid. Anything else is malformed,
and a malformed header is treated as absent: the hub starts a trace of its own.
"""

from __future__ import annotations

import random
import re
from typing import NamedTuple

_HEADER = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$")
_NO_TRACE = "0" * 32
_NO_SPAN = "0" * 16


class Parent(NamedTuple):
    trace_id: str
    span_id: str
    sampled: bool


def parse(header: str | None) -> Parent | None:
    """The caller's span named by `header`; None when absent or malformed."""
    if not header:
        return None
    found = _HEADER.match(header.strip())
    if found is None:
        return None
    version, trace_id, span_id, flags, rest = found.groups()
    if (
        version == "ff"
        or (version == "00" and rest)
        or trace_id == _NO_TRACE
        or span_id == _NO_SPAN
    ):
        return None
    return Parent(trace_id, span_id, bool(int(flags, 16) & 1))


def trace_id_of(header: str | None) -> str:
    """The trace id in `header`, or '' when it is absent or malformed."""
    parent = parse(header)
    return parent.trace_id if parent else ""


def header(trace_id: str, span_id: str | None = None, sampled: bool = True) -> str:
    """The header naming span `span_id` of trace `trace_id` (both hex); without a span id, a
    new one (the hub's hop to an agent). Span ids need to be unique, not secret: a fast PRNG
    rather than the OS's randomness."""
    span = span_id or f"{random.getrandbits(64) or 1:016x}"
    return f"00-{trace_id}-{span}-{'01' if sampled else '00'}"
