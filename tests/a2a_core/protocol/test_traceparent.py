"""A caller's W3C `traceparent`: a well-formed one makes the call part of the caller's trace
(the agent gets the same trace id with the hub's own span); a malformed one is ignored and the
hub starts a trace of its own. Over JSON-RPC and REST alike."""

from __future__ import annotations

import re

import httpx
import pytest

from a2a_core.asyncdb import db
from a2a_core.models import Task

pytestmark = pytest.mark.live

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"
WELL_FORMED = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-0[01]$")

ADOPTED = [
    f"00-{TRACE}-{SPAN}-01",
    f"00-{TRACE}-{SPAN}-00",
    f"01-{TRACE}-{SPAN}-01-a-later-version-field",
]
IGNORED = [
    "",
    "junk",
    f"00-{TRACE.upper()}-{SPAN}-01",
    f"00-{'0' * 32}-{SPAN}-01",
    f"00-{TRACE}-{'0' * 16}-01",
    f"ff-{TRACE}-{SPAN}-01",
    f"00-{TRACE}-{SPAN}-01-extra",
    f"00-{TRACE[:-1]}-{SPAN}-01",
    f"00-{TRACE}-{SPAN}-zz",
    f"00_{TRACE}_{SPAN}_01",
]


def _call(binding: str, token: str, text: str, header: str) -> dict:
    headers = {"Authorization": f"Bearer {token}", "A2A-Version": "1.0", "traceparent": header}
    message = {"messageId": text, "role": "ROLE_USER", "parts": [{"text": f"echo {text}"}]}
    if binding == "JSONRPC":
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
        return {"url": "/a2a/echo/", "json": body, "headers": headers}
    return {"url": "/a2a/echo/rest/message:send", "json": {"message": message}, "headers": headers}


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
async def test_a_callers_traceparent_is_adopted_when_well_formed_and_ignored_otherwise(
    hub, binding
):
    echo, _, _ = await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    async with httpx.AsyncClient(base_url=hub.url, timeout=30) as http:
        for n, header in enumerate(ADOPTED + IGNORED):
            response = await http.post(**_call(binding, token, f"t{n}", header))
            assert response.status_code == 200, (header, response.text)

    tasks = await db(
        lambda: list(Task.objects.order_by("created_at").values_list("trace_id", flat=True))
    )
    sent = [h["traceparent"] for h in echo.state.requests if "traceparent" in h]
    assert len(tasks) == len(sent) == len(ADOPTED + IGNORED)
    for header, stored, forwarded in zip(ADOPTED + IGNORED, tasks, sent, strict=True):
        hop = WELL_FORMED.match(forwarded)
        assert hop is not None, (header, forwarded)
        assert hop.group(1) == stored, header
        assert hop.group(2) != SPAN, header  # the hub's own span, never the caller's
        if header in ADOPTED:
            assert stored == TRACE, header
        else:
            assert stored != TRACE and re.fullmatch(r"[0-9a-f]{32}", stored), header
