"""The audit: filters, keyset pages, one message in full, and the JSONL exports."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client

from a2a_core.models import Agent, Artifact, AuditEvent, Delivery, Escalation, Task
from a2a_core.selectors import audit as audit_selectors
from a2a_core.selectors.audit import AuditFilter, Cursor, audit_page
from a2a_core.selectors.audit_export import audit_log_chunk, training_chunk
from tests.factories import T0, make_task, register
from tests.factories import record_message as record

pytestmark = pytest.mark.django_db


@pytest.fixture
def agents() -> dict[str, Agent]:
    return {slug: register(slug).agent for slug in ("alpha", "beta", "gamma")}


def shown(response: Any) -> list[str]:
    """The summaries of the rows a results page shows, top to bottom."""
    page = response.context["page"]
    assert page is not None, response.context["form"].errors
    return [m.summary for m in page.messages]


def lines(response: Any) -> list[dict[str, Any]]:
    assert response["Content-Type"] == "application/x-ndjson"
    body = b"".join(response.streaming_content).decode()
    assert body == "" or body.endswith("\n")
    return [json.loads(line) for line in body.splitlines()]


# --- who may look -----------------------------------------------------------------------------


def test_anonymous_users_are_sent_to_log_in_for_every_audit_url(client: Client, agents):
    message = record(agents["alpha"], agents["beta"])
    for url in (
        "/audit/",
        "/audit/export.jsonl",
        "/audit/training.jsonl",
        f"/messages/{message.pk}/",
    ):
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"].startswith("/login/?next=")


def test_a_user_without_a_role_is_refused(client: Client, django_user_model, agents):
    client.force_login(django_user_model.objects.create_user("nobody", password="x" * 20))
    assert client.get("/audit/").status_code == 403
    assert client.get("/audit/export.jsonl").status_code == 403


def test_a_viewer_sees_every_message_newest_first(as_role, agents):
    a, b = agents["alpha"], agents["beta"]
    for minute, text in enumerate(["first", "second", "third"]):
        record(a, b, at=T0 + timedelta(minutes=minute), summary=text)
    response = as_role("viewer").get("/audit/")
    assert response.status_code == 200
    assert shown(response) == ["third", "second", "first"]
    assert "more older" not in response.content.decode()


def test_an_empty_audit_says_so(as_role):
    response = as_role("viewer").get("/audit/")
    assert "No messages yet." in response.content.decode()


# --- filters ----------------------------------------------------------------------------------


@pytest.fixture
def traffic(agents) -> dict[str, Any]:
    """A little of everything: each filter below keeps a known subset."""
    a, b, g = agents["alpha"], agents["beta"], agents["gamma"]
    working = make_task(target=b, caller=a, state="working")
    done = make_task(target=g, caller=b, state="completed")
    record(a, b, at=T0, summary="alpha asks beta", task=working)
    record(
        b,
        a,
        at=T0 + timedelta(minutes=1),
        summary="beta answers alpha",
        task=working,
        kind="response",
        direction="reply",
        decision_reason="",
    )
    record(
        b,
        g,
        at=T0 + timedelta(minutes=2),
        summary="beta asks gamma for a REVIEW",
        kind="review_request",
        task=done,
    )
    record(
        g,
        a,
        at=T0 + timedelta(minutes=3),
        summary="gamma loops back",
        decision="reject",
        decision_reason="loop_detected",
    )
    record(
        a,
        g,
        at=T0 + timedelta(minutes=4),
        summary="alpha needs approval",
        decision="hold",
        decision_reason="approval_required",
        kind="question",
    )
    return agents


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        (
            "agent=alpha",
            ["alpha needs approval", "gamma loops back", "beta answers alpha", "alpha asks beta"],
        ),
        ("sender=beta", ["beta asks gamma for a REVIEW", "beta answers alpha"]),
        ("target=gamma", ["alpha needs approval", "beta asks gamma for a REVIEW"]),
        ("sender=alpha&target=beta", ["alpha asks beta"]),
        ("agent=gamma&sender=beta", ["beta asks gamma for a REVIEW"]),
        ("kind=review_request", ["beta asks gamma for a REVIEW"]),
        ("decision=reject", ["gamma loops back"]),
        ("decision=hold", ["alpha needs approval"]),
        ("reason=loop_detected", ["gamma loops back"]),
        ("state=working", ["beta answers alpha", "alpha asks beta"]),
        ("state=completed", ["beta asks gamma for a REVIEW"]),
        (
            "since=2026-03-01T12:01&until=2026-03-01T12:03",
            ["beta asks gamma for a REVIEW", "beta answers alpha"],
        ),
        ("q=review", ["beta asks gamma for a REVIEW"]),
        ("q=ALPHA&decision=deliver", ["beta answers alpha", "alpha asks beta"]),
        ("kind=notification", []),
    ],
)
def test_each_filter_keeps_only_the_matching_messages(as_role, traffic, query, expected):
    response = as_role("viewer").get(f"/audit/?{query}")
    assert response.status_code == 200
    assert shown(response) == expected


@pytest.mark.parametrize("few", [True, False], ids=["from-the-tasks", "walking-messages"])
def test_the_task_state_filter_finds_the_same_messages_either_way(
    as_role, traffic, monkeypatch, few
):
    # A state with few tasks is searched from the tasks' side, a common one message by message.
    monkeypatch.setattr(audit_selectors, "RARE_STATE_TASKS", 1000 if few else 0)
    client = as_role("viewer")
    assert shown(client.get("/audit/?state=working")) == ["beta answers alpha", "alpha asks beta"]
    assert shown(client.get("/audit/?state=working&agent=beta&kind=response")) == [
        "beta answers alpha"
    ]
    assert shown(client.get("/audit/?state=failed")) == []


def test_a_filter_change_from_htmx_gets_the_results_and_the_field_errors_only(as_role, traffic):
    response = as_role("viewer").get("/audit/?decision=reject", HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert html.startswith('<section id="audit-results"')
    assert "<form" not in html
    assert "gamma loops back" in html and "alpha asks beta" not in html
    assert 'id="error-since" hx-swap-oob="true"' in html
    # The address bar gets a bookmarkable URL with only the filters that are set.
    assert response["HX-Push-Url"] == "/audit/?decision=reject"
    # The export links carry the same filters.
    assert 'href="/audit/export.jsonl?decision=reject"' in html


@pytest.mark.parametrize(
    ("query", "field", "error"),
    [
        ("since=yesterday", "since", "Enter a valid date/time."),
        ("until=2026-02-30T10:00", "until", "Enter a valid date/time."),
        ("since=2026-03-02T00:00&until=2026-03-01T00:00", "until", "Must be after"),
        ("agent=nobody", "agent", "No agent is registered as “nobody”."),
        ("sender=alpha&target=ghost", "target", "No agent is registered as “ghost”."),
        ("kind=telepathy", "kind", "Select a valid choice."),
        ("state=asleep", "state", "Select a valid choice."),
        ("q=" + "x" * 300, "q", "at most 200 characters"),
    ],
)
def test_bad_filters_are_shown_next_to_their_field_and_nothing_is_searched(
    as_role, traffic, query, field, error
):
    client = as_role("viewer")
    response = client.get(f"/audit/?{query}")
    assert response.status_code == 200
    assert response.context["page"] is None
    html = response.content.decode()
    start = html.index(f'id="error-{field}"')
    assert error in html[start : html.index("</span>", start)]
    assert "fix them above to search" in html
    # The same through htmx: the error travels out of band to its field.
    partial = client.get(f"/audit/?{query}", HTTP_HX_REQUEST="true").content.decode()
    start = partial.index(f'id="error-{field}" hx-swap-oob="true"')
    assert error in partial[start : partial.index("</span>", start)]


def test_a_cursor_the_hub_did_not_make_is_an_error_not_a_crash(as_role, traffic):
    for token in ("garbage", Cursor((T0, 1)).encode()[:-3], "bnxub3R8YQ"):
        response = as_role("viewer").get(f"/audit/?decision=reject&cursor={token}")
        assert response.status_code == 200
        html = response.content.decode()
        assert "not one the hub made" in html
        assert 'href="/audit/?decision=reject"' in html


# --- pages ------------------------------------------------------------------------------------


def test_pages_walk_older_and_back_newer_without_gaps_or_repeats_across_equal_timestamps(agents):
    a, b = agents["alpha"], agents["beta"]
    # 23 messages, most sharing a timestamp with a neighbour (ties broken by id).
    made = [record(a, b, at=T0 + timedelta(seconds=i // 4), summary=f"m{i}") for i in range(23)]
    newest_first = [m.pk for m in reversed(made)]
    filters = AuditFilter()

    pages, cursor = [], None
    while True:
        page = audit_page(filters=filters, cursor=cursor, limit=5)
        pages.append([m.pk for m in page.messages])
        if page.older is None:
            break
        cursor = Cursor.decode(page.older.encode())  # through the opaque token
    assert [pk for p in pages for pk in p] == newest_first
    assert [len(p) for p in pages] == [5, 5, 5, 5, 3]

    back = []
    while page.newer is not None:
        page = audit_page(filters=filters, cursor=Cursor.decode(page.newer.encode()), limit=5)
        back.append([m.pk for m in page.messages])
    assert back == pages[-2::-1]


def test_the_agent_filter_pages_through_sent_and_received_messages_alike(agents):
    a, b, g = agents["alpha"], agents["beta"], agents["gamma"]
    made = []
    for i in range(12):
        pair = [(a, b), (b, a), (g, b), (a, a)][i % 4]
        made.append(record(*pair, at=T0 + timedelta(seconds=i // 3), summary=f"m{i}"))
    expected = [m.pk for m in reversed(made) if a.pk in (m.sender_id, m.target_id)]
    filters = AuditFilter(agent_id=a.pk)
    seen, cursor = [], None
    while True:
        page = audit_page(filters=filters, cursor=cursor, limit=2)
        seen += [m.pk for m in page.messages]
        if page.older is None:
            break
        cursor = page.older
    assert seen == expected


def test_the_page_links_carry_the_filters_and_an_opaque_cursor(as_role, agents):
    a, b = agents["alpha"], agents["beta"]
    for i in range(60):
        record(a, b, at=T0 + timedelta(seconds=i), summary=f"m{i}")
    client = as_role("viewer")
    first = client.get("/audit/?agent=alpha")
    assert (
        len(shown(first)) == 50 and "60 messages match; 50 on this page" in first.content.decode()
    )
    older = first.context["page"].older
    second = client.get(f"/audit/?agent=alpha&cursor={older.encode()}")
    assert shown(second) == [f"m{i}" for i in range(9, -1, -1)]
    html = second.content.decode()
    assert f"agent=alpha&amp;cursor={second.context['page'].newer.encode()}" in html
    assert "« Newest" in html and 'rel="next"' not in html


def test_a_text_search_looks_through_a_bounded_window_and_offers_to_go_on(
    as_role, agents, monkeypatch
):
    monkeypatch.setattr(audit_selectors, "TEXT_WINDOW", 10)
    monkeypatch.setattr(audit_selectors, "TEXT_CHUNK", 4)
    a, b = agents["alpha"], agents["beta"]
    record(a, b, at=T0, summary="the needle, far back")
    for i in range(1, 25):
        record(a, b, at=T0 + timedelta(seconds=i), summary=f"hay {i}")

    page = audit_page(filters=AuditFilter(text="needle"))
    assert page.messages == [] and page.searched_to == T0 + timedelta(seconds=15)
    page = audit_page(filters=AuditFilter(text="needle"), cursor=page.older)
    assert page.messages == [] and page.older is not None
    page = audit_page(filters=AuditFilter(text="needle"), cursor=page.older)
    assert [m.summary for m in page.messages] == ["the needle, far back"]
    assert page.older is None and page.searched_to is None

    html = as_role("viewer").get("/audit/?q=needle").content.decode()
    assert "Looked through 10 messages back to 2026-03-01 12:00:15" in html
    assert "Search further back" in html


def test_the_page_runs_a_fixed_number_of_queries(as_role, agents, django_assert_num_queries):
    a, b = agents["alpha"], agents["beta"]
    task = make_task(target=b, caller=a)
    for i in range(60):
        record(a, b, at=T0 + timedelta(seconds=i), task=task if i % 2 else None)
    client = as_role("viewer")
    client.get("/audit/")
    # session, user, roles, the page's (created_at, id)s, its rows, the count of matches, the
    # agent list, the escalation badge
    with django_assert_num_queries(8):
        assert client.get("/audit/").status_code == 200
    # + the agent's id, and a second index walk (sent, received)
    with django_assert_num_queries(10):
        assert client.get("/audit/?agent=alpha").status_code == 200


# --- one message --------------------------------------------------------------------------------


def test_a_message_shows_everything_the_hub_holds_about_it(as_role, agents):
    a, b = agents["alpha"], agents["beta"]
    task = make_task(target=b, caller=a, state="completed")
    envelope = {"kind": "review_request", "payload": {"title": "t", "files": ["src/x.py"]}}
    message = record(
        a,
        b,
        task=task,
        kind="review_request",
        envelope=envelope,
        parts=[{"data": envelope, "mediaType": "application/json"}],
        metadata={"note": 1},
        latency_ms=42,
        decision_latency_us=120,
    )
    Delivery.objects.create(message=message, recipient=b, state="acked", attempts=2)
    response = as_role("viewer").get(f"/messages/{message.pk}/")
    assert response.status_code == 200
    document = json.loads(response.context["document"])
    assert document["message"] == {
        "messageId": message.message_id,
        "role": "ROLE_USER",
        "parts": [{"data": envelope, "mediaType": "application/json"}],
        "contextId": task.context_id,
        "taskId": task.pk,
        "metadata": {"note": 1},
    }
    assert document["hub"]["envelope"] == envelope
    assert document["hub"]["decision"] == {
        "action": "deliver",
        "reason": "ok",
        "detail": "",
        "latencyUs": 120,
        "redirectedTo": None,
        "policyVersion": None,
        "decidedBy": None,
    }
    assert document["hub"]["from"] == "alpha" and document["hub"]["to"] == "beta"
    assert document["deliveries"][0]["recipient"] == "beta"
    assert document["deliveries"][0]["attempts"] == 2
    assert document["task"] == {"id": task.pk, "state": "completed", "contextId": task.context_id}
    html = response.content.decode()
    assert f'href="/tasks/{task.pk}/"' in html
    assert f'href="/contexts/{task.context_id}/"' in html


def test_an_unknown_message_is_not_found(as_role):
    assert as_role("viewer").get("/messages/999999/").status_code == 404


def test_agent_text_is_escaped_in_the_results_and_in_the_json(as_role, agents):
    script = "<script>alert('x')</script>"
    message = record(
        agents["alpha"],
        agents["beta"],
        summary=script,
        parts=[{"text": script}],
        decision="reject",
        decision_reason="denied_by_matrix",
        decision_detail=f"<img src=x onerror=alert(1)>{script}",
    )
    client = as_role("viewer")
    for url in ("/audit/", f"/messages/{message.pk}/"):
        html = client.get(url).content.decode()
        assert "<script>alert" not in html
        assert "<img src=x" not in html
        assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html


# --- exports ------------------------------------------------------------------------------------


def test_the_traffic_log_export_has_one_line_per_message_in_the_seed_schema(as_role, traffic):
    g = traffic["gamma"]
    envelope = {
        "kind": "task_request",
        "payload": {"title": "do it", "context": {"files": ["a.py"], "relatedFiles": ["b.py"]}},
    }
    task = make_task(target=g, caller=traffic["alpha"])
    message = record(
        traffic["alpha"],
        g,
        at=T0 + timedelta(minutes=5),
        summary="do it",
        kind="task_request",
        envelope=envelope,
        task=task,
        responded_at=T0 + timedelta(minutes=5, seconds=1),
        latency_ms=1000,
    )
    response = as_role("viewer").get("/audit/export.jsonl")
    assert response.status_code == 200
    assert response["Content-Disposition"].startswith('attachment; filename="a2a-audit-')
    assert response["Content-Disposition"].endswith('.jsonl"')
    log = lines(response)
    assert len(log) == 6
    assert [line["messageSummary"] for line in log][:2] == ["alpha asks beta", "beta answers alpha"]
    assert log[-1] == {
        "timestamp": "2026-03-01T12:05:00Z",
        "from": "alpha",
        "to": "gamma",
        "type": "task_request",
        "messageSummary": "do it",
        "files": ["a.py", "b.py"],
        "responseReceived": True,
        "latencyMs": 1000,
        "policyDecision": {
            "action": "deliver",
            "reason": "ok",
            "detail": "",
            "policyVersion": None,
            "decidedBy": None,
        },
        "coordinatorAction": {
            "action": "deliver",
            "reason": "ok",
            "detail": "",
            "policyVersion": None,
            "decidedBy": None,
        },
        "messageId": message.message_id,
        "taskId": task.pk,
        "contextId": task.context_id,
    }
    refused = next(line for line in log if line["messageSummary"] == "gamma loops back")
    assert refused["policyDecision"] == {
        "action": "reject",
        "reason": "loop_detected",
        "detail": "",
        "policyVersion": None,
        "decidedBy": None,
    }
    # The earlier name of the same field, for readers of older exports.
    assert refused["coordinatorAction"] == refused["policyDecision"]
    assert refused["taskId"] is None and refused["contextId"] is None
    assert refused["responseReceived"] is False and refused["latencyMs"] is None


def test_the_export_takes_the_page_filters_and_is_recorded_in_the_audit_log(as_role, traffic):
    response = as_role("viewer").get("/audit/export.jsonl?agent=alpha&decision=deliver")
    assert [line["messageSummary"] for line in lines(response)] == [
        "alpha asks beta",
        "beta answers alpha",
    ]
    event = AuditEvent.objects.get(action="audit.export.messages")
    assert event.actor is not None and event.actor.username == "viewer"
    assert event.data == {
        "filters": {"agent": "alpha", "decision": "deliver"},
        "rows": 2,
        "complete": True,
    }
    assert event.summary == "exported 2 messages"


def test_an_export_with_bad_filters_is_refused_with_the_reasons(as_role, traffic):
    response = as_role("viewer").get("/audit/export.jsonl?since=soon&agent=ghost")
    assert response.status_code == 400
    text = response.content.decode()
    assert "since: Enter a valid date/time." in text
    assert "agent: No agent is registered as “ghost”." in text
    assert not AuditEvent.objects.filter(action__startswith="audit.export").exists()


def test_the_export_reads_in_keyset_chunks_that_join_up_exactly(agents):
    a, b = agents["alpha"], agents["beta"]
    made = [record(a, b, at=T0 + timedelta(seconds=i // 3), summary=f"m{i}") for i in range(10)]
    got, after = [], None
    while True:
        chunk, after = audit_log_chunk(filters=AuditFilter(agent_id=a.pk), after=after, size=3)
        got += [line["messageId"] for line in chunk]
        if after is None:
            break
    assert got == [m.message_id for m in made]


def test_the_training_export_gives_each_task_once_as_a_conversation_with_its_outcome(
    as_role, agents, django_user_model
):
    a, b = agents["alpha"], agents["beta"]
    done = make_task(target=b, caller=a, state="completed", skill="review")
    Task.objects.filter(pk=done.pk).update(
        created_at=T0, status_timestamp=T0 + timedelta(seconds=3)
    )
    record(a, b, at=T0, task=done, summary="review x.py")
    record(
        b,
        a,
        at=T0 + timedelta(seconds=1),
        task=done,
        role="agent",
        direction="reply",
        kind="response",
        summary="which branch?",
        decision_reason="",
    )
    operator = django_user_model.objects.create_user("olga", password="x" * 20)
    record(
        None,
        b,
        at=T0 + timedelta(seconds=2),
        task=done,
        author=operator,
        summary="main",
        parts=[{"text": "main"}, {"data": {"branch": "main"}}],
    )
    record(
        a,
        b,
        at=T0 + timedelta(seconds=2),
        task=done,
        summary="refused retry",
        decision="reject",
        decision_reason="rate_limit_minute",
    )
    Artifact.objects.create(task=done, artifact_id="a1", name="review", parts=[{"text": "LGTM"}])
    Escalation.objects.create(kind="input_required", task=done, agent=b, question="which?")
    failed = make_task(target=a, caller=b, state="failed", reason="it broke")
    record(b, a, at=T0 + timedelta(minutes=1), task=failed, summary="build it")

    response = as_role("viewer").get("/audit/training.jsonl")
    assert response["Content-Disposition"].startswith('attachment; filename="a2a-training-')
    examples = lines(response)
    assert [e["taskId"] for e in examples] == [done.pk, failed.pk]
    first = examples[0]
    assert first["messages"] == [
        {"role": "user", "from": "alpha", "text": "review x.py", "data": []},
        {"role": "agent", "from": "beta", "text": "which branch?", "data": []},
        {"role": "user", "from": "human:olga", "text": "main", "data": [{"branch": "main"}]},
    ]
    assert first["outcome"] == {
        "state": "completed",
        "error": None,
        "artifacts": [{"name": "review", "text": "LGTM", "data": []}],
    }
    assert first["metadata"] == {
        "agent": "beta",
        "caller": "alpha",
        "skill": "review",
        "successful": True,
        "durationMs": 3000,
        "requiredHumanInput": True,
        "escalationCount": 1,
        "parentTaskId": None,
        "depth": 0,
        "createdAt": "2026-03-01T12:00:00Z",
    }
    assert examples[1]["outcome"]["error"] == "it broke"
    assert examples[1]["metadata"]["successful"] is False

    # Filters pick tasks by their messages: beta's failed task is the only one beta started.
    response = as_role("viewer").get("/audit/training.jsonl?sender=beta&kind=request")
    assert [e["taskId"] for e in lines(response)] == [failed.pk]
    event = AuditEvent.objects.filter(action="audit.export.tasks").latest("pk")
    assert event.data["rows"] == 1 and event.data["filters"] == {
        "sender": "beta",
        "kind": "request",
    }


def test_a_task_whose_messages_span_export_chunks_is_exported_once(agents):
    a, b = agents["alpha"], agents["beta"]
    long_running = make_task(target=b, caller=a, state="completed")
    short = make_task(target=a, caller=b, state="completed")
    record(a, b, at=T0, task=long_running, summary="start")
    record(b, a, at=T0 + timedelta(seconds=1), task=short, summary="quick one")
    record(
        b,
        a,
        at=T0 + timedelta(seconds=2),
        task=long_running,
        summary="progress",
        role="agent",
        direction="reply",
        kind="status_update",
        decision_reason="",
    )
    record(a, b, at=T0 + timedelta(seconds=3), task=long_running, summary="more")
    record(a, b, at=T0 + timedelta(seconds=4), summary="refused", decision="reject")

    for filters in (AuditFilter(), AuditFilter(agent_id=a.pk), AuditFilter(decision="deliver")):
        exported, after = [], None
        while True:
            chunk, after = training_chunk(filters=filters, after=after, size=1)
            exported += [example["taskId"] for example in chunk]
            if after is None:
                break
        assert exported == [long_running.pk, short.pk]
        assert [t["text"] for t in _conversation(filters, long_running.pk)] == [
            "start",
            "progress",
            "more",
        ]


def _conversation(filters: AuditFilter, task_id: str) -> list[dict[str, Any]]:
    chunk, _ = training_chunk(filters=filters, after=None, size=100)
    return next(e["messages"] for e in chunk if e["taskId"] == task_id)


def test_an_export_of_nothing_says_so_instead_of_offering_an_empty_file(as_role):
    alpha, beta = register("alpha").agent, register("beta").agent
    record(alpha, beta, summary="something")
    viewer = as_role("viewer")

    nothing = viewer.get("/audit/?q=no-such-words").content.decode()
    something = viewer.get("/audit/?q=something").content.decode()

    assert "Nothing to export: no message matches these filters." in nothing
    assert 'id="export-log"' not in nothing
    assert 'id="export-log"' in something and "Nothing to export" not in something
