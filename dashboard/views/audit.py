"""The audit: search every message the hub recorded, read one in full, export what was found."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, cast
from urllib.parse import urlencode

from django import forms
from django.core.handlers.asgi import ASGIRequest
from django.http import Http404, HttpResponse, StreamingHttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone
from django_htmx.http import push_url

from a2a_core.asyncdb import db
from a2a_core.errors import NotFound, ValidationFailed
from a2a_core.models import Decision, TaskState
from a2a_core.policy.decide import REASONS
from a2a_core.schemas.envelopes import KINDS
from a2a_core.selectors.audit import (
    TEXT_WINDOW,
    AuditFilter,
    Cursor,
    Position,
    agent_ids,
    agent_slugs,
    audit_page,
    message_document,
    message_get,
)
from a2a_core.selectors.audit_export import audit_log_chunk, training_chunk
from a2a_core.selectors.edit_diffs import edits_of_messages
from a2a_core.services.audit import audit_record
from dashboard.http import HtmxHttpRequest, actor
from dashboard.roles import viewer_required

# Reasons the hub records besides the policy's own.
KNOWN_REASONS = (*REASONS, "fan_out", "answered_by_human")
FILTER_FIELDS = (
    "agent",
    "sender",
    "target",
    "kind",
    "decision",
    "reason",
    "state",
    "since",
    "until",
    "q",
)

Chunk = Callable[..., tuple[list[dict[str, Any]], Position | None]]


def _any(choices: Any) -> list[tuple[str, str]]:
    return [("", "any"), *choices]


class AuditForm(forms.Form):
    """The audit's filters, from the query string; every field is optional."""

    agent = forms.CharField(required=False, max_length=64)
    sender = forms.CharField(required=False, max_length=64)
    target = forms.CharField(required=False, max_length=64)
    kind = forms.ChoiceField(required=False, choices=_any((k, k) for k in KINDS))
    decision = forms.ChoiceField(required=False, choices=_any(Decision.choices))
    reason = forms.CharField(required=False, max_length=64)
    state = forms.ChoiceField(required=False, choices=_any(TaskState.choices))
    since = forms.DateTimeField(required=False)
    until = forms.DateTimeField(required=False)
    q = forms.CharField(required=False, max_length=200)
    cursor = forms.CharField(required=False, max_length=200)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        slugs = [data.get(name) or "" for name in ("agent", "sender", "target")]
        self.ids = agent_ids(slugs)
        for name, slug in zip(("agent", "sender", "target"), slugs, strict=True):
            if slug and slug not in self.ids:
                self.add_error(name, f"No agent is registered as “{slug}”.")
        since, until = data.get("since"), data.get("until")
        if since and until and since >= until:
            self.add_error("until", "Must be after “since”.")
        self.page_cursor = None
        if token := data.get("cursor"):
            try:
                self.page_cursor = Cursor.decode(token)
            except ValidationFailed as exc:
                self.add_error("cursor", exc.problems[0].message)
        return data

    def audit_filter(self) -> AuditFilter:
        data = self.cleaned_data
        return AuditFilter(
            agent_id=self.ids.get(data["agent"]),
            sender_id=self.ids.get(data["sender"]),
            target_id=self.ids.get(data["target"]),
            kind=data["kind"],
            decision=data["decision"],
            reason=data["reason"].strip(),
            state=data["state"],
            since=data["since"],
            until=data["until"],
            text=data["q"].strip(),
        )

    def query(self, *, cursor: bool = False) -> str:
        """The filters that are set as a query string (with the cursor: this very page)."""
        names = (*FILTER_FIELDS, "cursor") if cursor else FILTER_FIELDS
        return urlencode([(name, v) for name in names if (v := self.data.get(name))])


