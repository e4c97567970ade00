"""`manage.py a2a issuer`: trusting identity providers from a terminal."""

from __future__ import annotations

import json

import pytest
from django.core.management.base import CommandError

from a2a_core.models import AuditEvent, IssuerMapping, TrustedIssuer
from tests.a2a_core.cli.helpers import a2a
from tests.factories import register

pytestmark = pytest.mark.django_db

IDP = "https://login.example.com/"
JWKS = "https://login.example.com/.well-known/jwks.json"


def trust(*extra: str) -> str:
    return a2a("issuer", "add", IDP, "--jwks-url", JWKS, "--audience", "a2a-hub", *extra)


def test_add_list_and_remove_an_issuer():
    register("robot")
    register("scribe")
    assert "robot signs in with" in trust("--agent", "robot", "--subject", "robot-client")
    trust("--agent", "scribe", "--claim", "azp=scribe-app")

    lines = a2a("issuer", "list").splitlines()
    assert lines[0].split() == ["ISSUER", "AUDIENCE", "CLAIM", "AGENT", "JWKS"]
    assert [line.split()[2:4] for line in lines[2:]] == [
        ["azp=scribe-app", "scribe"],
        ["sub=robot-client", "robot"],
    ]
    [document] = [json.loads(line) for line in a2a("issuer", "list", "--json").splitlines()]
    assert document["jwksUrl"] == JWKS and len(document["agents"]) == 2

    assert "scribe no longer signs in" in a2a("issuer", "remove", IDP, "--agent", "scribe")
    assert list(IssuerMapping.objects.values_list("agent__slug", flat=True)) == ["robot"]
    assert "is no longer trusted (1 mapping(s) removed)" in a2a("issuer", "remove", IDP)
    assert not TrustedIssuer.objects.exists()
    assert AuditEvent.objects.filter(action__startswith="issuer.", actor_label="cli").count() == 4


def test_a_subject_already_mapped_to_another_agent_is_refused():
    register("robot")
    register("scribe")
    trust("--agent", "robot", "--subject", "robot-client")
    with pytest.raises(CommandError, match="already signs in as robot"):
        trust("--agent", "scribe", "--subject", "robot-client")


def test_a_jwks_url_that_is_not_http_is_refused():
    register("robot")
    with pytest.raises(CommandError, match="is not an http"):
        a2a(
            "issuer", "add", IDP, "--jwks-url", "file:///etc/passwd", "--audience", "x",
            "--agent", "robot", "--subject", "s",
        )  # fmt: skip


def test_removing_an_issuer_not_trusted_says_so():
    with pytest.raises(CommandError, match="is not a trusted issuer"):
        a2a("issuer", "remove", IDP)
