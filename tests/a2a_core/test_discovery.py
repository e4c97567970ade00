"""Discovery: find agents by skill id, tag, status and free text."""

from __future__ import annotations

import pytest

from a2a_core.errors import ValidationFailed
from a2a_core.models import TaskState
from a2a_core.selectors import agent_discover
from a2a_core.services.agents import agent_suspend
from tests.factories import make_task, register

pytestmark = pytest.mark.django_db


@pytest.fixture
def squad():
    baron = register(
        "baron",
        skills=[
            {
                "id": "specify",
                "name": "Create Specification",
                "description": "feature specs",
                "tags": ["planning", "pm"],
            },
        ],
    ).agent
    duc = register(
        "duc",
        skills=[
            {
                "id": "architecture_review",
                "name": "Architecture Review",
                "description": "scalability",
                "tags": ["architecture", "review"],
            },
            {"id": "api_design", "name": "API Design", "description": "OpenAPI", "tags": ["api"]},
        ],
    ).agent
    marie = register(
        "marie",
        skills=[
            {
                "id": "test_strategy",
                "name": "Test Strategy",
                "description": "test plans",
                "tags": ["testing", "review"],
            },
        ],
    ).agent
    scribe = register(
        "scribe",
        inbox=True,
        skills=[
            {
                "id": "minutes",
                "name": "Minutes",
                "description": "writes things down",
                "tags": ["docs"],
            },
        ],
    ).agent
    return {"baron": baron, "duc": duc, "marie": marie, "scribe": scribe}


def slugs(page):
    return [a["slug"] for a in page.agents]


def test_by_skill_id(squad):
    assert slugs(agent_discover(skill="api_design")) == ["duc"]
    assert slugs(agent_discover(skill="nobody_has_this")) == []


def test_by_tag_is_case_insensitive(squad):
    assert slugs(agent_discover(tag="review")) == ["duc", "marie"]
    assert slugs(agent_discover(tag="REVIEW")) == ["duc", "marie"]


def test_by_status_including_derived_busy_and_idle(squad):
    make_task(target=squad["duc"], caller=squad["baron"], state=TaskState.WORKING)
    agent_suspend(agent=squad["marie"])
    assert slugs(agent_discover(status="busy")) == ["duc"]
    assert slugs(agent_discover(status="idle")) == ["baron"]
    assert slugs(agent_discover(status="suspended")) == ["marie"]
    assert slugs(agent_discover(status="offline")) == ["scribe"]


def test_by_free_text_over_names_descriptions_and_skills(squad):
    assert slugs(agent_discover(q="openapi")) == ["duc"]
    assert slugs(agent_discover(q="Specification")) == ["baron"]
    assert slugs(agent_discover(q="docs")) == ["scribe"]


def test_filters_combine(squad):
    assert slugs(agent_discover(tag="review", q="test")) == ["marie"]


def test_pages_with_a_cursor(squad):
    first = agent_discover(limit=2)
    assert slugs(first) == ["baron", "duc"]
    second = agent_discover(limit=2, cursor=first.next_cursor)
    assert slugs(second) == ["marie", "scribe"]
    assert second.next_cursor == ""


def test_bad_status_and_limit_are_refused():
    with pytest.raises(ValidationFailed) as exc:
        agent_discover(status="sleepy", limit=0)
    assert {p.field for p in exc.value.problems} == {"status", "limit"}


def test_summary_shows_what_a_peer_needs(squad):
    page = agent_discover(skill="api_design")
    summary = page.agents[0]
    assert summary["slug"] == "duc"
    assert summary["status"] == "idle"
    assert [s["id"] for s in summary["skills"]] == ["api_design", "architecture_review"]
