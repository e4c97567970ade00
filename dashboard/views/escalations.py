"""The escalation inbox: questions agents put to humans, and messages held for approval.

Every decision answers with the escalation's card as it now is, out of band (`#escalation-<pk>`):
a live refresh of the list may have replaced the card the form was in while the request was
under way, and an out-of-band swap finds the card wherever it is now.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.http import Http404, HttpResponse, QueryDict
from django.template.response import TemplateResponse
from django.views.decorators.http import require_POST
from django_htmx.http import push_url

from a2a_core.errors import Conflict, FieldProblem, NotFound, ValidationFailed
from a2a_core.models import Escalation, EscalationKind, EscalationStatus
from a2a_core.schemas.a2a import holds_lone_surrogate, holds_nul
from a2a_core.selectors.escalations import (
    EscalationCard,
    EscalationInbox,
    escalation_card,
    escalation_filter_options,
    escalation_inbox,
    escalation_page,
    matching_pending,
)
from a2a_core.selectors.inbox_filter import Cursor, InboxFilter
from a2a_core.services import escalation_triage as triage
from a2a_core.services import escalations as escalation_services
from dashboard.http import HtmxHttpRequest, actor
from dashboard.message_edit import (
    answer_data,
    answer_form,
    answer_posted,
    edits_from,
    message_edit,
    with_posted,
)
from dashboard.roles import has_role, operator_required, viewer_required

# What each action is called in a notice: "your approval was not applied".
VERBS = {
    "answer": "answer",
    "approve": "approval",
    "redirect": "redirect",
    "reject": "rejection",
    "claim": "claim",
    "release": "release",
}


@viewer_required
def escalation_list(request: HtmxHttpRequest) -> HttpResponse:
    """The inbox; its filters, search, sort and grouping are the URL's query (a view can be
    shared). htmx requests (a filter change, a live refresh) get the list alone."""
    filters = InboxFilter.from_params(request.GET)
    cursor = Cursor.from_params(request.GET)
    inbox = escalation_inbox(filters=filters, cursor=cursor)
    if has_role(request.user, "operator") and not inbox.dense:
        for card in inbox.pending:
            _with_forms(card)
    context: dict[str, Any] = {
        "inbox": inbox,
        "filters": filters,
        "cursor": cursor,
        "pages": _pages(filters, inbox),
        "can_decide": has_role(request.user, "operator"),
        "claims_hold": settings.HUB_ESCALATION_CLAIMS == "hold",
        "me": request.user.get_username(),
        "live_page": "escalations",
    }
    if request.htmx:
        response = TemplateResponse(request, "dashboard/escalations.html#list", context)
        if request.htmx.trigger == "escalation-filters":
            # The address bar shows the view, defaults left out: a link to share.
            query = filters.query()
            return push_url(response, f"{request.path}?{query}" if query else request.path)
        return response
    context["options"] = escalation_filter_options(upto=inbox.upto, pending=inbox.pending_total)
    return TemplateResponse(request, "dashboard/escalations.html", context)


@viewer_required
def escalation_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """One escalation at a stable address: its card (decided here too), payload, history,
    who claimed and decided it, and the original beside the edit."""
    try:
        page = escalation_page(escalation_id=pk)
    except NotFound:
        raise Http404 from None
    can_decide = has_role(request.user, "operator")
    if can_decide:
        _with_forms(page.card)
    context = {
        "page": page,
        "card": page.card,
        "can_decide": can_decide,
        "claims_hold": settings.HUB_ESCALATION_CLAIMS == "hold",
        "me": request.user.get_username(),
        "live_page": "escalation",
        # Redrawn live when the escalation changes (a claim, a decision made elsewhere).
        "live_query": urlencode({"escalation": pk, "url": request.path}),
        # No bulk bar here: the card has no box to select it with.
        "single": True,
    }
    return TemplateResponse(request, "dashboard/escalation.html", context)


def _pages(filters: InboxFilter, inbox: EscalationInbox) -> dict[str, str]:
    """The pager's links: the first page, the one before, the one after and the last."""
    base = filters.query()

    def url(extra: str) -> str:
        query = "&".join(q for q in (base, extra) if q)
        return f"?{query}" if query else "?"

    pages = {}
    if inbox.has_before:
        pages["first"] = url("")
        if inbox.dense:
            pages["prev"] = url(f"before={inbox.first_pk}")
    if inbox.has_after:
        pages["next"] = url(f"after={inbox.last_pk}")
        if inbox.dense:
            pages["last"] = url("last=1")
    return pages


