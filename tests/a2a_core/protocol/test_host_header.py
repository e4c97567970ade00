"""A junk Host header, on the dashboard's pages and on the A2A endpoints: refused (400) by
Django, ignored by the A2A side (whose cards fall back to the address the hub was reached at),
and logged as a rate-limited WARNING at most, never an error with a traceback."""

from __future__ import annotations

import logging

import httpx
import pytest

pytestmark = pytest.mark.live

JUNK_HOSTS = [
    "junk host",
    "a..b",
    "[::1",
    "x:99999",
    "localhost:abc",
    "evil.example",
    "<script>",
    "ex%41mple.com",
    "\u00e9t\u00e9.example",
    "h" * 300,
    "",
]
PAGES = ["/", "/login/", "/agents/", "/static/css/hub.css", "/admin/"]
A2A = ["/.well-known/agent-card.json", "/a2a/", "/discover", "/inbox/nobody/?wait=0"]


def from_the_test_harness(record: logging.LogRecord) -> bool:
    """A background pass of the hub (push, follow) that met pytest-django's guard on the
    database in the moment between two tests: the harness's, not a request's."""
    error = record.exc_info[1] if record.exc_info else None
    return isinstance(error, RuntimeError) and "Database access not allowed" in str(error)


async def test_a_junk_host_header_is_a_400_or_ignored_and_never_an_error_in_the_log(hub, caplog):
    caplog.set_level(logging.WARNING)
    statuses: dict[str, set[int]] = {}
    async with httpx.AsyncClient(base_url=hub.url, timeout=30) as http:
        for host in JUNK_HOSTS:
            for path in PAGES + A2A:
                response = await http.get(path, headers={"Host": host.encode("latin-1")})
                statuses.setdefault(path, set()).add(response.status_code)
                assert response.status_code < 500, (host, path, response.text[:300])
    assert statuses["/login/"] == {400}
    assert statuses["/.well-known/agent-card.json"] == {200}
    assert statuses["/a2a/"] == {401}
    logged = [r for r in caplog.records if not from_the_test_harness(r)]
    assert [r.getMessage() for r in logged if r.levelno >= logging.ERROR] == []
    assert [r.getMessage() for r in logged if r.exc_info] == []
    refused = [r for r in caplog.records if r.name == "django.security.DisallowedHost"]
    assert len(refused) <= 10, [r.getMessage() for r in refused]
