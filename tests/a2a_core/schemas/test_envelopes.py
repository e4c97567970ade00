"""Typed envelopes: every kind accepted when valid, refused with the exact field when not."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from a2a_core.errors import ValidationFailed
from a2a_core.schemas.envelopes import (
    ALIASES,
    KINDS,
    envelope_files,
    envelope_json,
    envelope_summary,
    parse_envelope,
)

VALID: dict[str, dict[str, Any]] = {
    "task_request": {
        "title": "Implement the validator",
        "description": "JSON schema validation for messages",
        "taskType": "implementation",
        "complexity": "medium",
        "acceptanceCriteria": ["all kinds validate"],
        "context": {"files": ["src/validator.py"], "branch": "feat/validator"},
    },
    "task_response": {"taskId": "t-1", "action": "completed", "result": {"summary": "done"}},
    "review_request": {"title": "Review the validator", "filesForReview": ["src/validator.py"]},
    "review_response": {"verdict": "approved", "summary": "looks good"},
    "status_update": {"status": "in_progress", "progress": "halfway", "percent": 50},
    "knowledge_share": {
        "topic": "flaky test",
        "discovery": "test_x depends on time",
        "relevantTo": ["qa"],
    },
    "question": {"text": "REST or GraphQL?"},
    "escalation": {"reason": "I cannot decide the schema"},
    "completion_notice": {"summary": "spec written", "files": ["spec.md"]},
    "broadcast": {"scope": "squad", "topic": "freeze", "message": "code freeze at 5pm"},
    "request": {"action": "lookup", "data": {"id": 3}},
    "response": {"data": {"ok": True}},
    "notification": {"text": "deploy finished"},
}

# One required payload field per kind, and the path the error must name when it is missing.
REQUIRED: dict[str, str] = {
    "task_request": "title",
    "task_response": "action",
    "review_request": "title",
    "review_response": "verdict",
    "status_update": "progress",
    "knowledge_share": "topic",
    "question": "text",
    "escalation": "reason",
    "completion_notice": "summary",
    "broadcast": "scope",
}


def envelope(kind: str, payload: dict[str, Any], **top: Any) -> dict[str, Any]:
    data = {"kind": kind, "payload": payload, **top}
    if kind == "response":
        data.setdefault("correlationId", "req-1")
    return data


def problems(exc: pytest.ExceptionInfo[ValidationFailed]) -> dict[str, str]:
    return {p.field: p.message for p in exc.value.problems}


def test_every_kind_in_the_design_table_is_covered():
    assert set(VALID) == set(KINDS)


@pytest.mark.parametrize("kind", KINDS)
def test_valid_envelope_of_each_kind_is_accepted(kind):
    parsed = parse_envelope(envelope(kind, VALID[kind], priority="high"))
    assert parsed.kind == kind
    assert parsed.priority == "high"
    assert envelope_json(parsed)["kind"] == kind
    assert envelope_summary(parsed)


@pytest.mark.parametrize(("kind", "field"), sorted(REQUIRED.items()))
def test_missing_required_field_is_named_with_its_path(kind, field):
    payload = {k: v for k, v in VALID[kind].items() if k != field}
    with pytest.raises(ValidationFailed) as exc:
        parse_envelope(envelope(kind, payload))
    assert f"payload.{field}" in problems(exc)


@pytest.mark.parametrize("kind", KINDS)
def test_unknown_payload_field_is_refused_not_ignored(kind):
    payload = {**VALID[kind], "titel": "typo"}
    with pytest.raises(ValidationFailed) as exc:
        parse_envelope(envelope(kind, payload))
    assert problems(exc)["payload.titel"] == "Extra inputs are not permitted"


def test_unknown_kind_lists_every_valid_kind_and_alias():
    with pytest.raises(ValidationFailed) as exc:
        parse_envelope({"kind": "task_requets", "payload": {}})
    message = problems(exc)["kind"]
    assert "task_requets" in message
    for kind in KINDS:
        assert kind in message
    for alias in ALIASES:
        assert alias in message


def test_missing_kind_says_it_is_required():
    with pytest.raises(ValidationFailed) as exc:
        parse_envelope({"payload": {"text": "hi"}})
    assert problems(exc)["kind"].startswith("kind is required")


@pytest.mark.parametrize("action", ["declined", "failed", "blocked"])
def test_task_response_needs_a_reason_when_not_done(action):
    with pytest.raises(ValidationFailed) as exc:
        parse_envelope(envelope("task_response", {"taskId": "t-1", "action": action}))
    assert problems(exc) == {
        "payload.reason": f"reason is required when action is '{action}': say why"
    }


@pytest.mark.parametrize("action", ["accepted", "completed"])
def test_task_response_needs_no_reason_when_accepted_or_completed(action):
    assert parse_envelope(envelope("task_response", {"taskId": "t-1", "action": action}))


def test_response_without_correlation_id_is_refused():
    with pytest.raises(ValidationFailed) as exc:
        parse_envelope({"kind": "response", "payload": {"text": "yes"}})
    assert "correlationId" in problems(exc)


def test_blocked_status_must_name_the_blocker():
    with pytest.raises(ValidationFailed) as exc:
        parse_envelope(envelope("status_update", {"status": "blocked", "progress": "stuck"}))
    assert "payload.blockedBy" in problems(exc)


def test_changes_requested_review_must_list_concerns():
    with pytest.raises(ValidationFailed) as exc:
        parse_envelope(envelope("review_response", {"verdict": "changes_requested"}))
    assert "payload.concerns" in problems(exc)
    ok = parse_envelope(
        envelope(
            "review_response",
            {
                "verdict": "changes_requested",
                "unresolvedConcerns": [
                    {"file": "a.py", "line": 3, "severity": "must_fix", "description": "null check"}
                ],
            },
        )
    )
    assert envelope_files(ok) == ["a.py"]


def test_concern_with_bad_severity_names_the_list_item():
    with pytest.raises(ValidationFailed) as exc:
        parse_envelope(
            envelope(
                "review_response",
                {
                    "verdict": "changes_requested",
                    "concerns": [{"file": "a.py", "severity": "meh", "description": "x"}],
                },
            )
        )
    assert "payload.concerns.0.severity" in problems(exc)


def test_knowledge_share_needs_a_discovery_or_data():
    with pytest.raises(ValidationFailed) as exc:
        parse_envelope(envelope("knowledge_share", {"topic": "x"}))
    assert "payload.discovery" in problems(exc)


def test_notification_needs_text_or_data():
    with pytest.raises(ValidationFailed) as exc:
        parse_envelope(envelope("notification", {}))
    assert "payload.text" in problems(exc)


@pytest.mark.parametrize(
    ("alias", "payload", "kind"),
    [
        ("implementation_request", {"title": "build it"}, "task_request"),
        ("implementation-request", {"title": "build it"}, "task_request"),
        ("information_share", {"topic": "t", "discovery": "d"}, "knowledge_share"),
        ("information-share", {"topic": "t", "discovery": "d"}, "knowledge_share"),
        ("data_share", {"topic": "metrics", "dataType": "csv", "data": "a,b"}, "knowledge_share"),
        ("review-request", {"title": "r", "files": ["x"]}, "review_request"),
        ("completion-notice", {"summary": "done"}, "completion_notice"),
    ],
)
def test_seed_aliases_and_spellings_map_to_the_canonical_kind(alias, payload, kind):
    assert parse_envelope({"kind": alias, "payload": payload}).kind == kind


def test_seed_002_type_key_is_accepted_as_kind():
    parsed = parse_envelope({"type": "broadcast", "payload": VALID["broadcast"]})
    assert parsed.kind == "broadcast"


def test_from_and_to_accept_slugs_or_agent_refs():
    parsed = parse_envelope(
        envelope(
            "question",
            VALID["question"],
            **{"from": "roman", "to": [{"agentId": "tim", "role": "VP"}, "ann"]},
        )
    )
    data = envelope_json(parsed)
    assert data["from"] == {"agentId": "roman"}
    assert data["to"] == [{"agentId": "tim", "role": "VP"}, {"agentId": "ann"}]


def test_question_expects_a_response_by_default():
    assert parse_envelope(envelope("question", VALID["question"])).expects_response is True
    assert parse_envelope(envelope("notification", VALID["notification"])).expects_response is False


def test_bad_priority_and_bad_deadline_are_both_reported():
    with pytest.raises(ValidationFailed) as exc:
        parse_envelope(
            envelope("question", VALID["question"], priority="asap", deadline="tomorrow")
        )
    assert {"priority", "deadline"} <= set(problems(exc))


@pytest.mark.parametrize("junk", [None, 3, "text", [], [{"kind": "question"}], 1.5, True])
def test_non_object_envelope_is_a_validation_error(junk):
    with pytest.raises(ValidationFailed):
        parse_envelope(junk)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=5)
    ),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_arbitrary_junk_is_always_a_validation_error(junk):
    try:
        parse_envelope(junk)
    except ValidationFailed as exc:
        assert exc.problems
        assert all(isinstance(p.message, str) and p.message for p in exc.problems)


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(KINDS + tuple(ALIASES)),
    st.dictionaries(st.text(max_size=15), json_values, max_size=6),
    json_values,
)
def test_junk_payloads_of_known_kinds_never_crash(kind, payload, top_value):
    data = {"kind": kind, "payload": payload, "correlationId": top_value}
    try:
        parsed = parse_envelope(data)
    except ValidationFailed as exc:
        assert exc.problems
    else:
        assert parsed.kind in KINDS
