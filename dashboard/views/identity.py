"""Trusted identity providers (admins only): whose JWTs agents may sign in with."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.views.decorators.http import require_POST

from a2a_core.errors import HubError
from a2a_core.models import Agent
from a2a_core.services import identity
from dashboard.http import HtmxHttpRequest, actor
from dashboard.roles import admin_required

FIELDS = ("issuer", "jwks_url", "audience", "agent", "claim", "value")


def _page(request: HtmxHttpRequest, *, form: dict[str, str], error: str = "") -> HttpResponse:
    context = {
        "issuers": identity.issuer_list(),
        "agents": Agent.objects.values_list("slug", flat=True),
        "form": form,
        "error": error,
    }
    return TemplateResponse(
        request, "dashboard/issuers.html", context, status=400 if error else 200
    )


@admin_required
def issuer_list(request: HtmxHttpRequest) -> HttpResponse:
    return _page(request, form={"claim": "sub"})


@require_POST
@admin_required
def issuer_add(request: HtmxHttpRequest) -> HttpResponse:
    form = {name: request.POST.get(name, "").strip() for name in FIELDS}
    agent = Agent.objects.filter(slug=form["agent"]).first()
    if agent is None:
        return _page(request, form=form, error=f"no agent {form['agent']!r} is registered")
    try:
        identity.issuer_trust(
            issuer=form["issuer"],
            jwks_url=form["jwks_url"],
            audience=form["audience"],
            agent=agent,
            claim=form["claim"] or "sub",
            value=form["value"],
            actor=actor(request),
        )
    except HubError as exc:
        problems = getattr(exc, "problems", [])
        return _page(request, form=form, error="; ".join(map(str, problems)) or exc.message)
    messages.success(request, f"{agent.slug} signs in with {form['issuer']} tokens.")
    return redirect("dashboard:issuers")


@require_POST
@admin_required
def issuer_remove(request: HtmxHttpRequest) -> HttpResponse:
    issuer = request.POST.get("issuer", "")
    slug = request.POST.get("agent", "")
    agent = Agent.objects.filter(slug=slug).first() if slug else None
    try:
        identity.issuer_remove(issuer=issuer, agent=agent, actor=actor(request))
    except HubError as exc:
        return _page(request, form={"claim": "sub"}, error=exc.message)
    messages.success(request, f"{issuer} is no longer trusted" + (f" for {slug}." if slug else "."))
    return redirect("dashboard:issuers")
