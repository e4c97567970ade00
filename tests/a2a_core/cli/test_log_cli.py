"""`manage.py a2a log` and `a2a export`: the recorded traffic from a terminal, as an auditor reads it."""

from __future__ import annotations

import getpass
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.management.base import CommandError
from django.utils import timezone

from a2a_core.models import Agent, AuditEvent
from tests.a2a_core.cli.helpers import a2a, run_cli
from tests.factories import T0, make_task, record_message, register

pytestmark = pytest.mark.django_db


@pytest.fixture
def traffic() -> dict[str, Agent]:
    """Six messages among three agents, a minute apart from T0, each filter keeping a few."""
    a, b, g = (register(slug).agent for slug in ("alpha", "beta", "gamma"))
    working = make_task(target=b, caller=a, state="working")
    done = make_task(target=g, caller=b, state="completed")
    rows: list[tuple[Agent, Agent, str, dict[str, Any]]] = [
        (a, b, "alpha asks beta", {"task": working, "kind": "task_request"}),
        (b, a, "beta answers alpha", {"task": working, "kind": "task_response"}),
        (b, g, "beta asks gamma for a REVIEW", {"task": done, "kind": "review_request"}),
        (g, a, "gamma loops back", {"decision": "reject", "decision_reason": "loop_detected"}),
        (
            a,
            g,
            "alpha needs approval",
            {"decision": "hold", "decision_reason": "approval_required"},
        ),
        (a, b, "alpha floods beta", {"decision": "reject", "decision_reason": "rate_limit_minute"}),
    ]
    for minute, (sender, target, text, fields) in enumerate(rows):
        record_message(sender, target, at=T0 + timedelta(minutes=minute), summary=text, **fields)
    return {"alpha": a, "beta": b, "gamma": g}


def summaries(*args: str) -> list[str]:
    return [json.loads(line)["messageSummary"] for line in a2a("log", "--json", *args).splitlines()]


def test_the_log_is_a_table_oldest_first_with_decisions_and_reasons(traffic):
    lines = a2a("log").splitlines()
    assert lines[0].split() == [
        *("TIME", "FROM", "TO", "KIND", "DECISION", "DECIDED", "BY", "LATENCY", "SUMMARY")
    ]
    assert [line.split()[2:5] for line in lines[1:]] == [
        ["alpha", "beta", "task_request"],
        ["beta", "alpha", "task_response"],
        ["beta", "gamma", "review_request"],
        ["gamma", "alpha", "request"],
        ["alpha", "gamma", "request"],
        ["alpha", "beta", "request"],
    ]
    assert "rejected (loop_detected)" in lines[4]
    assert "held (approval_required)" in lines[5]
    assert lines[1].startswith("2026-03-01 12:00:00")
    assert lines[1].endswith("alpha asks beta")


def test_limit_shows_the_most_recent_messages_still_oldest_first(traffic):
    assert summaries("--limit", "2") == ["alpha needs approval", "alpha floods beta"]


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (
            ["--agent", "gamma"],
            ["beta asks gamma for a REVIEW", "gamma loops back", "alpha needs approval"],
        ),
        (["--pair", "alpha:beta"], ["alpha asks beta", "alpha floods beta"]),
        (["--pair", "beta:alpha"], ["beta answers alpha"]),
        (["--type", "review_request"], ["beta asks gamma for a REVIEW"]),
        # The seeds' alias for a task request.
        (["--type", "implementation_request"], ["alpha asks beta"]),
        (["--decision", "reject"], ["gamma loops back", "alpha floods beta"]),
        (["--decision", "held"], ["alpha needs approval"]),
        (["--reason", "rate_limit_minute"], ["alpha floods beta"]),
        (
            ["--since", "2026-03-01T12:02", "--until", "2026-03-01T12:04:00Z"],
            ["beta asks gamma for a REVIEW", "gamma loops back"],
        ),
        (["--text", "review"], ["beta asks gamma for a REVIEW"]),
        (["--agent", "alpha", "--decision", "reject"], ["gamma loops back", "alpha floods beta"]),
        (["--type", "notification"], []),
    ],
)
def test_each_filter_keeps_only_the_matching_messages(traffic, options, expected):
    assert summaries(*options) == expected


def test_since_accepts_an_age(traffic):
    record_message(traffic["beta"], traffic["gamma"], summary="just now", at=timezone.now())
    assert summaries("--since", "10m") == ["just now"]
    assert summaries("--until", "10m", "--decision", "hold") == ["alpha needs approval"]


def test_json_lines_follow_the_traffic_log_schema(traffic):
    first = json.loads(a2a("log", "--json", "--limit", "0").splitlines()[3])
    assert first["from"] == "gamma" and first["to"] == "alpha"
    assert first["type"] == "request"
    assert first["messageSummary"] == "gamma loops back"
    assert first["policyDecision"]["action"] == "reject"
    assert first["policyDecision"]["reason"] == "loop_detected"
    assert first["timestamp"] == "2026-03-01T12:03:00Z"
    assert {"files", "responseReceived", "latencyMs", "messageId"} <= set(first)


