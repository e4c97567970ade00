"""The tasks screens: the board by state, a task page, a conversation; roles and escaping."""

from __future__ import annotations

import re
from datetime import timedelta
from html import unescape

import pytest
from django.test import Client
from django.utils import timezone

from a2a_core.models import (
    Artifact,
    Direction,
    Escalation,
    EscalationKind,
    Message,
    Task,
    TaskEvent,
    TaskEventKind,
    TaskState,
)
from a2a_core.selectors.task_views import BoardFilter, conversation, task_board, task_detail
from tests.factories import make_task, register

pytestmark = pytest.mark.django_db

XSS = "<script>alert('x')</script>"
XSS_ESCAPED = "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;"


def say(task: Task, text: str, *, reply: bool = False, parts: list | None = None) -> Message:
    """A message on `task`: the caller's request, or the target's reply."""
    sender, target = (task.target, task.caller) if reply else (task.caller, task.target)
    return Message.objects.create(
        message_id=f"m-{Message.objects.count() + 1}",
        role="agent" if reply else "user",
        direction=Direction.REPLY if reply else Direction.REQUEST,
        kind="response" if reply else "request",
        parts=parts if parts is not None else [{"text": text}],
        summary=text[:200],
        sender=sender,
        target=target,
        task=task,
        context_id=task.context_id,
    )


@pytest.fixture
def pair():
    return register("alpha").agent, register("beta").agent


def test_every_role_sees_the_board_a_task_and_its_conversation(as_role, pair):
    task = make_task(caller=pair[0], target=pair[1], context_id="ctx-roles")
    say(task, "hello")
    for role in ("viewer", "operator", "admin"):
        client = as_role(role)
        for url in ("/tasks/", f"/tasks/{task.pk}/", "/contexts/ctx-roles/"):
            assert client.get(url).status_code == 200, (role, url)


def test_anonymous_users_and_users_without_a_role_see_no_task_screen(
    client: Client, django_user_model, pair
):
    task = make_task(caller=pair[0], target=pair[1], context_id="ctx-anon")
    urls = ("/tasks/", f"/tasks/{task.pk}/", "/contexts/ctx-anon/")
    for url in urls:
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/login/?next=")
    client.force_login(django_user_model.objects.create_user("nobody", password="x" * 20))
    for url in urls:
        assert client.get(url).status_code == 403


def test_an_unknown_task_or_context_is_not_found(as_role):
    viewer = as_role("viewer")
    assert viewer.get("/tasks/no-such-task/").status_code == 404
    assert viewer.get("/contexts/no-such-context/").status_code == 404


# --- the board ----------------------------------------------------------------------------


def board_columns(html: str) -> dict[str, list[str]]:
    """state -> the task ids its column shows, in order."""
    columns = {}
    for state, body in re.findall(
        r'<div class="board-column" data-state="([a-z-]+)">(.*?)</ol>', html, re.S
    ):
        columns[state] = re.findall(r'data-task="([^"]+)"', body)
    return columns


def test_the_board_shows_each_task_in_its_states_column_with_who_what_and_first_words(
    as_role, pair
):
    alpha, beta = pair
    working = make_task(caller=alpha, target=beta, state=TaskState.WORKING, skill="translate")
    say(working, "translate this please")
    say(working, "a later message")
    asking = make_task(caller=beta, target=alpha, state=TaskState.INPUT_REQUIRED)
    failed = make_task(caller=alpha, target=beta, state=TaskState.FAILED, reason="agent down")

    html = as_role("viewer").get("/tasks/").content.decode()

    columns = board_columns(html)
    assert list(columns) == [
        "submitted",
        "working",
        "input-required",
        "auth-required",
        "completed",
        "failed",
        "canceled",
        "rejected",
    ]
    assert columns["working"] == [working.pk]
    assert columns["input-required"] == [asking.pk]
    assert columns["failed"] == [failed.pk]
    card = html[html.index(f'data-task="{working.pk}"') :][:1500]
    assert "alpha" in card and "beta" in card and "translate" in card
    assert "translate this please" in card and "a later message" not in card
    assert "agent down" in html
    assert 'data-state="working"' in html


