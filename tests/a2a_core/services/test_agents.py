"""The registry: registration is idempotent and versioned, tokens are hashed and rotate."""

from __future__ import annotations

import pytest

from a2a_core import selectors
from a2a_core.errors import Conflict, ValidationFailed
from a2a_core.models import Agent, AgentCardVersion, AgentStatus, AuditEvent, SkillTag
from a2a_core.services.agents import (
    agent_register,
    agent_resume,
    agent_suspend,
    agent_token_rotate,
)
from a2a_core.tokens import token_hash
from tests.factories import make_card, make_inbox_card

pytestmark = pytest.mark.django_db


def test_register_creates_agent_skills_and_a_token_shown_once():
    result = agent_register(
        card=make_card(
            "Baron Spec",
            skills=[
                {"id": "specify", "name": "Spec", "description": "d", "tags": ["Planning", "pm"]},
            ],
        )
    )
    agent = result.agent
    assert result.created and result.token and result.token.startswith("a2ah_")
    assert agent.slug == "baron-spec"
    assert agent.delivery_mode == "endpoint"
    assert agent.endpoint_url == "http://127.0.0.1:9/"
    assert agent.status == AgentStatus.ONLINE
    assert agent.token_hash == token_hash(result.token)
    assert result.token not in str(Agent.objects.filter(pk=agent.pk).values().get())
    assert sorted(SkillTag.objects.filter(agent=agent).values_list("tag", flat=True)) == [
        "planning",
        "pm",
    ]
    assert AuditEvent.objects.filter(action="agent.register", agent=agent).exists()


def test_registering_the_same_card_again_changes_nothing_and_issues_no_token():
    card = make_card("baron")
    first = agent_register(card=card)
    again = agent_register(card=dict(card))
    assert again.agent.pk == first.agent.pk
    assert (again.created, again.changed, again.token) == (False, False, None)
    assert Agent.objects.get(pk=first.agent.pk).token_hash == token_hash(first.token)
    assert AgentCardVersion.objects.filter(agent=first.agent).count() == 1


def test_reregistering_with_a_new_version_updates_the_card_and_keeps_history():
    agent_register(card=make_card("baron", version="1.0.0"))
    newer = make_card(
        "baron",
        version="1.1.0",
        skills=[
            {"id": "plan", "name": "Plan", "description": "d", "tags": ["planning"]},
        ],
    )
    result = agent_register(card=newer)
    assert result.changed and not result.created and result.token is None
    assert result.agent.card_version == "1.1.0"
    assert list(result.agent.skills.values_list("skill_id", flat=True)) == ["plan"]
    assert list(
        AgentCardVersion.objects.filter(agent=result.agent).values_list("version", flat=True)
    ) == ["1.0.0", "1.1.0"]


def test_changed_card_with_an_already_registered_version_is_refused():
    agent_register(card=make_card("baron", version="1.0.0"))
    changed = make_card("baron", version="1.0.0")
    changed["description"] = "something else"
    with pytest.raises(Conflict, match="bump the card's `version`"):
        agent_register(card=changed)
    assert Agent.objects.get(slug="baron").description == "baron does things"


def test_invalid_card_is_refused_and_nothing_is_stored():
    card = make_card("baron")
    del card["skills"]
    with pytest.raises(ValidationFailed) as exc:
        agent_register(card=card)
    assert [p.field for p in exc.value.problems] == ["skills"]
    assert not Agent.objects.exists()


def test_card_without_interfaces_registers_as_an_inbox_agent():
    result = agent_register(card=make_inbox_card("scribe"))
    assert result.agent.delivery_mode == "inbox"
    assert result.agent.status == AgentStatus.OFFLINE
    assert result.agent.endpoint_url == ""


def test_bad_slug_and_bad_scopes_are_refused_with_reasons():
    with pytest.raises(ValidationFailed, match="slug"):
        agent_register(card=make_card("baron"), slug="Not A Slug")
    with pytest.raises(ValidationFailed, match="unknown scope"):
        agent_register(card=make_card("baron"), scopes=["a2a:everything"])


def test_suspend_and_resume_are_idempotent_and_audited():
    agent = agent_register(card=make_card("baron")).agent
    assert agent_suspend(agent=agent, reason="looping") is True
    assert agent_suspend(agent=agent) is False
    agent.refresh_from_db()
    assert (agent.status, agent.status_reason) == (AgentStatus.SUSPENDED, "looping")
    assert agent_resume(agent=agent) is True
    assert agent_resume(agent=agent) is False
    agent.refresh_from_db()
    assert agent.status == AgentStatus.ONLINE
    assert list(
        AuditEvent.objects.filter(agent=agent).order_by("id").values_list("action", flat=True)
    ) == [
        "agent.register",
        "agent.suspend",
        "agent.resume",
    ]


def test_reregistering_keeps_a_suspension():
    agent = agent_register(card=make_card("baron", version="1")).agent
    agent_suspend(agent=agent)
    agent_register(card=make_card("baron", version="2"))
    agent.refresh_from_db()
    assert agent.status == AgentStatus.SUSPENDED


def test_rotating_a_token_invalidates_the_old_one_immediately():
    result = agent_register(card=make_card("baron"))
    new = agent_token_rotate(agent=result.agent)
    assert new != result.token
    assert selectors.agent_by_token(token=result.token) is None
    assert selectors.agent_by_token(token=new).slug == "baron"
    assert selectors.agent_by_token(token="") is None
