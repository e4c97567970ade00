"""The escalation inbox: questions agents put to humans, and messages held for approval.

Every decision answers with the escalation's card as it now is, out of band (`#escalation-<pk>`):
a live refresh of the list may have replaced the card the form was in while the request was
under way, and an out-of-band swap finds the card wherever it is now.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from django.http import Http404, HttpResponse
from django.template.response import TemplateResponse
from django.views.decorators.http import require_POST

from a2a_core.errors import Conflict, FieldProblem, NotFound, ValidationFailed
from a2a_core.models import Escalation, EscalationStatus
from a2a_core.schemas.a2a import holds_lone_surrogate, holds_nul
from a2a_core.selectors.escalations import escalation_card, escalation_inbox
from a2a_core.services import escalations as escalation_services
from dashboard.http import HtmxHttpRequest, actor
from dashboard.roles import has_role, operator_required, viewer_required

# What each action is called in a notice: "your approval was not applied".
VERBS = {"answer": "answer", "approve": "approval", "redirect": "redirect", "reject": "rejection"}


@viewer_required
def escalation_list(request: HtmxHttpRequest) -> HttpResponse:
    context = {
        "inbox": escalation_inbox(),
        "can_decide": has_role(request.user, "operator"),
        "live_page": "escalations",
    }
    template = "dashboard/escalations.html#list" if request.htmx else "dashboard/escalations.html"
    return TemplateResponse(request, template, context)


def _decide(
    request: HtmxHttpRequest, pk: int, action: str, decide: Callable[[], Any], done: str
) -> HttpResponse:
    """Run a decision; answer with the card as it is now and what happened to the decision."""
    problems: dict[str, list[str]] = {}
    try:
        decide()
        notice, tone = done, "ok"
    except ValidationFailed as exc:
        for problem in exc.problems:
            key = problem.field.split(".")[0]
            problems.setdefault(key, []).append(
                problem.message if problem.field == key else str(problem)
            )
        notice, tone = f"Nothing was changed: {exc.message}.", "error"
    except Conflict as exc:
        notice, tone = exc.message, "warn"
    except NotFound:
        raise Http404 from None
    try:
        card = escalation_card(escalation_id=pk)
    except NotFound:
        raise Http404 from None
    if tone == "warn" and not card.escalation.is_open:
        notice = f"Already {_outcome(card.escalation)}; your {VERBS[action]} was not applied."
    context = {
        "card": card,
        "can_decide": True,
        "notice": notice,
        "tone": tone,
        "problems": problems,
        "posted": request.POST,
        "oob": True,
    }
    return TemplateResponse(request, "dashboard/escalations.html#card", context)


def _outcome(escalation: Escalation) -> str:
    if escalation.status == EscalationStatus.WITHDRAWN:
        return "withdrawn (the agent's task moved on)"
    if escalation.status == EscalationStatus.EXPIRED:
        return "expired (nobody decided before the deadline)"
    return f"{escalation.status} by {escalation.decider}"


def _json_field(raw: str) -> Any:
    """A JSON text from a form field (blank: None)."""
    if not raw.strip():
        return None
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise ValidationFailed(
            "the data is not JSON", [FieldProblem("data", f"not valid JSON: {exc}")]
        ) from None
    if holds_nul(data):
        raise ValidationFailed(
            "the data holds a NUL character", [FieldProblem("data", "remove the U+0000")]
        )
    if holds_lone_surrogate(data):
        raise ValidationFailed(
            "the data is not Unicode text",
            [FieldProblem("data", "remove the lone surrogate escape (\\ud800 to \\udfff)")],
        )
    return data


@require_POST
@operator_required
def escalation_answer(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    text = request.POST.get("text", "")[:100_000]
    raw = request.POST.get("data", "")[:100_000]

    def decide() -> Any:
        return escalation_services.escalation_answer(
            escalation_id=pk, text=text, data=_json_field(raw), actor=actor(request)
        )

    return _decide(request, pk, "answer", decide, "Answer sent: the agent gets it next.")


@require_POST
@operator_required
def escalation_approve(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    # With `text`, the operator edited the message before approving it.
    edited = request.POST.get("text")
    edited = edited[:100_000] if edited is not None else None

    def decide() -> Any:
        return escalation_services.escalation_approve(
            escalation_id=pk, edited_text=edited, actor=actor(request)
        )

    done = "Approved: the message is on its way." if edited is None else "Approved as edited."
    return _decide(request, pk, "approve", decide, done)


@require_POST
@operator_required
def escalation_redirect(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    to = request.POST.get("to", "").strip()[:64]

    def decide() -> Any:
        if not to:
            raise ValidationFailed("no agent chosen", [FieldProblem("to", "choose an agent")])
        return escalation_services.escalation_redirect(
            escalation_id=pk, to=to, actor=actor(request)
        )

    return _decide(request, pk, "redirect", decide, f"Redirected to {to}.")


@require_POST
@operator_required
def escalation_reject(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    reason = request.POST.get("reason", "")[:500]

    def decide() -> Any:
        return escalation_services.escalation_reject(
            escalation_id=pk, reason=reason, actor=actor(request)
        )

    return _decide(request, pk, "reject", decide, "Rejected: the caller sees your reason.")