def test_ended_columns_show_the_most_recent_tasks_only(pair):
    now = timezone.now()
    for i in range(15):
        task = make_task(caller=pair[0], target=pair[1], state=TaskState.COMPLETED)
        Task.objects.filter(pk=task.pk).update(status_timestamp=now - timedelta(minutes=i))
    board = task_board(filters=BoardFilter(), ended_limit=12)
    [completed] = [c for c in board.ended if c.state == "completed"]
    assert len(completed.tasks) == 12 and completed.more
    stamps = [t.status_timestamp for t in completed.tasks]
    assert stamps == sorted(stamps, reverse=True) and stamps[0] == now


def test_the_board_filters_by_agent_and_by_text(as_role, pair):
    alpha, beta = pair
    gamma = register("gamma").agent
    mine = make_task(caller=alpha, target=beta)
    say(mine, "find the invoice")
    theirs = make_task(caller=gamma, target=beta, skill="billing")
    viewer = as_role("viewer")

    by_agent = viewer.get("/tasks/", {"agent": "gamma"}).content.decode()
    assert theirs.pk in by_agent and mine.pk not in by_agent
    by_text = viewer.get("/tasks/", {"q": "INVOICE"}).content.decode()
    assert mine.pk in by_text and theirs.pk not in by_text
    by_skill = viewer.get("/tasks/", {"q": "billing"}).content.decode()
    assert theirs.pk in by_skill and mine.pk not in by_skill
    nobody = viewer.get("/tasks/", {"agent": "no-such-agent"}).content.decode()
    assert mine.pk not in nobody and theirs.pk not in nobody


def test_an_htmx_request_gets_the_board_alone(as_role, pair):
    task = make_task(caller=pair[0], target=pair[1])
    html = as_role("viewer").get("/tasks/", HTTP_HX_REQUEST="true").content.decode()
    assert html.startswith('<div id="task-board"') and task.pk in html
    assert "<html" not in html


def test_going_back_to_a_filtered_board_gets_the_whole_page(as_role, pair):
    make_task(caller=pair[0], target=pair[1])
    html = (
        as_role("viewer")
        .get("/tasks/?agent=alpha", HTTP_HX_REQUEST="true", HTTP_HX_HISTORY_RESTORE_REQUEST="true")
        .content.decode()
    )
    assert "<html" in html and 'id="task-filters"' in html


def test_the_board_is_live_and_its_refresh_keeps_the_filters():
    from django.template.loader import render_to_string

    trigger = render_to_string("dashboard/tasks.html#refresh")
    assert 'id="board-refresh"' in trigger and 'hx-include="#task-filters"' in trigger
    assert 'hx-target="#task-board"' in trigger


def test_the_board_reads_one_query_per_column(pair, django_assert_num_queries):
    for state in TaskState.values:
        say(make_task(caller=pair[0], target=pair[1], state=state), f"in {state}")
    with django_assert_num_queries(8):
        board = task_board(filters=BoardFilter(text="in"))
        summaries = [t.first_summary for c in [*board.open, *board.ended] for t in c.tasks]
    assert sorted(summaries) == sorted(f"in {s}" for s in TaskState.values)
    with django_assert_num_queries(9):
        task_board(filters=BoardFilter(agent="alpha"))


# --- a task -------------------------------------------------------------------------------


def chain_of_three(pair):
    """root (alpha -> beta) -> child (beta -> gamma) -> grandchild (gamma -> alpha)."""
    alpha, beta = pair
    gamma = register("gamma").agent
    root = make_task(caller=alpha, target=beta, state=TaskState.WORKING, path=["alpha", "beta"])
    child = make_task(
        caller=beta,
        target=gamma,
        state=TaskState.COMPLETED,
        parent=root,
        root=root,
        depth=1,
        context_id="ctx-child",
    )
    grandchild = make_task(
        caller=gamma,
        target=alpha,
        state=TaskState.FAILED,
        parent=child,
        root=root,
        depth=2,
        context_id="ctx-grandchild",
    )
    return root, child, grandchild


def svg_of(html: str) -> str:
    return html[html.index('<svg class="chain"') : html.rindex("</svg>")]


