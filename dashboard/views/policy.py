"""The policy editor: the matrix as a grid, limits, rules, the kill switch; history, rollback,
and a dry-run of the draft against recorded traffic. Everyone with a role may look; only
admins change anything."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.views.decorators.http import require_POST
from django_htmx.http import HttpResponseClientRedirect

from a2a_core.errors import Conflict, NotFound, ValidationFailed
from a2a_core.models import PolicyVersion
from a2a_core.policy.wording import policy_changes
from a2a_core.schemas.policy import ANY, default_policy, parse_policy
from a2a_core.selectors import policy_dry_run as dry_run
from a2a_core.selectors.policy import (
    AgentRef,
    policy_agents,
    policy_named_agents,
    policy_version_count,
    policy_version_get,
    policy_versions,
    policy_versions_changes,
)
from a2a_core.selectors.policy_dry_run import DryRun
from a2a_core.services import policy as policy_services
from dashboard.http import HtmxHttpRequest, actor
from dashboard.policy_draft import PolicyDraft
from dashboard.policy_form import (
    ACTION_LABELS,
    CONTENT_ACTIONS,
    DETECTORS,
    DIRECTIONS,
    LIMITS,
    PRIORITIES,
    UNAVAILABLE,
)
from dashboard.roles import admin_required, has_role, viewer_required

# The grid shows this many agents (and `*`); rules for others are kept and listed below it.
GRID_AGENTS = 40
# Versions listed on the page, newest first; any version has its own page.
HISTORY = 30


@dataclass(frozen=True)
class VersionRow:
    version: PolicyVersion
    author: str
    # What it changed from the version before it, one line each, in words.
    changes: list[str]


def _version_rows(versions: list[PolicyVersion]) -> list[VersionRow]:
    changes = policy_versions_changes(versions)
    return [
        VersionRow(
            v,
            (v.author.get_username() if v.author else v.author_label) or "—",
            changes[v.number],
        )
        for v in versions
    ]


def draft_changes(draft: PolicyDraft, active: PolicyVersion | None) -> list[str] | None:
    """What saving the draft would change, in words; None for a draft that is not a valid
    policy (it has changed, but only its problems can be shown)."""
    before = active.document if active is not None else default_policy().as_document()
    try:
        after = parse_policy(draft.document()).as_document()
    except (ValidationFailed, ValueError, TypeError):
        return None
    return policy_changes(before, after)


def _report(report: DryRun) -> dict[str, Any]:
    def split(decision: str) -> tuple[str, str]:
        # "deliver (ok)" -> ("deliver", "ok")
        action, _, reason = decision.partition(" (")
        return action, reason.rstrip(")")

    return {
        "messages": report.messages,
        "changed": report.changed,
        "transitions": [
            (*text.split(" -> ", 1), count)
            for text, count in sorted(report.transitions.items(), key=lambda kv: -kv[1])
        ],
        "reasons": sorted(report.reasons.items(), key=lambda kv: -kv[1]),
        "pairs": sorted(report.pairs.items(), key=lambda kv: -kv[1]),
        "examples": [
            {
                **example,
                "when": datetime.fromisoformat(example["at"]),
                "was": split(example["before"]),
                "would_be": split(example["after"]),
            }
            for example in report.examples
        ],
        "notes": report.notes,
        "content": [
            (rule, counts.get("hold", 0), counts.get("redact", 0), counts.get("reject", 0))
            for rule, counts in report.content.items()
        ],
    }


def _known_agents(active: PolicyVersion | None) -> set[str]:
    """Slugs a rule may name: registered agents, and any the active policy names already."""
    named = policy_named_agents(active.document) if active is not None else set()
    return {ref.slug for ref in policy_agents(also=named)}


def _editor(request: HtmxHttpRequest, draft: PolicyDraft, **extra: Any) -> dict[str, Any]:
    active = policy_services.policy_active_version()
    agents = policy_agents(also=draft.named_agents())
    shown = agents[:GRID_AGENTS]
    slugs = [ref.slug for ref in shown]
    columns = [AgentRef(ANY, "any agent"), *shown]
    return {
        "draft": draft,
        "columns": columns,
        "rows": [(ref, cells) for ref, (_, cells) in zip(columns, draft.grid(slugs), strict=True)],
        "more_agents": len(agents) - len(shown),
        "hidden_cells": draft.hidden_cells(set(slugs)),
        "active": active,
        "routing_on": active is None or active.document.get("routingEnabled", True),
        "can_edit": has_role(request.user, "admin"),
        "action_labels": ACTION_LABELS,
        "priorities": PRIORITIES,
        "unavailable": UNAVAILABLE,
        "detectors": DETECTORS,
        "directions": DIRECTIONS,
        "content_actions": CONTENT_ACTIONS,
        "limit_fields": LIMITS,
        "live_page": "policy",
        "changes": draft_changes(draft, active),
        **extra,
    }


def _page(request: HtmxHttpRequest, draft: PolicyDraft, **extra: Any) -> dict[str, Any]:
    return {
        **_editor(request, draft, **extra),
        "versions": _version_rows(policy_versions(limit=HISTORY)),
        "version_count": policy_version_count(),
    }


def _render_editor(request: HtmxHttpRequest, draft: PolicyDraft, **extra: Any) -> HttpResponse:
    template = "dashboard/policy.html#editor" if request.htmx else "dashboard/policy.html"
    context = _editor(request, draft, **extra) if request.htmx else _page(request, draft, **extra)
    return TemplateResponse(request, template, context)


def _to_policy_page(request: HtmxHttpRequest) -> HttpResponse:
    url = reverse("dashboard:policy")
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


@viewer_required
def policy(request: HtmxHttpRequest) -> HttpResponse:
    """The editor with the active policy, or `?from=N`: version N's document as a draft."""
    active = source = policy_services.policy_active_version()
    if request.GET.get("from", "").isdigit():
        try:
            source = policy_version_get(number=int(request.GET["from"]))
        except NotFound as exc:
            raise Http404(exc.message) from None
    document = source.document if source is not None else default_policy().as_document()
    draft = PolicyDraft.from_document(document)
    draft.base.value = str(active.number) if active is not None else ""
    context = _page(request, draft, source=source)
    return TemplateResponse(request, "dashboard/policy.html", context)