@viewer_required
def audit(request: HtmxHttpRequest) -> HttpResponse:
    form = AuditForm(request.GET)
    page = (
        audit_page(filters=form.audit_filter(), cursor=form.page_cursor)
        if form.is_valid()
        else None
    )
    context: dict[str, Any] = {
        "form": form,
        "page": page,
        "query": form.query(),
        "text_window": TEXT_WINDOW,
        "live_page": "audit",
    }
    if request.htmx:
        response = TemplateResponse(request, "dashboard/audit.html#swap", context)
        # The address bar gets the filters that are set (htmx would list empty ones too).
        return push_url(response, f"{request.path}?{form.query(cursor=True)}".rstrip("?"))
    context.update(
        agent_slugs=agent_slugs(),
        kinds=KINDS,
        decisions=Decision.choices,
        reasons=KNOWN_REASONS,
        states=TaskState.choices,
    )
    return TemplateResponse(request, "dashboard/audit.html", context)


@viewer_required
def message_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    try:
        message = message_get(pk=pk)
    except NotFound:
        raise Http404("no such message") from None
    data = message_document(message)
    document = json.dumps(data, indent=2, ensure_ascii=False)
    context = {
        "message": message,
        "decided_by": data["hub"]["decision"]["decidedBy"] or "",
        "document": document,
        "edit": edits_of_messages([message.pk]).get(message.pk),
    }
    return TemplateResponse(request, "dashboard/message.html", context)


# --- exports --------------------------------------------------------------------------------


@viewer_required
def audit_export(request: HtmxHttpRequest) -> HttpResponse:
    """The filtered messages as the A2A traffic log (JSONL), oldest first."""
    return _export(request, chunk=audit_log_chunk, name="a2a-audit", what="messages")


@viewer_required
def audit_training(request: HtmxHttpRequest) -> HttpResponse:
    """A conversation per task with a filtered message, as training data (JSONL)."""
    return _export(request, chunk=training_chunk, name="a2a-training", what="tasks")


def _export(request: HtmxHttpRequest, *, chunk: Chunk, name: str, what: str) -> HttpResponse:
    form = AuditForm(request.GET)
    if not form.is_valid():
        problems = "\n".join(
            f"{field}: {' '.join(str(e) for e in errors)}" for field, errors in form.errors.items()
        )
        return HttpResponse(problems + "\n", status=400, content_type="text/plain; charset=utf-8")
    filters = form.audit_filter()
    record = _recorder(request, form, what)
    content: Iterator[bytes] | AsyncIterator[bytes]
    if isinstance(request, ASGIRequest):
        # Under ASGI a synchronous iterator would be read to its end before the first byte
        # is sent; an asynchronous one streams, each chunk read on the hub's database thread.
        content = _async_lines(chunk, filters, record)
    else:
        content = _lines(chunk, filters, record)
    response = StreamingHttpResponse(content, content_type="application/x-ndjson")
    stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
    response["Content-Disposition"] = f'attachment; filename="{name}-{stamp}.jsonl"'
    # The role decorators are typed for HttpResponse; Django serves a streamed one alike.
    return cast(HttpResponse, response)


def _recorder(request: HtmxHttpRequest, form: AuditForm, what: str) -> Callable[[int, bool], None]:
    user = actor(request)
    filters = {name: v for name in FILTER_FIELDS if (v := form.data.get(name))}

    def record(rows: int, complete: bool) -> None:
        audit_record(
            action=f"audit.export.{what}",
            summary=f"exported {rows} {what}" + ("" if complete else " (interrupted)"),
            actor=user,
            object_type="audit",
            data={"filters": filters, "rows": rows, "complete": complete},
        )

    return record


def _encode(lines: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines).encode()


def _lines(
    chunk: Chunk, filters: AuditFilter, record: Callable[[int, bool], None]
) -> Iterator[bytes]:
    rows, complete, after = 0, False, None
    try:
        while True:
            lines, after = chunk(filters=filters, after=after)
            rows += len(lines)
            if lines:
                yield _encode(lines)
            if after is None:
                complete = True
                return
    finally:
        record(rows, complete)


async def _async_lines(
    chunk: Chunk, filters: AuditFilter, record: Callable[[int, bool], None]
) -> AsyncIterator[bytes]:
    rows, complete, after = 0, False, None
    try:
        while True:
            lines, after = await db(chunk, filters=filters, after=after)
            rows += len(lines)
            if lines:
                yield _encode(lines)
            if after is None:
                complete = True
                return
    finally:
        await db(record, rows, complete)
