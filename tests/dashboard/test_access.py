"""Every dashboard address, and who may use it: checked for each role and without CSRF.

The table below names the role each address needs; a new address without a row fails the
first test, so no page or action can be added without deciding who may use it.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import URLPattern, reverse

from a2a_core.models import (
    Agent,
    AuditEvent,
    Escalation,
    Notification,
    NotificationTarget,
    PolicyVersion,
    ReplaySet,
)
from a2a_core.services.policy import policy_publish
from a2a_core.services.replay import replay_caller, replay_set_create
from a2a_core.services.users import ROLES
from dashboard import urls
from tests.factories import held_escalation, record_message, register

pytestmark = pytest.mark.django_db

# Pages (GET): name -> the role needed.
PAGES: dict[str, str] = {
    "overview": "viewer",
    "traffic": "viewer",
    "agents": "viewer",
    "agent": "viewer",
    "tasks": "viewer",
    "task": "viewer",
    "conversation": "viewer",
    "trace": "viewer",
    "traces": "viewer",
    "span": "viewer",
    "replays": "viewer",
    "replay": "viewer",
    "replay_export": "viewer",
    "replay_new": "operator",
    "task_trace": "viewer",
    "context_trace": "viewer",
    "audit": "viewer",
    "audit_export": "viewer",
    "audit_training": "viewer",
    "message": "viewer",
    "escalations": "viewer",
    "escalation": "viewer",
    "notify": "admin",
    "policy": "viewer",
    "policy_version": "viewer",
    "issuers": "admin",
}
# Actions (POST): name -> the role needed, the form data.
ACTIONS: dict[str, tuple[str, dict[str, str]]] = {
    "agent_suspend": ("admin", {"reason": "test"}),
    "agent_resume": ("admin", {}),
    "agent_token": ("admin", {}),
    "agent_credentials": ("admin", {"secret": "x"}),
    "agent_credentials_clear": ("admin", {}),
    "escalation_answer": ("operator", {"text": "yes"}),
    "escalation_approve": ("operator", {}),
    "escalation_redirect": ("operator", {"to": "gamma"}),
    "escalation_reject": ("operator", {"reason": "no"}),
    "escalation_claim": ("operator", {}),
    "escalation_release": ("operator", {}),
    "escalation_bulk": ("operator", {"ids": "1", "action": "approve"}),
    "notify_add": ("admin", {"kind": "email", "address": "ops@example.com"}),
    "notify_remove": ("admin", {}),
    "notify_test": ("admin", {}),
    "notify_change": ("admin", {"digest": "30"}),
    "policy_draft": ("admin", {}),
    "policy_save": ("admin", {"reason": "test"}),
    "policy_dry_run": ("admin", {}),
    "policy_rollback": ("admin", {"reason": "test"}),
    "issuer_add": ("admin", {"issuer": "https://idp/", "agent": "alpha", "value": "x"}),
    "issuer_remove": ("admin", {"issuer": "https://idp/"}),
    "replay_create": ("operator", {"to": ""}),
    "replay_rerun": ("operator", {}),
}

# Addresses with checks of their own instead of a role: an email's action link works for the
# user it was sent to, after login; Slack's callback needs Slack's signature and a mapped user
# (tests/a2a_core/notify/test_approve_where_told.py).
OWN_CHECKS = {"notify_act", "notify_slack"}


@pytest.fixture
def world() -> dict[str, Any]:
    """One of everything an address can name."""
    escalation = held_escalation(caller="alpha", target="beta")
    register("gamma")
    message = record_message(escalation.agent, escalation.task.target, task=escalation.task)
    policy_publish(document={"limits": {"perMinute": 60}}, reason="v1", actor_label="test")
    policy_publish(document={"limits": {"perMinute": 30}}, reason="v2", actor_label="test")
    replay_set = replay_set_create(task_ids=[escalation.task_id], caller=replay_caller())
    return {
        "set_id": replay_set.pk,
        "slug": "alpha",
        "task_id": escalation.task_id,
        "context_id": escalation.task.context_id,
        "trace_id": escalation.task.trace_id,
        "pk": escalation.pk,
        "message_pk": message.pk,
        "target_pk": NotificationTarget.objects.create(kind="email", address="ops@example.com").pk,
        "number": 1,
    }


def url(name: str, world: dict[str, Any]) -> str:
    pattern = next(p for p in urls.urlpatterns if isinstance(p, URLPattern) and p.name == name)
    wanted = pattern.pattern.regex.groupindex
    special = {
        "message": "message_pk",
        "notify_remove": "target_pk",
        "notify_test": "target_pk",
        "notify_change": "target_pk",
    }
    kwargs = {key: world[special.get(name, key)] for key in wanted}
    return reverse(f"dashboard:{name}", kwargs=kwargs)


def below(role: str) -> list[str]:
    return list(ROLES[: ROLES.index(role)])


def test_every_address_has_a_row_in_the_table():
    names = {p.name for p in urls.urlpatterns if isinstance(p, URLPattern)}
    assert names == set(PAGES) | set(ACTIONS) | OWN_CHECKS


def test_an_email_link_needs_a_login_and_slacks_callback_a_signature(world, as_role):
    link = reverse("dashboard:notify_act", args=["a-token"])
    anonymous = Client().get(link)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/login/")
    assert as_role("admin").get(link).status_code == 400  # not a link the hub sent
    before = state()
    slack = reverse("dashboard:notify_slack")
    body = {"payload": '{"type": "block_actions"}'}
    assert Client().post(slack, body).status_code == 401
    assert as_role("admin").post(slack, body).status_code == 401
    assert state() == before


def state() -> tuple[Any, ...]:
    """What any action would change."""
    return (
        list(Escalation.objects.values_list("pk", "status", "claimed_by_name")),
        PolicyVersion.objects.count(),
        AuditEvent.objects.exclude(action__startswith="audit.export").count(),
        list(Agent.objects.values_list("slug", "status", "token_hash", "credential_sealed")),
        NotificationTarget.objects.count(),
        Notification.objects.count(),
        list(ReplaySet.objects.values_list("pk", "runs", "status")),
    )


@pytest.mark.parametrize("name", sorted(PAGES))
def test_pages_need_a_login_and_a_role(name, world, as_role, django_user_model):
    address = url(name, world)
    anonymous = Client().get(address)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/login/")
    nobody = Client()
    nobody.force_login(django_user_model.objects.create_user("nobody", password="x" * 20))
    assert nobody.get(address).status_code == 403
    assert as_role(PAGES[name]).get(address).status_code == 200


@pytest.mark.parametrize("name", sorted(ACTIONS))
def test_actions_refuse_lower_roles_and_change_nothing(name, world, as_role):
    role, data = ACTIONS[name]
    address = url(name, world)
    before = state()
    anonymous = Client().post(address, data)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/login/")
    for lower in below(role):
        client = as_role(lower)
        client.get(reverse("dashboard:overview"))  # a page, for its CSRF cookie
        token = client.cookies["csrftoken"].value
        refused = client.post(address, data, HTTP_X_CSRFTOKEN=token)
        assert refused.status_code == 403, (lower, refused.status_code)
        # The same, the way htmx sends it: the refusal is a fragment saying why.
        htmx = client.post(address, data, HTTP_X_CSRFTOKEN=token, HTTP_HX_REQUEST="true")
        assert htmx.status_code == 403
        assert role in htmx.content.decode()
    assert state() == before


@pytest.mark.parametrize("name", sorted(ACTIONS))
def test_actions_refuse_a_post_without_the_csrf_token_even_from_an_admin(name, world, as_role):
    _, data = ACTIONS[name]
    before = state()
    response = as_role("admin").post(url(name, world), data)
    assert response.status_code == 403
    assert state() == before


@pytest.mark.parametrize("name", sorted(ACTIONS))
def test_actions_do_not_answer_a_get(name, world, as_role):
    assert as_role("admin").get(url(name, world)).status_code == 405
