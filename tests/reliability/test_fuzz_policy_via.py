"""Junk in a matrix rule's `via` (a delegation grant): through the policy document and through
the policy editor, every value is either a valid grant or refused with the problem under its
field; nothing invalid is stored, and nothing answers 5xx."""

from __future__ import annotations

import random

import pytest
from django.test import Client

from a2a_core.errors import ValidationFailed
from a2a_core.models import PolicyVersion
from a2a_core.schemas.policy import parse_policy
from a2a_core.services.users import user_create
from dashboard.policy_form import words
from tests.dashboard.test_policy import editor, publish
from tests.factories import register
from tests.reliability.junk import junk_value, surrogate

SEED = 4303
HOSTILE = [
    None,
    "",
    "*",
    "../etc",
    "beta\x00",
    "BETA",
    "x" * 65,
    "x" * 100_000,
    ["beta"] * 21,
    [["beta"]],
    {"agent": "beta"},
    12,
    True,
    "hub-b/beta",
    "béta",
]


def test_junk_via_values_are_valid_grants_or_refused_naming_the_field():
    rng = random.Random(SEED)
    values = [*HOSTILE, *(junk_value(rng) for _ in range(2000)), surrogate(rng)]
    for value in values:
        rule = {"caller": "alpha", "target": "gamma", "via": value, "action": "allow"}
        try:
            policy = parse_policy({"matrix": [rule]})
        except ValidationFailed as exc:
            assert exc.problems, value
            assert all(p.field.startswith("matrix.0.via") for p in exc.problems), (value, exc)
            continue
        # Accepted: a list of agent ids (or `*`), stored as it reads back.
        [stored] = policy.as_document()["matrix"]
        assert parse_policy({"matrix": [stored]}) == policy
        assert all(
            isinstance(agent, str) and 0 < len(agent) <= 64 for agent in stored.get("via", [])
        )


@pytest.mark.django_db
def test_junk_via_in_the_editor_is_shown_inline_and_nothing_is_saved():
    for slug in ("alpha", "gamma"):
        register(slug)
    publish({})
    admin = Client(enforce_csrf_checks=True)
    admin.force_login(user_create(username="admin", password="a-long-pass-2026", role="admin"))
    rng = random.Random(SEED)
    typed = ["x" * 5000, "beta\x00", "<script>alert(1)</script>", "../../", "a,b,,c", "🙂"]
    # A form post is UTF-8: a lone surrogate cannot be typed into one (the document test
    # above has them).
    typed += [
        text.encode("utf-8", "replace").decode()
        for text in (str(junk_value(rng))[:3000] for _ in range(30))
    ]
    # Junk that happens to name only registered agents (or none) would be a valid rule.
    typed = [v for v in typed if not set(words(v)) <= {"alpha", "gamma", "*"}]
    for value in typed:
        form, token = editor(admin)
        form.update(
            {
                "rule-0-caller": ["alpha"],
                "rule-0-target": ["gamma"],
                "rule-0-action": ["allow"],
                "rule-0-via": [value],
                "reason": ["junk"],
            }
        )
        response = admin.post("/policy/save/", form, HTTP_X_CSRFTOKEN=token, HTTP_HX_REQUEST="true")
        assert response.status_code == 200, value
        html = response.content.decode()
        assert "nothing was saved" in html, value
        assert "<script>alert(1)</script>" not in html
    assert PolicyVersion.objects.count() == 1
