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
