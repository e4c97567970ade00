"""`manage.py a2a` agent commands, as an operator sees them."""

from __future__ import annotations

import json

import pytest
from django.core.management.base import CommandError
from django.utils import timezone

from a2a_core.models import Agent, AgentStatus
from a2a_core.selectors import agent_by_token
from tests.a2a_core.cli.helpers import a2a
from tests.factories import make_card, record_message, register

pytestmark = pytest.mark.django_db


@pytest.fixture
def card_file(tmp_path):
    path = tmp_path / "baron.json"
    path.write_text(
        json.dumps(
            make_card(
                "baron",
                skills=[
                    {"id": "specify", "name": "Spec", "description": "d", "tags": ["pm"]},
                    {"id": "plan", "name": "Plan", "description": "d", "tags": ["pm"]},
                ],
            )
        )
    )
    return path


def test_register_prints_the_token_once(card_file):
    out = a2a("register", str(card_file), "--role", "pm")
    lines = out.splitlines()
    assert lines[0] == "registered baron (endpoint, card v1.0.0)"
    token = lines[1].removeprefix("token: ")
    assert agent_by_token(token=token).slug == "baron"
    again = a2a("register", str(card_file))
    assert "already registered" in again and "a2ah_" not in again


def test_agents_table(card_file):
    a2a("register", str(card_file))
    lines = a2a("agents").splitlines()
    assert lines[0].split() == ["AGENT", "STATUS", "MODE", "SKILLS", "CREDENTIAL", "LAST", "SEEN"]
    assert lines[2].split() == ["baron", "idle", "endpoint", "plan,", "specify", "-", "never"]


def test_agents_json(card_file):
    a2a("register", str(card_file))
    row = json.loads(a2a("agents", "--json"))
    assert row["slug"] == "baron" and row["status"] == "idle"


def test_empty_registry_says_how_to_register():
    assert "Register one with" in a2a("agents")


def test_suspend_resume_and_rotate(card_file):
    a2a("register", str(card_file))
    assert a2a("suspend", "baron", "--reason", "loop") == "suspended baron\n"
    assert Agent.objects.get(slug="baron").status == AgentStatus.SUSPENDED
    assert a2a("suspend", "baron") == "baron was already suspended\n"
    assert a2a("resume", "baron") == "resumed baron\n"
    out = a2a("token", "rotate", "baron")
    token = out.splitlines()[0].removeprefix("token: ")
    assert agent_by_token(token=token).slug == "baron"


def test_unknown_agent_is_one_clear_error_with_status_2():
    with pytest.raises(CommandError) as exc:
        a2a("suspend", "nobody")
    assert str(exc.value) == "no agent 'nobody' is registered"
    assert exc.value.returncode == 2


def test_invalid_card_lists_every_problem(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"name": "x", "version": "1"}))
    with pytest.raises(CommandError) as exc:
        a2a("register", str(path))
    message = str(exc.value)
    assert "description: Field is required" in message
    assert "skills: Field must contain at least one element" in message
    assert exc.value.returncode == 2


def test_unreadable_or_non_json_card_is_a_clear_error(tmp_path):
    with pytest.raises(CommandError, match="cannot read"):
        a2a("register", str(tmp_path / "missing.json"))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(CommandError, match="is not valid JSON"):
        a2a("register", str(bad))


def test_last_seen_comes_from_the_traffic_as_on_the_dashboard(card_file):
    a2a("register", str(card_file))
    baron = Agent.objects.get(slug="baron")
    record_message(baron, register("alpha").agent, at=timezone.now())
    lines = a2a("agents").splitlines()
    assert [line.split()[0] for line in lines[2:]] == ["alpha", "baron"]
    assert lines[3].split()[-1] == "ago"  # not "never": it sent a message a moment ago
    row = next(
        r for r in map(json.loads, a2a("agents", "--json").splitlines()) if r["slug"] == "baron"
    )
    assert row["lastSeenAt"] is not None


def test_a_caller_that_never_receives_work_is_a_caller_not_an_offline_inbox_agent():
    # A card without a URL makes an inbox agent; one that never connects and is never sent
    # work only calls.
    register("scout", inbox=True)
    lines = a2a("agents").splitlines()
    assert lines[2].split()[:3] == ["scout", "caller", "caller"]
    assert json.loads(a2a("agents", "--json"))["status"] == "caller"


def test_agents_say_when_the_limit_cut_them(card_file, capsys):
    a2a("register", str(card_file))
    register("alpha")
    assert len(a2a("agents", "--json", "--limit", "1").splitlines()) == 1
    assert "Output cut: 1 agents shown, more are registered" in capsys.readouterr().err