def test_an_empty_log_says_so():
    assert a2a("log").strip() == "No messages recorded yet."


def test_no_match_says_so(traffic):
    assert a2a("log", "--type", "broadcast").strip() == "No messages match."


@pytest.mark.parametrize(
    ("options", "error"),
    [
        (["--agent", "zeta"], "--agent: no agent 'zeta' is registered"),
        (["--pair", "alpha"], "--pair: 'alpha' is not A:B"),
        (["--pair", "alpha:zeta"], "--pair: no agent 'zeta' is registered"),
        (["--type", "gossip"], "--type: unknown kind 'gossip'; valid kinds: task_request,"),
        (["--decision", "maybe"], "--decision: unknown decision 'maybe'"),
        (["--since", "yesterday-ish"], "--since: 'yesterday-ish' is not a time"),
        (["--until", "2026-13-01"], "--until: '2026-13-01' is not a time"),
        (["--since", "2026-03-02", "--until", "2026-03-01"], "--until must be after --since"),
        (["--limit", "-1"], "--limit: must be 0 (all) or more"),
    ],
)
def test_bad_filters_are_one_clear_error_with_exit_status_2(traffic, options, error):
    with pytest.raises(CommandError) as caught:
        a2a("log", *options)
    assert str(caught.value).startswith(error)
    assert "\n" not in str(caught.value)
    assert caught.value.returncode == 2


@pytest.mark.django_db(transaction=True)  # the other process must see the agents
def test_from_a_shell_bad_input_is_one_line_on_stderr_and_exit_status_2(traffic):
    for options in (["--agent", "zeta"], ["--since", "soon"], ["--type", "gossip"]):
        done = run_cli("log", *options)
        assert done.returncode == 2, done.stderr
        assert done.stdout == ""
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert done.stderr.startswith("CommandError: --")


# --- export -----------------------------------------------------------------------------------


def test_export_writes_the_filtered_set_to_a_file_and_records_it(traffic, tmp_path, capsys):
    target = tmp_path / "audit.jsonl"
    out = a2a("export", "--agent", "alpha", "--decision", "reject", "-o", str(target))
    assert out.strip() == f"exported 2 messages to {target}"
    lines = [json.loads(line) for line in target.read_text().splitlines()]
    assert [line["messageSummary"] for line in lines] == ["gamma loops back", "alpha floods beta"]
    assert not (tmp_path / "audit.jsonl.partial").exists()
    progress = capsys.readouterr().err
    assert "2/2 messages read, 2 messages written" in progress
    event = AuditEvent.objects.get(action="audit.export.messages")
    assert event.actor_label == getpass.getuser()  # the OS user, without --as
    assert event.data["rows"] == 2 and event.data["complete"] is True
    assert event.data["filters"] == {"agent": "alpha", "decision": "reject"}


def test_export_to_stdout_is_the_same_jsonl(traffic):
    out = a2a("export", "--pair", "alpha:beta", "--quiet")
    assert [json.loads(line)["messageSummary"] for line in out.splitlines()] == [
        "alpha asks beta",
        "alpha floods beta",
    ]


def test_training_export_gives_a_conversation_per_task(traffic, tmp_path):
    target = tmp_path / "training.jsonl"
    out = a2a("export", "--format", "training", "-o", str(target), "--quiet")
    assert out.strip() == f"exported 2 tasks to {target}"
    examples = [json.loads(line) for line in target.read_text().splitlines()]
    assert [[m["text"] for m in e["messages"]] for e in examples] == [
        ["alpha asks beta", "beta answers alpha"],
        ["beta asks gamma for a REVIEW"],
    ]
    assert [e["outcome"]["state"] for e in examples] == ["working", "completed"]


def test_export_refuses_bad_filters_and_an_unwritable_target_writing_nothing(traffic, tmp_path):
    with pytest.raises(CommandError, match=r"^--type: unknown kind 'x'"):
        a2a("export", "--type", "x", "-o", str(tmp_path / "out.jsonl"))
    with pytest.raises(CommandError, match="is a directory"):
        a2a("export", "-o", str(tmp_path))
    with pytest.raises(CommandError, match="cannot write"):
        a2a("export", "-o", str(tmp_path / "missing" / "out.jsonl"))
    assert list(tmp_path.iterdir()) == []
    assert not AuditEvent.objects.filter(action__startswith="audit.export").exists()


def test_an_export_larger_than_a_chunk_is_complete_and_in_order(traffic, tmp_path, monkeypatch):
    from a2a_core.cli import audit as audit_cli

    monkeypatch.setattr(audit_cli, "EXPORT_CHUNK", 2)
    target = tmp_path / "all.jsonl"
    a2a("export", "-o", str(target), "--quiet")
    lines = [json.loads(line) for line in Path(target).read_text().splitlines()]
    assert [line["timestamp"] for line in lines] == sorted(line["timestamp"] for line in lines)
    assert len(lines) == 6
