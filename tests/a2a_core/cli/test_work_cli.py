"""`a2a tasks` and `a2a escalations`: the work in the hub and the questions for a human."""

from __future__ import annotations

import getpass
import json

import pytest
from django.core.management.base import CommandError

from a2a_core.models import AuditEvent, EscalationStatus, Message, TaskState
from a2a_core.services.users import user_create
from tests.a2a_core.cli.helpers import a2a
from tests.factories import held_escalation, make_task, question_escalation, register

pytestmark = pytest.mark.django_db


def test_tasks_lists_the_latest_first_and_filters_by_agent_and_state():
    a, b, c = (register(slug).agent for slug in ("alpha", "beta", "gamma"))
    make_task(target=b, caller=a, state=TaskState.WORKING, skill="review")
    make_task(target=c, caller=b, state=TaskState.FAILED, reason="gamma crashed")
    lines = a2a("tasks").splitlines()
    assert lines[0].split() == [
        "TASK",
        "STATE",
        "CALLER",
        "TARGET",
        "SKILL",
        "DEPTH",
        "UPDATED",
        "ABOUT",
    ]
    assert [line.split()[1:4] for line in lines[2:]] == [
        ["failed", "beta", "gamma"],
        ["working", "alpha", "beta"],
    ]
    assert lines[2].endswith("gamma crashed")
    only = [json.loads(line) for line in a2a("tasks", "--agent", "alpha", "--json").splitlines()]
    assert [(t["caller"], t["target"], t["skill"]) for t in only] == [("alpha", "beta", "review")]
    failed = a2a("tasks", "--state", "failed", "--json").splitlines()
    assert [json.loads(line)["reason"] for line in failed] == ["gamma crashed"]
    assert a2a("tasks", "--state", "canceled").strip() == "No tasks match."


@pytest.mark.parametrize(
    ("options", "error"),
    [
        (["--agent", "zeta"], "--agent: no agent 'zeta' is registered"),
        (["--state", "sleeping"], "--state: unknown state 'sleeping'; use one of submitted,"),
        (["--limit", "0"], "--limit: must be 1 or more"),
    ],
)
def test_tasks_refuses_bad_options_with_exit_status_2(options, error):
    with pytest.raises(CommandError) as caught:
        a2a("tasks", *options)
    assert str(caught.value).startswith(error) and caught.value.returncode == 2


def test_escalations_lists_what_waits_most_urgent_first():
    assert a2a("escalations").strip() == "Nothing waits for a human."
    held_escalation("deploy to prod?", priority="normal")
    question_escalation("which region?", priority="urgent")
    lines = a2a("escalations").splitlines()
    assert [line.split()[1:4] for line in lines[2:4]] == [
        ["question", "urgent", "duc"],
        ["held", "normal", "alpha"],
    ]
    assert lines[2].endswith("which region?")
    listed = [json.loads(line) for line in a2a("escalations", "--json").splitlines()]
    assert [e["kind"] for e in listed] == ["input_required", "approval"]


def test_answer_sends_the_text_to_the_agent_and_its_task_works_again():
    escalation = question_escalation("which region?")
    out = a2a("escalations", "answer", str(escalation.pk), "eu-west-1", "--as", "dana")
    assert out.strip() == f"answered escalation {escalation.pk} (duc, task {escalation.task_id})"
    escalation.refresh_from_db()
    assert escalation.status == EscalationStatus.ANSWERED and escalation.answer == "eu-west-1"
    assert escalation.task.state == TaskState.WORKING
    reply = Message.objects.get(task=escalation.task, decision_reason="answered_by_human")
    assert reply.parts == [{"text": "eu-west-1"}] and reply.delivery_state == "queued"
    assert AuditEvent.objects.filter(action="escalation.answer", actor_label="dana").exists()
    assert escalation.decider == "dana"
    assert reply.decision_detail.startswith("answered by dana at ")