def _with_forms(card: EscalationCard) -> EscalationCard:
    """An open card's generated forms: a held message's edit form, a question's answer."""
    e = card.escalation
    if e.is_open and e.kind == EscalationKind.APPROVAL and e.message is not None:
        card.edit = message_edit(e.message)
    elif e.is_open and e.answer_schema is not None:
        card.answer_form = answer_form(e.answer_schema)
    return card


def _ids(values: list[str]) -> list[int]:
    """Escalation ids from form fields, each a number or a comma-separated list of them
    (a folded card stands for several)."""
    ids = []
    for value in values:
        for piece in value.split(","):
            if piece.strip().isdigit() and len(piece.strip()) < 12:
                ids.append(int(piece))
    return ids[:1000]


def _also(request: HtmxHttpRequest, action: str, **params: Any) -> int:
    """Decide the identical held messages folded with the one decided (the form's `also`);
    returns how many were decided too."""
    others = _ids(request.POST.getlist("also"))
    if not others:
        return 0
    outcome = triage.escalations_decide(ids=others, action=action, actor=actor(request), **params)
    return len(outcome.done)


def _decide(
    request: HtmxHttpRequest, pk: int, action: str, decide: Callable[[], Any], done: str
) -> HttpResponse:
    """Run a decision; answer with the card as it is now and what happened to the decision."""
    problems: dict[str, list[str]] = {}
    failed: list[FieldProblem] = []
    try:
        more = decide()
        notice, tone = done, "ok"
        if isinstance(more, int) and more:
            notice += f" So were {more} identical held message{'s' if more > 1 else ''}."
    except ValidationFailed as exc:
        failed = exc.problems
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
    _with_forms(card)
    editing = action == "approve" and request.POST.get("edit") == "1" and tone == "error"
    if editing and card.edit is not None:
        # The form comes back as it was sent, each problem beside its field.
        card.edit = with_posted(card.edit, request.POST, failed)
    by_form = not request.POST.get("data", "").strip()  # else the JSON text was the data
    if action == "answer" and tone == "error" and card.answer_form and by_form:
        answer_posted(card.answer_form, request.POST, failed)
    if tone == "warn" and not card.escalation.is_open:
        notice = f"Already {_outcome(card.escalation)}; your {VERBS[action]} was not applied."
    context = {
        "card": card,
        "can_decide": True,
        "claims_hold": settings.HUB_ESCALATION_CLAIMS == "hold",
        "notice": notice,
        "tone": tone,
        "problems": problems,
        "posted": request.POST,
        "me": request.user.get_username(),
        "editing": editing,
        "oob": True,
        # Decided on the escalation's own page: its card there has no box to select it with.
        "single": bool(
            request.htmx
            and re.fullmatch(r"/escalations/\d+/", request.htmx.current_url_abs_path or "")
        ),
    }
    if request.POST.get("line") == "1":
        # A line of the dense list: the line as it now is, the notice in its title.
        return TemplateResponse(request, "dashboard/escalations.html#line", context)
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
    # A quick reply (one of the options the agent offered) is the answer's text.
    text = (request.POST.get("quick") or request.POST.get("text", ""))[:100_000]
    raw = request.POST.get("data", "")[:100_000]

    def decide() -> Any:
        # The JSON text, when given, wins over the generated form's fields.
        data = _json_field(raw)
        if data is None and request.POST.get("data_form") == "1":
            asked = Escalation.objects.filter(pk=pk).values_list("answer_schema", flat=True)
            data = answer_data(answer_form(asked.first()), request.POST)
        return escalation_services.escalation_answer(
            escalation_id=pk, text=text, data=data, actor=actor(request)
        )

    return _decide(request, pk, "answer", decide, "Answer sent: the agent gets it next.")


