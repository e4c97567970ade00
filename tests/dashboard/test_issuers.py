"""The identity providers page: an admin trusts an issuer for an agent, and removes it."""

from __future__ import annotations

import pytest
from django.urls import reverse

from a2a_core.models import AuditEvent, IssuerMapping, TrustedIssuer
from tests.factories import register

pytestmark = pytest.mark.django_db

FORM = {
    "issuer": "https://login.example.com/",
    "jwks_url": "https://login.example.com/jwks.json",
    "audience": "a2a-hub",
    "claim": "sub",
    "value": "robot-client",
    "agent": "robot",
}


@pytest.fixture
def admin(as_role):
    client = as_role("admin")
    client.get(reverse("dashboard:issuers"))  # for the CSRF cookie
    client.defaults["HTTP_X_CSRFTOKEN"] = client.cookies["csrftoken"].value
    return client


def test_an_admin_trusts_an_issuer_and_removes_it(admin):
    register("robot")
    added = admin.post(reverse("dashboard:issuer_add"), FORM, follow=True)
    page = added.content.decode()
    assert "robot signs in with https://login.example.com/ tokens." in page
    assert "sub=robot-client" in page
    assert IssuerMapping.objects.get().agent.slug == "robot"
    assert AuditEvent.objects.filter(action="issuer.trust", actor__username="admin").exists()

    removed = admin.post(
        reverse("dashboard:issuer_remove"), {"issuer": FORM["issuer"]}, follow=True
    )
    assert "https://login.example.com/ is no longer trusted." in removed.content.decode()
    assert not TrustedIssuer.objects.exists()


def test_a_bad_form_is_shown_again_saying_what_is_wrong(admin):
    register("robot")
    response = admin.post(reverse("dashboard:issuer_add"), {**FORM, "jwks_url": "ftp://x/"})
    assert response.status_code == 400
    assert (
        "jwksUrl: the JWKS URL &#x27;ftp://x/&#x27; is not an http(s) URL"
        in response.content.decode()
    )
    assert not TrustedIssuer.objects.exists()


def test_only_admins_see_the_link(as_role):
    link = reverse("dashboard:issuers")
    assert link in as_role("admin").get(reverse("dashboard:overview")).content.decode()
    assert link not in as_role("operator").get(reverse("dashboard:overview")).content.decode()