def test_answer_with_data_checks_the_schema_the_agent_declared():
    schema = {
        "type": "object",
        "required": ["region"],
        "properties": {"region": {"type": "string"}},
    }
    escalation = question_escalation("which region?", schema=schema)
    with pytest.raises(
        CommandError, match=r"the data does not fit the schema; data\.region: required"
    ):
        a2a("escalations", "answer", str(escalation.pk), "here", "--data", '{"zone": 1}')
    with pytest.raises(CommandError, match=r"--data is not valid JSON: .* \(column 2\)"):
        a2a("escalations", "answer", str(escalation.pk), "here", "--data", "{oops")
    a2a("escalations", "answer", str(escalation.pk), "here", "--data", '{"region": "eu"}')
    escalation.refresh_from_db()
    assert escalation.answer_data == {"region": "eu"}


def test_held_messages_are_approved_redirected_or_rejected_and_decided_only_once():
    approve, redirect, reject = (held_escalation(f"m{i}", caller=f"c{i}") for i in range(3))
    register("other")
    a2a("escalations", "approve", str(approve.pk), "--text", "edited")
    a2a("escalations", "redirect", str(redirect.pk), "other")
    a2a("escalations", "--as", "erin", "reject", str(reject.pk), "not on a Friday")
    statuses = {
        e.pk: (e.status, e.task.state)
        for e in (approve, redirect, reject)
        if not e.refresh_from_db()
    }
    assert statuses == {
        approve.pk: (EscalationStatus.APPROVED, TaskState.WORKING),
        redirect.pk: (EscalationStatus.REDIRECTED, TaskState.WORKING),
        reject.pk: (EscalationStatus.REJECTED, TaskState.REJECTED),
    }
    with pytest.raises(CommandError, match=f"escalation {reject.pk} was already rejected by erin"):
        a2a("escalations", "approve", str(reject.pk))


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["answer", "999", "yes"], "there is no escalation 999"),
        (["reject", "{held}", " "], "a reason is required; reason: say why"),
        (["answer", "{held}", "yes"], "is an approval escalation"),
        (["redirect", "{held}", "zeta"], "unknown agent; to: no agent 'zeta' is registered"),
    ],
)
def test_bad_escalation_commands_are_one_line_with_exit_status_2(args, error):
    held = held_escalation()
    args = [a.replace("{held}", str(held.pk)) for a in args]
    with pytest.raises(CommandError) as caught:
        a2a("escalations", *args)
    assert error in str(caught.value) and "\n" not in str(caught.value)
    assert caught.value.returncode == 2
    held.refresh_from_db()
    assert held.status == EscalationStatus.PENDING


def test_user_add_prints_a_password_that_logs_in_and_role_changes_it(client):
    out = a2a("user", "add", "ana", "--role", "operator").splitlines()
    assert out[0] == "created operator ana"
    password = out[1].removeprefix("password: ")
    assert client.login(username="ana", password=password)
    from django.contrib.auth.models import User

    from dashboard.roles import role_of

    assert role_of(User.objects.get(username="ana")) == "operator"
    assert a2a("user", "role", "ana", "viewer").strip() == "ana is now viewer"
    assert role_of(User.objects.get(username="ana")) == "viewer"
    with pytest.raises(CommandError, match="cannot create the user; username: 'ana' is taken"):
        a2a("user", "add", "ana")
    with pytest.raises(CommandError, match="unknown user; username: no user 'bob'"):
        a2a("user", "role", "bob", "admin")