@require_POST
@operator_required
def escalation_approve(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    # With `edit`, the operator edited the message's parts (the form of `message_edit`);
    # with `text` alone, replaced its text.
    editing = request.POST.get("edit") == "1"
    edited = request.POST.get("text")
    edited = edited[:100_000] if edited is not None and not editing else None

    def decide() -> Any:
        if editing:
            held = Escalation.objects.select_related("message").filter(pk=pk).first()
            if held is None:
                raise NotFound(f"there is no escalation {pk}")
            if held.message is None:
                raise Conflict(f"escalation {pk} is a question: answer it instead")
            escalation_services.escalation_approve(
                escalation_id=pk,
                edits=edits_from(message_edit(held.message), request.POST),
                actor=actor(request),
            )
            return 0
        escalation_services.escalation_approve(
            escalation_id=pk, edited_text=edited, actor=actor(request)
        )
        return _also(request, "approve") if edited is None else 0

    done = (
        "Approved: the message is on its way."
        if edited is None and not editing
        else "Approved as edited."
    )
    return _decide(request, pk, "approve", decide, done)


@require_POST
@operator_required
def escalation_redirect(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    to = request.POST.get("to", "").strip()[:64]

    def decide() -> Any:
        if not to:
            raise ValidationFailed("no agent chosen", [FieldProblem("to", "choose an agent")])
        escalation_services.escalation_redirect(escalation_id=pk, to=to, actor=actor(request))
        return _also(request, "redirect", to=to)

    return _decide(request, pk, "redirect", decide, f"Redirected to {to}.")


@require_POST
@operator_required
def escalation_reject(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    reason = request.POST.get("reason", "")[:500]

    def decide() -> Any:
        escalation_services.escalation_reject(escalation_id=pk, reason=reason, actor=actor(request))
        return _also(request, "reject", reason=reason)

    return _decide(request, pk, "reject", decide, "Rejected: the caller sees your reason.")


@require_POST
@operator_required
def escalation_claim(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    take_over = request.POST.get("take_over") == "1"

    def decide() -> Any:
        return triage.escalation_claim(escalation_id=pk, actor=actor(request), take_over=take_over)

    done = "You took it over." if take_over else "It is yours: everyone sees you are on it."
    return _decide(request, pk, "claim", decide, done)


@require_POST
@operator_required
def escalation_release(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    def decide() -> Any:
        return triage.escalation_release(escalation_id=pk, actor=actor(request))

    return _decide(request, pk, "release", decide, "Released: anyone can take it.")


@require_POST
@operator_required
def escalation_bulk(request: HtmxHttpRequest) -> HttpResponse:
    """Approve, reject (one reason) or redirect the selected escalations, or every one the
    view matches (`scope=matching`: the view's query in `match`, none newer than `upto`),
    decided on the server in batches. The result names each item skipped and why; the list
    itself follows live, as each decision is announced."""
    action = request.POST.get("action", "")
    matching = request.POST.get("scope") == "matching"
    if matching:
        filters = InboxFilter.from_params(QueryDict(request.POST.get("match", "")[:2000]))
        upto = request.POST.get("upto", "")
        ids = matching_pending(
            filters=filters, upto=int(upto) if upto.isdigit() and len(upto) < 12 else None
        )
    else:
        ids = _ids(request.POST.getlist("ids"))
    tone = "ok"
    skipped: list[tuple[int, str]] = []
    if not ids:
        notice, tone = (
            ("Nothing pending matches this view any more.", "warn")
            if matching
            else ("Select escalations first (x, or the boxes on the cards).", "warn")
        )
    else:
        try:
            outcome = triage.escalations_decide(
                ids=ids,
                action=action,
                reason=request.POST.get("reason", "")[:500],
                to=request.POST.get("to", "").strip()[:64],
                actor=actor(request),
            )
        except ValidationFailed as exc:
            notice = "Nothing was changed: " + "; ".join(
                [exc.message, *(p.message for p in exc.problems)]
            )
            tone = "error"
        else:
            past = {"approve": "Approved", "reject": "Rejected", "redirect": "Redirected"}[action]
            notice = f"{past} {len(outcome.done)} of {len(set(ids))}."
            skipped = outcome.skipped
            if skipped:
                tone = "warn"
                notice += f" Not decided: {len(skipped)}."
    context = {"notice": notice, "tone": tone, "skipped": skipped}
    return TemplateResponse(request, "dashboard/escalations.html#bulk-notice", context)
