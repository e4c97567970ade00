"""Agents: who is registered, what each is doing; an agent's card, tasks and traffic."""

from __future__ import annotations

import json

from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.views.decorators.http import require_POST

from a2a_core.errors import ValidationFailed
from a2a_core.models import Agent, DeliveryMode
from a2a_core.schemas.credentials import declared_schemes, scheme_kind
from a2a_core.selectors import effective_status
from a2a_core.selectors.agent_board import agent_board, last_sent, seen_by_traffic
from a2a_core.selectors.task_views import task_recent
from a2a_core.selectors.traffic import TrafficFilter, traffic_recent
from a2a_core.services import agents as agent_services
from a2a_core.services import credentials as credential_services
from dashboard.http import HtmxHttpRequest, actor
from dashboard.roles import admin_required, has_role, viewer_required


@viewer_required
def agent_list(request: HtmxHttpRequest) -> HttpResponse:
    return TemplateResponse(
        request, "dashboard/agents.html", {"rows": agent_board(), "live_page": "agents"}
    )


def _detail_context(request: HtmxHttpRequest, agent: Agent) -> dict[str, object]:
    tasks = task_recent(agent_id=agent.pk, limit=50)
    busy = any(t.target_id == agent.pk and t.state in ("submitted", "working") for t in tasks)
    return {
        "agent": agent,
        "status": effective_status(agent, busy=busy),
        "card_json": json.dumps(agent.card, indent=2, sort_keys=True),
        "skills": list(agent.skills.all()),
        "tasks": tasks,
        "messages": traffic_recent(filters=TrafficFilter(agent=agent.slug), limit=50),
        "can_manage": has_role(request.user, "admin"),
        # What the card declares, for the credential form (never the credential itself).
        "schemes": [
            (name, scheme_kind(body)) for name, body in declared_schemes(agent.card).items()
        ]
        if agent.delivery_mode == DeliveryMode.ENDPOINT
        else [],
        "live_page": "agent",
        "live_query": f"agent={agent.slug}",
    }


@viewer_required
def agent_detail(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    agent = get_object_or_404(Agent.objects.annotate(last_sent=last_sent()), slug=slug)
    seen_by_traffic(agent)
    return TemplateResponse(request, "dashboard/agent.html", _detail_context(request, agent))


def _manage(request: HtmxHttpRequest, agent: Agent, **extra: object) -> HttpResponse:
    """The agent's management panel, re-rendered after an action."""
    agent.refresh_from_db()
    context = {**_detail_context(request, agent), **extra}
    return TemplateResponse(request, "dashboard/agent.html#manage", context)


@require_POST
@admin_required
def agent_suspend(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    agent = get_object_or_404(Agent, slug=slug)
    reason = request.POST.get("reason", "").strip()[:500]
    agent_services.agent_suspend(agent=agent, reason=reason, actor=actor(request))
    return _manage(request, agent, notice=f"{agent.slug} is suspended.")


@require_POST
@admin_required
def agent_resume(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    agent = get_object_or_404(Agent, slug=slug)
    agent_services.agent_resume(agent=agent, actor=actor(request))
    return _manage(request, agent, notice=f"{agent.slug} is resumed.")


@require_POST
@admin_required
def agent_token(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    agent = get_object_or_404(Agent, slug=slug)
    token = agent_services.agent_token_rotate(agent=agent, actor=actor(request))
    return _manage(request, agent, new_token=token)


MAX_FIELD = 8192


@require_POST
@admin_required
def agent_credentials(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    """Set the credential the hub calls the agent with. The secret is never rendered back,
    also not when the form is refused."""
    agent = get_object_or_404(Agent, slug=slug)
    form = request.POST
    try:
        credential_services.agent_credentials_set(
            agent=agent,
            scheme=form.get("scheme", "")[:MAX_FIELD] or None,
            secret=form.get("secret", "")[: MAX_FIELD + 1],
            client_id=form.get("client_id", "").strip()[:MAX_FIELD],
            token_url=form.get("token_url", "").strip()[:MAX_FIELD],
            scopes=form.get("scopes", "")[:MAX_FIELD].split(),
            actor=actor(request),
        )
    except ValidationFailed as exc:
        return _manage(request, agent, credential_error=str(exc))
    return _manage(request, agent, notice=f"The credential {agent.slug} is called with is set.")


@require_POST
@admin_required
def agent_credentials_clear(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    agent = get_object_or_404(Agent, slug=slug)
    credential_services.agent_credentials_clear(agent=agent, actor=actor(request))
    return _manage(request, agent, notice=f"{agent.slug} is called without a credential now.")
