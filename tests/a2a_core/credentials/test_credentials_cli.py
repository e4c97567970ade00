"""`a2a agent credentials set|show|clear`: the secret from an environment variable or stdin,
never an argument; shown afterwards only as set, when and by whom; and a new credential is
used by a second worker process, without a restart, once the command returns."""

from __future__ import annotations

import io
import re
import sys

import pytest
from django.core.management.base import CommandError

from a2a_core.asyncdb import db
from a2a_core.models import Agent
from a2a_core.services.agents import agent_register
from tests.a2a_core.cli.helpers import a2a
from tests.a2a_core.credentials.helpers import outcome
from tests.auth import BEARER, Secret, api_key, guarded_agent, oauth2
from tests.conftest import Hub

SECRET = "cli-secret-3f9a0d6b21"


def _register(schemes: dict, slug: str = "vault") -> Agent:
    scripted = guarded_agent(slug, schemes, lambda given: True, "bearer")
    return agent_register(card=scripted.card_json).agent


@pytest.mark.django_db
def test_set_from_the_environment_then_show_and_clear(monkeypatch):
    _register({"bearer": BEARER})
    monkeypatch.setenv("VAULT_TOKEN", SECRET)
    said = a2a("agent", "credentials", "set", "vault", "--from-env", "VAULT_TOKEN", "--as", "ops")
    assert said.strip() == "set the credential vault is called with (scheme bearer)"
    shown = a2a("agent", "credentials", "show", "vault")
    assert re.fullmatch(r"vault: set \(scheme bearer, bearer\), \d+s ago by ops", shown.strip())
    listed = a2a("agents")
    assert "CREDENTIAL" in listed and "bearer" in listed
    assert SECRET not in said + shown + listed
    assert a2a("agent", "credentials", "clear", "vault").startswith("cleared the credential")
    assert a2a("agent", "credentials", "show", "vault").strip() == (
        "vault: no credential set (called without one)"
    )
    assert a2a("agent", "credentials", "clear", "vault").strip() == "vault has no credential set"


@pytest.mark.django_db
def test_set_from_stdin_with_oauth2_options(monkeypatch):
    _register({"key": api_key("header", "X-Key"), "oauth": oauth2("https://id.example/token")})
    monkeypatch.setattr(sys, "stdin", io.StringIO(SECRET + "\n"))
    a2a(
        "agent", "credentials", "set", "vault", "--scheme", "oauth", "--stdin",
        "--client-id", "hub", "--scope", "a", "--scope", "b",
    )  # fmt: skip
    agent = Agent.objects.get(slug="vault")
    assert (agent.credential_scheme, agent.credential_kind) == ("oauth", "oauth2")
    assert SECRET not in agent.credential_sealed


@pytest.mark.django_db
def test_what_cannot_be_set_is_refused_with_the_reason(monkeypatch):
    _register({"key": api_key("header", "X-Key"), "tls": {"mtlsSecurityScheme": {}}})
    monkeypatch.setenv("KEY", SECRET)
    cases = {
        # Secrets are never taken from arguments (other users see them in `ps`).
        ("--from-env", "KEY", "--secret", SECRET): "unrecognized arguments",
        ("--from-env", "KEY"): "the card declares several schemes: choose one with --scheme",
        ("--scheme", "nope", "--from-env", "KEY"): "the card declares no scheme 'nope'",
        ("--scheme", "x" * 5000, "--from-env", "KEY"): "the card declares no scheme 'xxx",
        ("--scheme", "tls", "--from-env", "KEY"): "mutual TLS (client certificates) is not "
        "supported",
        ("--scheme", "key", "--from-env", "NOT_SET_ANYWHERE"): "the environment variable "
        "NOT_SET_ANYWHERE is not set",
        ("--scheme", "key", "--from-env", "KEY", "--client-id", "x"): "clientId: client id, "
        "token URL and scopes are OAuth2's",
    }
    for args, said in cases.items():
        with pytest.raises(CommandError) as raised:
            a2a("agent", "credentials", "set", "vault", *args)
        assert said in str(raised.value)
        if "--secret" not in args:  # argparse repeats what it did not recognise
            assert SECRET not in str(raised.value)
    monkeypatch.setenv("KEY", "two\nlines")
    with pytest.raises(CommandError, match="secret: holds a line break"):
        a2a("agent", "credentials", "set", "vault", "--scheme", "key", "--from-env", "KEY")
    assert Agent.objects.get(slug="vault").credential_sealed == ""


@pytest.mark.django_db
def test_an_inbox_agent_or_a_card_without_schemes_takes_no_credential(monkeypatch):
    from tests.factories import register

    register("inboxer", inbox=True)
    scripted = guarded_agent("open", {}, lambda given: True, "bearer")
    card = scripted.card_json
    card.pop("securitySchemes", None)
    card.pop("securityRequirements", None)
    agent_register(card=card)
    monkeypatch.setenv("KEY", SECRET)
    with pytest.raises(CommandError, match="inboxer is an inbox agent"):
        a2a("agent", "credentials", "set", "inboxer", "--from-env", "KEY")
    with pytest.raises(CommandError, match="declares no securitySchemes"):
        a2a("agent", "credentials", "set", "open", "--from-env", "KEY")


@pytest.mark.live
async def test_a_rotated_secret_is_used_by_a_second_worker_without_a_restart(
    hub, second_worker, monkeypatch
):
    secret = Secret("first-secret-6a2b9c")
    scripted = guarded_agent(
        "vault", {"bearer": BEARER}, lambda given: given == secret.value, "bearer"
    )
    agent, _ = await hub.register_card(scripted.card_json)
    scripted.start(hub_url=hub.url)
    hub.agents.append(scripted)
    _, token = await hub.caller("alpha")
    monkeypatch.setenv("VAULT_TOKEN", secret.value)
    await db(a2a, "agent", "credentials", "set", "vault", "--from-env", "VAULT_TOKEN")
    worker = Hub(url=second_worker.url)
    try:
        client = await worker.client("vault", token)
        assert await outcome(client, "echo one") == ("TASK_STATE_COMPLETED", ["echo: one"])

        # The agent's secret changes; the worker still sends the old one: refused.
        secret.value = "second-secret-0d4e7f"
        with pytest.raises(Exception, match="vault refused the hub's credential: HTTP 401"):
            await outcome(client, "echo two")
        # Set the new one; once the command returns, every worker sends it.
        monkeypatch.setenv("VAULT_TOKEN", secret.value)
        await db(a2a, "agent", "credentials", "set", "vault", "--from-env", "VAULT_TOKEN")
        assert await outcome(client, "echo three") == ("TASK_STATE_COMPLETED", ["echo: three"])
    finally:
        await worker.close()
    assert agent.slug == "vault"
