"""The trace list: every trace, searchable and filterable, with the filters in the URL, paged,
live while traces run."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django import forms
from django.http import HttpResponse
from django.template.response import TemplateResponse
from django_htmx.http import push_url

from a2a_core.errors import ValidationFailed
from a2a_core.models import Decision
from a2a_core.selectors.audit import agent_slugs
from a2a_core.selectors.trace_list import (
    STATES,
    WINDOW,
    TraceFilter,
    decode_cursor,
    parse_duration_ms,
    trace_page,
)
from dashboard.http import HtmxHttpRequest
from dashboard.roles import has_role, viewer_required

FILTER_FIELDS = (
    "agent",
    "caller",
    "target",
    "state",
    "min",
    "max",
    "errors",
    "decision",
    "since",
    "until",
)


def _any(choices: Any) -> list[tuple[str, str]]:
    return [("", "any"), *choices]


class TraceForm(forms.Form):
    """The trace list's filters, from the query string; every field is optional."""

    agent = forms.SlugField(required=False, max_length=64)
    caller = forms.SlugField(required=False, max_length=64)
    target = forms.SlugField(required=False, max_length=64)
    state = forms.ChoiceField(required=False, choices=_any((s, s) for s in STATES))
    min = forms.CharField(required=False, max_length=20)
    max = forms.CharField(required=False, max_length=20)
    error = forms.BooleanField(required=False)
    decision = forms.ChoiceField(required=False, choices=_any(Decision.choices))
    since = forms.DateTimeField(required=False)
    until = forms.DateTimeField(required=False)
    cursor = forms.CharField(required=False, max_length=300)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        self.durations: dict[str, int | None] = {}
        for name in ("min", "max"):
            try:
                self.durations[name] = parse_duration_ms(data.get(name) or "", name)
            except ValidationFailed as exc:
                self.add_error(name, exc.problems[0].message)
        since, until = data.get("since"), data.get("until")
        if since and until and since >= until:
            self.add_error("until", "Must be after “since”.")
        if token := data.get("cursor"):
            try:
                decode_cursor(token)
            except ValidationFailed as exc:
                self.add_error("cursor", exc.problems[0].message)
        return data

    def trace_filter(self) -> TraceFilter:
        data = self.cleaned_data
        return TraceFilter(
            agent=data["agent"],
            caller=data["caller"],
            target=data["target"],
            state=data["state"],
            min_ms=self.durations.get("min"),
            max_ms=self.durations.get("max"),
            errors=bool(data["error"]),
            decision=data["decision"],
            since=data["since"],
            until=data["until"],
        )

    def query(self, *, cursor: bool = False) -> str:
        """The filters that are set as a query string (with the cursor: this very page)."""
        names = (*FILTER_FIELDS, "cursor") if cursor else FILTER_FIELDS
        return urlencode([(name, v) for name in names if (v := self.data.get(name))])


@viewer_required
def trace_list(request: HtmxHttpRequest) -> HttpResponse:
    form = TraceForm(request.GET)
    page = (
        trace_page(filters=form.trace_filter(), cursor=form.cleaned_data["cursor"])
        if form.is_valid()
        else None
    )
    context: dict[str, Any] = {
        "form": form,
        "page": page,
        "query": form.query(),
        "window": WINDOW,
        "cursor": form.data.get("cursor", ""),
        "can_replay": has_role(request.user, "operator"),
        "live_page": "traces",
    }
    if request.htmx:
        response = TemplateResponse(request, "dashboard/traces.html#results", context)
        return push_url(response, f"{request.path}?{form.query(cursor=True)}".rstrip("?"))
    context.update(agent_slugs=agent_slugs(), states=STATES, decisions=Decision.choices)
    return TemplateResponse(request, "dashboard/traces.html", context)