def test_cli_decisions_carry_the_os_user_and_the_messages_read_as_decided():
    approve, redirect, reject = (held_escalation(f"m{i}", caller=f"c{i}") for i in range(3))
    register("other")
    user_create(username="frank", password="a-long-test-password-2026", role="operator")
    a2a("escalations", "approve", str(approve.pk))
    a2a("escalations", "redirect", str(redirect.pk), "other", "--as", "frank")
    a2a("escalations", "reject", str(reject.pk), "not today", "--as", "gina")
    me = getpass.getuser()
    approve.refresh_from_db()
    redirect.refresh_from_db()
    reject.refresh_from_db()
    assert (approve.decider, redirect.decider, reject.decider) == (me, "frank", "gina")
    # --as naming a dashboard user records that user too.
    assert redirect.decided_by is not None and redirect.decided_by.username == "frank"
    approved = Message.objects.get(pk=approve.message_id)
    assert (approved.decision, approved.decision_reason) == ("deliver", "approved_by_human")
    assert approved.decision_detail.startswith(f"approved by {me} at ")
    redirected = Message.objects.get(pk=redirect.message_id)
    assert (redirected.decision, redirected.decision_reason) == ("redirect", "redirected_by_human")
    assert redirected.decision_detail.startswith("redirected to other by frank at ")
    rejected = Message.objects.get(pk=reject.message_id)
    assert rejected.decision_reason == "rejected_by_human"
    assert rejected.decision_detail.endswith(": not today")
    log = a2a("log", "--limit", "10")
    assert f"delivered (approved by {me} at " in log
    assert "redirected (redirected to other by frank at " in log
    audit = AuditEvent.objects.filter(action__startswith="escalation.")
    assert sorted(audit.values_list("actor_label", flat=True)) == sorted([me, "frank", "gina"])


def test_a_claim_from_the_cli_shows_who_and_can_be_taken_over():
    escalation = held_escalation("deploy?")
    a2a("escalations", "claim", str(escalation.pk), "--as", "hana")
    assert "hana" in a2a("escalations").splitlines()[2]
    with pytest.raises(CommandError, match="is claimed by hana; take it over"):
        a2a("escalations", "claim", str(escalation.pk), "--as", "ivan")
    a2a("escalations", "claim", str(escalation.pk), "--as", "ivan", "--take-over")
    escalation.refresh_from_db()
    assert escalation.claimed_by_name == "ivan"
    a2a("escalations", "release", str(escalation.pk), "--as", "ivan")
    escalation.refresh_from_db()
    assert escalation.claimed_by_name == ""
    assert list(
        AuditEvent.objects.filter(action__startswith="escalation.")
        .order_by("pk")
        .values_list("action", "actor_label")
    ) == [
        ("escalation.claim", "hana"),
        ("escalation.take_over", "ivan"),
        ("escalation.release", "ivan"),
    ]


def test_escalations_page_with_limit_and_after_and_say_when_output_is_cut(capsys):
    held = [held_escalation(f"deploy #{i}") for i in range(7)]
    newest_first = [e.pk for e in reversed(held)]
    first = [
        json.loads(line)["id"] for line in a2a("escalations", "--json", "--limit", "3").splitlines()
    ]
    assert first == newest_first[:3]
    notice = capsys.readouterr().err
    assert "Output cut: 3 of 7 pending escalations shown" in notice
    assert f"a2a escalations --after {first[-1]} --limit 3" in notice
    second = a2a("escalations", "--after", str(first[-1]), "--limit", "3").splitlines()
    assert [int(line.split()[0]) for line in second[2:5]] == newest_first[3:6]
    assert "Output cut: 3 of 7 pending escalations shown" in capsys.readouterr().err
    last = a2a("escalations", "--after", str(newest_first[5]), "--limit", "3").splitlines()
    assert [int(line.split()[0]) for line in last[2:3]] == newest_first[6:]
    assert "Output cut" not in capsys.readouterr().err  # the last page is whole
    # More than the 500 it used to stop at, silently: every one is listed.
    with pytest.raises(CommandError, match="--limit: must be 1 or more"):
        a2a("escalations", "--limit", "0")


def test_tasks_say_when_the_limit_cut_them(capsys):
    a, b = register("alpha").agent, register("beta").agent
    for _ in range(3):
        make_task(target=b, caller=a, state=TaskState.WORKING)
    assert len(a2a("tasks", "--limit", "2", "--json").splitlines()) == 2
    assert "Output cut: the 2 most recently updated tasks are shown" in capsys.readouterr().err
    a2a("tasks", "--limit", "3")
    assert capsys.readouterr().err == ""
