"""`manage.py a2a policy`: the policy from a terminal, as an operator uses it."""

from __future__ import annotations

import json

import pytest
from django.core.management.base import CommandError

from a2a_core.models import AuditEvent, Message, PolicyVersion
from a2a_core.schemas.policy import default_policy
from tests.a2a_core.cli.helpers import a2a
from tests.factories import register

pytestmark = pytest.mark.django_db


@pytest.fixture
def draft(tmp_path):
    def write(document: object, name: str = "policy.json") -> str:
        path = tmp_path / name
        path.write_text(json.dumps(document))
        return str(path)

    return write


def test_show_prints_the_defaults_before_anything_is_published():
    assert json.loads(a2a("policy", "show")) == default_policy().as_document()


def test_set_publishes_a_version_and_prints_its_diff(draft):
    out = a2a(
        "policy",
        "set",
        draft({"limits": {"perMinute": 30}}),
        "--reason",
        "calm the storm",
        "--as",
        "olga",
    )
    assert out.splitlines() == [
        "policy v1 is active (1 change)",
        "  limits: messages per minute: 600 → 30",
    ]
    assert json.loads(a2a("policy", "show"))["limits"]["perMinute"] == 30
    version = PolicyVersion.objects.get()
    assert (version.author_label, version.reason) == ("olga", "calm the storm")
    assert AuditEvent.objects.filter(action="policy.publish", actor_label="olga").count() == 1


def test_set_refuses_an_invalid_policy_naming_every_field_and_stores_nothing(draft):
    bad = draft({"limits": {"perMinute": -5}, "defaultAction": "maybe"})
    with pytest.raises(CommandError) as caught:
        a2a("policy", "set", bad, "--reason", "oops")
    message = str(caught.value)
    assert "limits.perMinute" in message and "defaultAction" in message
    assert PolicyVersion.objects.count() == 0


def test_set_refuses_a_file_that_is_not_json(tmp_path):
    path = tmp_path / "policy.json"
    path.write_text("{ not json")
    with pytest.raises(CommandError, match=r"is not valid JSON: .* \(line 1, column 3\)"):
        a2a("policy", "set", str(path), "--reason", "x")


def test_set_without_a_reason_is_refused(draft):
    with pytest.raises(CommandError, match="--reason"):
        a2a("policy", "set", draft({}))


def test_setting_the_active_policy_again_publishes_nothing(draft):
    a2a("policy", "set", draft({"maxHops": 3}), "--reason", "shorter chains")
    with pytest.raises(CommandError, match=r"active policy \(v1\) already"):
        a2a("policy", "set", draft({"maxHops": 3}), "--reason", "again")
    assert PolicyVersion.objects.count() == 1


def test_history_lists_versions_newest_first_and_rollback_adds_one(draft):
    a2a("policy", "set", draft({"maxHops": 3}), "--reason", "shorter chains")
    a2a("policy", "set", draft({"maxHops": 8}), "--reason", "longer chains")
    out = a2a("policy", "rollback", "1", "--reason", "8 was too many")
    assert out.splitlines() == [
        "policy v3 is active (1 change)",
        "  longest delegation chain (hops): 8 → 3",
    ]

    lines = a2a("policy", "history").splitlines()
    assert lines[0].split() == ["VERSION", "ACTIVE", "AUTHOR", "WHEN", "CHANGES", "REASON"]
    assert [line.split()[0] for line in lines[2:]] == ["v3", "v2", "v1"]
    assert lines[2].split()[1] == "*"
    assert lines[2].endswith("rollback to v1: 8 was too many")
    assert json.loads(a2a("policy", "show", "--version", "2"))["maxHops"] == 8

    rows = [json.loads(line) for line in a2a("policy", "history", "--json").splitlines()]
    assert rows[0]["diff"] == [{"op": "changed", "path": "maxHops", "old": 8, "new": 3}]
    assert rows[0]["changes"] == ["longest delegation chain (hops): 8 → 3"]


def test_set_words_a_matrix_change_as_the_pair_and_its_actions(draft):
    a2a(
        "policy",
        "set",
        draft({"matrix": [rule := {"caller": "director", "target": "ledger", "action": "allow"}]}),
        "--reason",
        "a",
    )
    out = a2a("policy", "set", draft({"matrix": [{**rule, "action": "deny"}]}), "--reason", "b")
    assert out.splitlines() == [
        "policy v2 is active (1 change)",
        "  director → ledger: allow → deny",
    ]


def test_rollback_to_a_missing_version_is_a_clear_error():
    with pytest.raises(CommandError, match="there is no policy version 7"):
        a2a("policy", "rollback", "7", "--reason", "x")


def test_dry_run_reports_changes_against_recorded_traffic(draft):
    alpha, echo = register("alpha").agent, register("echo").agent
    for i in range(3):
        Message.objects.create(
            message_id=f"m{i}",
            role="user",
            kind="request",
            sender=alpha,
            target=echo,
            decision="deliver",
            decision_reason="ok",
        )
    out = a2a("policy", "dry-run", draft({"defaultAction": "deny"}), "--last", "10")
    lines = out.splitlines()
    assert lines[0] == (
        "replayed 3 messages: 3 would be decided differently by the draft than by the active policy"
    )
    assert "  deliver -> reject: 3" in lines
    assert "  denied_by_matrix: 3" in lines
    assert (
        sum(
            "alpha -> echo  active: deliver (ok)  draft: reject (denied_by_matrix)" in line
            for line in lines
        )
        == 3
    )

    report = json.loads(a2a("policy", "dry-run", draft({}), "--json"))
    assert (report["messages"], report["changed"]) == (3, 0)
    assert PolicyVersion.objects.count() == 0
