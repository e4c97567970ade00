"""Every screen answers each role as it should: pages for all, actions by role."""

from __future__ import annotations

import pytest
from django.test import Client

from a2a_core.models import AgentStatus
from tests.factories import register

pytestmark = pytest.mark.django_db


def test_anonymous_users_are_sent_to_the_login_page(client: Client):
    for url in ("/", "/traffic/", "/agents/", "/escalations/", "/policy/"):
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"].startswith("/login/?next=")


def test_a_user_without_a_role_sees_nothing(client: Client, django_user_model):
    client.force_login(django_user_model.objects.create_user("nobody", password="x" * 20))
    assert client.get("/traffic/").status_code == 403


def test_the_traffic_page_lists_recent_messages_and_escapes_agent_text(as_role):
    from a2a_core.models import Message

    pair = register("alpha"), register("beta")
    Message.objects.create(
        message_id="m1",
        role="user",
        kind="request",
        sender=pair[0].agent,
        target=pair[1].agent,
        summary="<script>alert('x')</script>",
        decision="reject",
        decision_reason="denied_by_matrix",
    )
    page = as_role("viewer").get("/traffic/").content.decode()
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
    assert "<script>alert" not in page
    assert "denied_by_matrix" in page


def test_only_an_admin_can_suspend_an_agent(as_role):
    agent = register("alpha").agent
    for role in ("viewer", "operator"):
        client = as_role(role)
        response = client.post(
            f"/agents/{agent.slug}/suspend/", {"reason": "x"}, HTTP_X_CSRFTOKEN=""
        )
        assert response.status_code == 403
    agent.refresh_from_db()
    assert agent.status != AgentStatus.SUSPENDED


def test_an_admin_suspends_resumes_and_rotates_a_token(as_role):
    agent = register("alpha").agent
    admin = as_role("admin")
    admin.get(f"/agents/{agent.slug}/")
    token = admin.cookies["csrftoken"].value
    response = admin.post(
        f"/agents/{agent.slug}/suspend/",
        {"reason": "looping"},
        HTTP_X_CSRFTOKEN=token,
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 200 and "alpha is suspended." in response.content.decode()
    agent.refresh_from_db()
    assert (agent.status, agent.status_reason) == ("suspended", "looping")
    response = admin.post(
        f"/agents/{agent.slug}/token/", HTTP_X_CSRFTOKEN=token, HTTP_HX_REQUEST="true"
    )
    assert 'id="new-token"' in response.content.decode()


def test_a_post_without_the_csrf_token_is_refused(as_role):
    agent = register("alpha").agent
    response = as_role("admin").post(f"/agents/{agent.slug}/suspend/", {"reason": "x"})
    assert response.status_code == 403
    agent.refresh_from_db()
    assert agent.status != AgentStatus.SUSPENDED


def test_an_endpoint_agent_is_last_seen_when_it_last_sent_a_message(as_role):
    from datetime import timedelta

    from django.utils import timezone

    from tests.factories import record_message, register

    alpha, beta = register("alpha").agent, register("beta").agent
    record_message(alpha, beta, at=timezone.now() - timedelta(minutes=3))
    board = as_role("viewer").get("/agents/").content.decode()
    rows = {
        slug: board[board.index(f'href="/agents/{slug}/"') :][:1500] for slug in ("alpha", "beta")
    }
    assert "3\xa0minutes ago" in rows["alpha"]
    assert "never" in rows["beta"]  # it has only received
    page = as_role("viewer").get("/agents/alpha/").content.decode()
    assert "<dt>Last seen</dt><dd>3\xa0minutes ago</dd>" in page


def test_when_an_agent_was_last_seen_reads_as_people_say_it(as_role):
    from datetime import timedelta

    from django.utils import timezone

    from a2a_core.models import Agent

    just = register("seen-just-now").agent
    earlier = register("seen-earlier").agent
    Agent.objects.filter(pk=just.pk).update(last_seen_at=timezone.now())
    Agent.objects.filter(pk=earlier.pk).update(
        last_seen_at=timezone.now() - timedelta(minutes=5, seconds=10)
    )
    viewer = as_role("viewer")

    assert "just now" in viewer.get("/agents/seen-just-now/").content.decode()
    listing = viewer.get("/agents/").content.decode()
    assert "5\xa0minutes ago" in listing and "0\xa0minutes" not in listing


def test_the_agent_page_lists_tasks_by_what_they_are_about(as_role):
    from tests.factories import make_task, record_message

    alpha, beta = register("alpha").agent, register("beta").agent
    task = make_task(caller=alpha, target=beta)
    record_message(alpha, beta, task=task, summary="draft the release notes")

    page = as_role("viewer").get("/agents/beta/").content.decode()

    assert f'<a href="/tasks/{task.pk}/" title="task {task.pk}">draft the release notes</a>' in page