@require_POST
@admin_required
def policy_draft(request: HtmxHttpRequest) -> HttpResponse:
    """One editing step without saving: a grid cell cycled, a row added or removed."""
    draft = PolicyDraft.from_post(request.POST)
    draft.apply(
        cycle=request.POST.get("cycle", ""),
        add=request.POST.get("add_row", ""),
        remove=request.POST.get("remove_row", ""),
    )
    return _render_editor(request, draft)


@require_POST
@admin_required
def policy_save(request: HtmxHttpRequest) -> HttpResponse:
    draft = PolicyDraft.from_post(request.POST)
    active = policy_services.policy_active_version()
    if active is not None and draft.base.value != str(active.number):
        # Someone published since this editor was opened: say so, and let a second save
        # replace their version knowingly.
        draft.base.value = str(active.number)
        author = active.author.get_username() if active.author else active.author_label
        return _render_editor(
            request,
            draft,
            notice=f"v{active.number} was published by {author or 'someone'} after this editor "
            f"was opened ({active.reason}). Save again to replace it with this draft, or reload "
            "the page to start from it.",
        )
    try:
        document = draft.validated(
            known=_known_agents(active),
            routing_on=active is None or active.document.get("routingEnabled", True),
            publishing=True,
        )
        version = policy_services.policy_publish(
            document=document, reason=draft.reason.value, actor=actor(request)
        )
    except ValidationFailed as exc:
        draft.show(exc.problems)
        return _render_editor(request, draft)
    except Conflict as exc:
        return _render_editor(request, draft, notice=exc.message)
    changes = len(policy_versions_changes([version])[version.number])
    messages.success(
        request,
        f"Policy v{version.number} is active ({changes} change{'s' if changes != 1 else ''}).",
    )
    return _to_policy_page(request)


@require_POST
@admin_required
def policy_dry_run(request: HtmxHttpRequest) -> HttpResponse:
    """Replay recent traffic through the form as it is, unsaved, and show what would change."""
    draft = PolicyDraft.from_post(request.POST)
    active = policy_services.policy_active_version()
    last = draft.last.value.strip()
    try:
        document = draft.validated(known=_known_agents(active), routing_on=False, publishing=False)
        report = dry_run.policy_dry_run(document=document, last=int(last) if last.isdigit() else 0)
    except ValidationFailed as exc:
        draft.show(exc.problems)
        return _render_editor(request, draft)
    return _render_editor(request, draft, report=_report(report))


def _version_context(request: HtmxHttpRequest, version: PolicyVersion) -> dict[str, Any]:
    return {
        "row": _version_rows([version])[0],
        "document_json": json.dumps(version.document, indent=2),
        "can_edit": has_role(request.user, "admin"),
        "live_page": "policy",
    }


@viewer_required
def policy_version(request: HtmxHttpRequest, number: int) -> HttpResponse:
    """One version: its document and what it changed."""
    try:
        version = policy_version_get(number=number)
    except NotFound as exc:
        raise Http404(exc.message) from None
    return TemplateResponse(
        request, "dashboard/policy_version.html", _version_context(request, version)
    )


@require_POST
@admin_required
def policy_rollback(request: HtmxHttpRequest, number: int) -> HttpResponse:
    """Make version `number`'s document active again (as a new version); a reason is required."""
    reason = request.POST.get("reason", "")[:2000]
    try:
        version = policy_services.policy_rollback(
            number=number, reason=reason, actor=actor(request)
        )
    except NotFound as exc:
        raise Http404(exc.message) from None
    except (ValidationFailed, Conflict) as exc:
        problem = exc.problems[0].message if isinstance(exc, ValidationFailed) else exc.message
        context = {
            **_version_context(request, policy_version_get(number=number)),
            "reason": reason,
            "problem": problem,
        }
        template = (
            "dashboard/policy.html#rollback" if request.htmx else "dashboard/policy_version.html"
        )
        return TemplateResponse(request, template, context)
    messages.success(request, f"Rolled back to v{number}: policy v{version.number} is active.")
    return _to_policy_page(request)
