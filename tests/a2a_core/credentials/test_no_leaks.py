"""The secrets the hub calls agents with are never written anywhere in clear: not in the
database, the logs, a JSONL export, the live events, the dashboard's pages, Django's admin
or error messages, whether the calls succeed or fail."""

from __future__ import annotations

import io
import json
import logging
from typing import Any

import pytest
from a2a.client import A2AClientError
from django.apps import apps
from django.core.management import call_command
from django.test import Client

from a2a_core import events
from a2a_core.asyncdb import db
from a2a_core.models import Agent
from a2a_core.services.users import user_create
from tests.a2a_core.credentials.helpers import outcome, set_credential
from tests.agents import ScriptedAgent
from tests.auth import BEARER, TokenEndpoint, api_key, guarded_agent, oauth2

pytestmark = pytest.mark.live

SECRETS = {
    "bearer": "leak-bearer-4b7c1e9f02",
    "query": "leak-query-key-83d0a6f5",
    "oauth": "leak-client-secret-5e2d9c",
    "wrong": "leak-wrong-secret-0c71b3",
    "broken": "leak-broken-key-9a4e27",
}


class _Broken:
    """An agent's server that fails every call with HTTP 500 (its URL then shows in the
    SDK's error, with an API key in the query)."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 500, "headers": []})
        await send({"type": "http.response.body", "body": b"broken"})


def _everything_in_the_database() -> str:
    rows = []
    for model in apps.get_models():
        rows.extend(repr(row) for row in model.objects.values())
    return "\n".join(rows)


def _pages(slugs: list[str]) -> str:
    admin = user_create(username="root", password="a-long-test-password-2026", role="admin")
    admin.is_staff = admin.is_superuser = True
    admin.save()
    client = Client()
    client.force_login(admin)
    paths = ["/", "/agents/", "/traffic/", "/tasks/", "/traces/", "/audit/", "/audit/export.jsonl"]
    paths += [f"/agents/{slug}/" for slug in slugs]
    paths += [
        f"/admin/a2a_core/agent/{pk}/change/" for pk in Agent.objects.values_list("pk", flat=True)
    ]
    paths += ["/admin/a2a_core/auditevent/", "/admin/a2a_core/agent/"]
    pages = []
    for path in paths:
        answer = client.get(path)
        assert answer.status_code == 200, path
        pages.append(b"".join(answer.streaming_content) if answer.streaming else answer.content)
    # A refused form shows the problem, not what was typed.
    refused = Client()
    refused.force_login(admin)
    answer = refused.post(
        f"/agents/{slugs[0]}/credentials/", {"scheme": "nope", "secret": SECRETS["bearer"]}
    )
    assert b"the card declares no scheme" in answer.content
    pages.append(answer.content)
    return b"\n".join(pages).decode()


async def test_secrets_are_nowhere_in_clear(hub, sdk, caplog):
    caplog.set_level(logging.DEBUG)
    heard: list[str] = []

    def listen(group: str, payload: Any) -> None:
        heard.append(f"{group} {json.dumps(payload, default=str)}")

    events.add_local_listener(listen)
    endpoint = TokenEndpoint("hub-client", SECRETS["oauth"]).start()
    try:
        agents = {
            "bearer": guarded_agent(
                "vault", {"b": BEARER}, lambda g: g == SECRETS["bearer"], "bearer"
            ),
            "query": guarded_agent(
                "ledger",
                {"k": api_key("query", "key")},
                lambda g: g == SECRETS["query"],
                "query",
                "key",
            ),
            "oauth": guarded_agent(
                "payroll", {"o": oauth2(endpoint.url)}, endpoint.valid, "bearer"
            ),
            "wrong": guarded_agent("locked", {"b": BEARER}, lambda g: False, "bearer"),
        }
        broken = ScriptedAgent("broken", guard=lambda app: _Broken())
        broken.card.security_schemes["k"].api_key_security_scheme.location = "query"
        broken.card.security_schemes["k"].api_key_security_scheme.name = "key"
        agents["broken"] = broken
        for name, scripted in agents.items():
            agent, _ = await hub.register_card(scripted.card_json)
            scripted.start(hub_url=hub.url)
            hub.agents.append(scripted)
            await set_credential(
                agent,
                secret=SECRETS[name],
                client_id="hub-client" if name == "oauth" else "",
            )
        _, token = await hub.caller("alpha")

        tokens_issued: list[str] = []
        for slug in ("vault", "ledger", "payroll"):
            for streaming in (False, True):
                client = await sdk(slug, token, streaming=streaming)
                assert (await outcome(client, "echo hi"))[0] == "TASK_STATE_COMPLETED"
        tokens_issued.extend(endpoint.issued)
        for slug in ("locked", "broken"):
            for binding in ("JSONRPC", "HTTP+JSON"):
                client = await sdk(slug, token, binding=binding)
                with pytest.raises(A2AClientError) as raised:
                    await outcome(client, "echo hi")
                assert slug in str(raised.value)
                assert not any(s in str(raised.value) for s in SECRETS.values())
            stream = await sdk(slug, token, streaming=True)
            assert (await outcome(stream, "echo hi"))[0] == "TASK_STATE_FAILED"
        failing = await db(lambda: Agent.objects.get(slug="locked"))
        assert "locked refused the hub's credential: HTTP 401" in failing.auth_failure

        export = io.StringIO()
        await db(lambda: call_command("a2a", "export", "--quiet", stdout=export))
        listed = io.StringIO()
        await db(lambda: call_command("a2a", "agents", stdout=listed))
        await db(lambda: call_command("a2a", "agents", "--json", stdout=listed))
        shown = io.StringIO()
        await db(lambda: call_command("a2a", "agent", "credentials", "show", "vault", stdout=shown))
        assert "vault: set (scheme b, bearer)" in shown.getvalue()
        assert "locked refused the hub's credential" in listed.getvalue()
        pages = await db(_pages, ["vault", "ledger", "payroll", "locked", "broken"])
        database = await db(_everything_in_the_database)
        # The refusal shows on the agents list and on the agent's page; the credential as "set".
        assert "credential refused" in pages
        assert "locked refused the hub&#x27;s credential: HTTP 401" in pages
        assert "<strong>set</strong>: scheme <code>b</code> (bearer)" in pages
    finally:
        events.remove_local_listener(listen)
        endpoint.stop()
    # What the hub logged, at every level (the agents' own a2a-sdk servers, in this process
    # for the test, log the headers they receive at DEBUG: theirs, not the hub's).
    agent_threads = {f"server-{a.port}" for a in agents.values()}
    places = {
        "database": database,
        "logs": "\n".join(
            r.getMessage() + repr(r.__dict__)
            for r in caplog.records
            if r.threadName not in agent_threads
        ),
        "export": export.getvalue(),
        "cli": listed.getvalue() + shown.getvalue(),
        "events": "\n".join(heard),
        "pages": pages,
    }
    assert export.getvalue().count("\n") >= 10
    assert heard and "credential_sealed" not in places["events"]
    for secret in [*SECRETS.values(), *tokens_issued]:
        for place, text in places.items():
            assert secret not in text, f"{secret} found in {place}"