def test_the_task_page_draws_the_whole_chain_from_any_of_its_tasks(as_role, pair):
    root, child, grandchild = chain_of_three(pair)
    viewer = as_role("viewer")
    for current in (root, child, grandchild):
        svg = svg_of(viewer.get(f"/tasks/{current.pk}/").content.decode())
        nodes = dict(re.findall(r'data-task="([^"]+)" data-state="([a-z-]+)"', svg))
        assert nodes == {root.pk: "working", child.pk: "completed", grandchild.pk: "failed"}
        edges = re.findall(r'data-parent="([^"]+)" data-child="([^"]+)"', svg)
        assert sorted(edges) == sorted([(root.pk, child.pk), (child.pk, grandchild.pk)])
        assert re.findall(r'class="node [a-z-]+ current"[^>]*data-task="([^"]+)"', svg) == [
            current.pk
        ]
        assert f'href="/tasks/{child.pk}/"' in svg
        assert "beta → gamma" in svg


def test_the_task_page_shows_its_facts_timeline_messages_artifacts_and_escalations(as_role, pair):
    alpha, beta = pair
    task = make_task(
        caller=alpha,
        target=beta,
        state=TaskState.INPUT_REQUIRED,
        skill="plan",
        trace_id="ab" * 16,
        deadline=timezone.now() + timedelta(minutes=5),
        context_id="ctx-facts",
    )
    for seq, (kind, state, payload) in enumerate(
        [
            (TaskEventKind.STATUS, "working", {"statusUpdate": {"status": {"state": "W"}}}),
            (
                TaskEventKind.ARTIFACT,
                "",
                {"artifactUpdate": {"artifact": {"name": "draft"}, "append": True}},
            ),
            (
                TaskEventKind.STATUS,
                "input-required",
                {
                    "statusUpdate": {
                        "status": {"state": "I", "message": {"parts": [{"text": "which day?"}]}}
                    }
                },
            ),
        ],
        start=1,
    ):
        TaskEvent.objects.create(task=task, seq=seq, kind=kind, state=state, payload=payload)
    Task.objects.filter(pk=task.pk).update(event_seq=3)
    say(task, "plan a trip")
    say(task, "which day?", reply=True)
    say(task, "", parts=[{"data": {"city": "Lyon", "days": 3}, "mediaType": "application/json"}])
    Artifact.objects.create(
        task=task,
        artifact_id="a1",
        name="draft",
        parts=[{"text": "Day 1: "}, {"text": "museums."}, {"data": {"ok": True}}],
        complete=False,
    )
    Escalation.objects.create(
        kind=EscalationKind.INPUT_REQUIRED, task=task, agent=beta, question="which day?"
    )

    html = as_role("viewer").get(f"/tasks/{task.pk}/").content.decode()

    assert "ab" * 16 in html and "plan" in html and 'href="/contexts/ctx-facts/"' in html
    assert "data-deadline=" in html
    timeline = html[html.index('class="timeline"') : html.index("</ol>", html.index("timeline"))]
    order = [timeline.index(s) for s in ("created at the hub", ">working<", "draft", "which day?")]
    assert order == sorted(order) and "chunk" in timeline
    chat = html[html.index('class="chat"') :]
    assert chat.index("plan a trip") < chat.index("which day?")
    assert 'class="msg reply"' in chat
    assert "&quot;city&quot;: &quot;Lyon&quot;" in chat  # data parts as pretty JSON
    assert "Day 1: museums." in html  # chunks joined
    assert "streaming…" in html
    assert "Input required" in html and "decide it</a>" in html


