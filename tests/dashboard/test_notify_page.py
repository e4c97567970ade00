"""The targets page: admins add and remove who is told about escalations."""

from __future__ import annotations

import pytest

from a2a_core.models import AuditEvent, NotificationTarget

pytestmark = pytest.mark.django_db


def post(client, url: str, data: dict[str, str]) -> str:
    client.get("/escalations/notify/")
    return client.post(
        url, data, HTTP_X_CSRFTOKEN=client.cookies["csrftoken"].value
    ).content.decode()


def test_an_admin_adds_a_signed_json_webhook_and_sees_its_secret_once(as_role):
    admin = as_role("admin")
    html = post(
        admin,
        "/escalations/notify/add/",
        {"kind": "webhook", "address": "https://hooks.example.com/abc/def", "format": "json"},
    )
    target = NotificationTarget.objects.get()
    assert target.format == "json" and len(target.secret) > 30
    assert target.secret in html and "Signing secret" in html
    assert target.secret not in admin.get("/escalations/notify/").content.decode()
    assert AuditEvent.objects.filter(action="notify.add", actor_label="admin").exists()


def test_a_bad_address_is_refused_beside_the_form(as_role):
    html = post(
        as_role("admin"), "/escalations/notify/add/", {"kind": "email", "address": "not-mail"}
    )
    assert "address: give an email address" in html
    assert not NotificationTarget.objects.exists()


def test_removing_a_target_stops_telling_it(as_role):
    target = NotificationTarget.objects.create(kind="email", address="ops@example.com")
    html = post(as_role("admin"), f"/escalations/notify/{target.pk}/remove/", {})
    assert "Removed ops@example.com." in html
    assert not NotificationTarget.objects.exists()


def test_operators_may_not_see_the_targets(as_role):
    assert as_role("operator").get("/escalations/notify/").status_code == 403


def test_a_webhook_at_another_spelling_of_loopback_is_refused_beside_the_form(as_role, settings):
    settings.HUB_NOTIFY_ALLOWED_HOSTS = []
    html = post(
        as_role("admin"),
        "/escalations/notify/add/",
        {"kind": "webhook", "address": "http://0x7f000001:8080/hook", "format": "slack"},
    )
    assert "webhook address refused" in html
    assert (
        "address: 0x7f000001 resolves to 127.0.0.1, which is a loopback address; the hub only "
        "POSTs to public addresses (an operator can allow it with HUB_NOTIFY_ALLOWED_HOSTS)"
    ) in html
    assert not NotificationTarget.objects.exists()


def test_an_admin_routes_a_target_and_sets_its_digest_and_pass_on_from_its_form(as_role):
    email = NotificationTarget.objects.create(kind="email", address="oncall@example.com")
    admin = as_role("admin")
    html = post(
        admin,
        "/escalations/notify/add/",
        {
            "kind": "webhook",
            "address": "https://hooks.example.com/abc/def",
            "format": "slack",
            "pairs": "lead:reviewer, lead:ops",
            "priorities": "high,urgent",
            "digest": "120",
            "pass_to": str(email.pk),
            "pass_after": "15",
        },
    )
    hook = NotificationTarget.objects.get(kind="webhook")
    assert hook.rules == {"pairs": ["lead:reviewer", "lead:ops"], "priorities": ["high", "urgent"]}
    assert (hook.digest_seconds, hook.pass_to_id, hook.pass_after_seconds) == (120, email.pk, 900)
    assert (
        "digest every 120s, about pairs lead:reviewer, lead:ops; priorities high, urgent, "
        f"unanswered after 15 min: passed to {email.pk}"
    ) in html

    html = post(
        admin,
        f"/escalations/notify/{hook.pk}/",
        {"digest": "", "kinds": "approval", "pass_to": "", "pass_after": ""},
    )
    hook.refresh_from_db()
    assert (hook.rules, hook.digest_seconds, hook.pass_to_id) == (
        {"kinds": ["approval"]},
        None,
        None,
    )
    assert "Saved how https://hooks.example.com/…/def is told." in html
    assert AuditEvent.objects.filter(action="notify.change", actor_label="admin").exists()


def test_a_bad_routing_rule_is_refused_beside_the_targets_form(as_role):
    target = NotificationTarget.objects.create(kind="email", address="ops@example.com")
    html = post(
        as_role("admin"),
        f"/escalations/notify/{target.pk}/",
        {"pairs": "lead", "priorities": "soon", "user": "nobody"},
    )
    assert "pairs: &#x27;lead&#x27; is not caller:target" in html
    assert "priorities: &#x27;soon&#x27; is not one of low, normal, high, urgent" in html
    target.refresh_from_db()
    assert target.rules == {}