def test_agent_text_is_shown_as_text_on_the_task_page_graph_and_conversation(as_role, pair):
    alpha, beta = pair
    task = make_task(
        caller=alpha, target=beta, skill=XSS, reason=XSS, state=TaskState.FAILED, context_id=XSS
    )
    say(task, XSS)
    say(task, "", reply=True, parts=[{"data": {"html": XSS}}])
    Artifact.objects.create(task=task, artifact_id="x", name=XSS, parts=[{"text": XSS}])
    viewer = as_role("viewer")

    page = viewer.get(f"/tasks/{task.pk}/").content.decode()
    svg = svg_of(page)
    assert "&lt;script&gt;" in svg and "<script" not in svg
    assert XSS_ESCAPED in page and "<script>alert" not in page

    board = viewer.get("/tasks/").content.decode()
    assert XSS_ESCAPED in board and "<script>alert" not in board

    context_url = unescape(page.split('href="/contexts/', 1)[1].split('"', 1)[0])
    talk = viewer.get(f"/contexts/{context_url}").content.decode()
    assert XSS_ESCAPED in talk and "<script>alert" not in talk


def test_the_task_page_reads_a_fixed_number_of_queries(pair, django_assert_num_queries):
    root, child, grandchild = chain_of_three(pair)
    for task in (root, child, grandchild):
        say(task, "work")
        say(task, "done", reply=True)
        Artifact.objects.create(task=task, artifact_id="a", parts=[{"text": "x"}])
    with django_assert_num_queries(6):
        detail = task_detail(task_id=child.pk)
        [m.message.sender.slug for m in detail.messages]
        [t.caller.slug for t in detail.chain if t.caller]
    assert len(detail.chain) == 3


def test_an_htmx_refresh_of_a_task_gets_its_live_part(as_role, pair):
    task = make_task(caller=pair[0], target=pair[1])
    html = as_role("viewer").get(f"/tasks/{task.pk}/", HTTP_HX_REQUEST="true").content.decode()
    assert html.startswith('<div id="task-live">') and "<html" not in html


# --- a conversation -----------------------------------------------------------------------


def test_the_conversation_shows_every_message_of_every_task_in_the_context_in_time_order(
    as_role, pair
):
    alpha, beta = pair
    first = make_task(caller=alpha, target=beta, context_id="trip/2026", state="completed")
    second = make_task(caller=alpha, target=beta, context_id="trip/2026")
    elsewhere = make_task(caller=alpha, target=beta, context_id="other")
    for task, text in ((first, "one"), (first, "two"), (second, "three"), (elsewhere, "nope")):
        say(task, text, reply=text == "two")
    Message.objects.filter(summary="one").update(decision="hold", decision_reason="approval")

    html = as_role("viewer").get("/contexts/trip/2026/").content.decode()

    chat = html[html.index('class="chat conversation"') :]
    assert [chat.index(w) for w in ("one", "two", "three")] == sorted(
        chat.index(w) for w in ("one", "two", "three")
    )
    assert "nope" not in html
    assert f'href="/tasks/{first.pk}/"' in html and f'href="/tasks/{second.pk}/"' in html
    assert "Held for a human" in chat and "approval" in chat
    assert 'class="msg reply"' in chat


def test_the_conversation_includes_the_hops_delegated_from_it(as_role, pair):
    alpha, beta = pair
    gamma = register("gamma").agent
    root = make_task(caller=alpha, target=beta, context_id="plan")
    child = make_task(
        caller=beta, target=gamma, context_id="hop-1", parent=root, root=root, depth=1
    )
    grandchild = make_task(
        caller=gamma, target=alpha, context_id="hop-2", parent=child, root=root, depth=2
    )
    make_task(caller=beta, target=gamma, context_id="unrelated")
    for task, text in ((root, "plan it"), (child, "design it"), (grandchild, "test it")):
        say(task, text)

    html = as_role("viewer").get("/contexts/plan/").content.decode()

    chat = html[html.index('class="chat conversation"') :]
    assert all(text in chat for text in ("plan it", "design it", "test it"))
    assert f'href="/tasks/{grandchild.pk}/"' in html
    assert 'href="/contexts/plan/trace/"' in html


def test_the_conversation_reads_three_queries(pair, django_assert_num_queries):
    for _ in range(3):
        task = make_task(caller=pair[0], target=pair[1], context_id="ctx-q")
        say(task, "hi")
        say(task, "hello", reply=True)
    with django_assert_num_queries(3):
        found = conversation(context_id="ctx-q")
        [(m.message.sender.slug, m.message.task.state) for m in found.messages]
    assert len(found.messages) == 6 and len(found.tasks) == 3
