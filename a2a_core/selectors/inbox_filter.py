"""What the escalation inbox shows and where a page of it starts: the filter every view, bulk
action and CLI listing shares, its sorts, and the keyset cursor over them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from urllib.parse import urlencode

from django.db.models import F, OrderBy, Q, QuerySet

from a2a_core.models import Escalation, EscalationKind, EscalationStatus, Priority


@dataclass(frozen=True)
class Cursor:
    """Where a page of the inbox starts: after an item, before one, or at the end (keyset
    paging over the view's order: an item's id names its place, whatever was decided since)."""

    after: int | None = None
    before: int | None = None
    last: bool = False

    @classmethod
    def from_params(cls, params: Mapping[str, str]) -> Cursor:
        def pk(name: str) -> int | None:
            value = str(params.get(name) or "")
            return int(value) if value.isdigit() and len(value) < 12 else None

        return cls(after=pk("after"), before=pk("before"), last=params.get("last") == "1")


# The view shows cards up to this many matches; more, and it is the dense list (one line an
# item) unless the person asked for cards.
CARDS_UP_TO = 100
# Lines on a page of the dense list, and cards on a page of cards.
LIST_PAGE = 100
CARDS_PAGE = 50


SORTS: dict[str, tuple[str | OrderBy, ...]] = {
    "priority": ("-priority_rank", "-created_at", "-pk"),
    "deadline": (F("deadline").asc(nulls_last=True), "-priority_rank", "pk"),
    "newest": ("-created_at", "-pk"),
    "oldest": ("created_at", "pk"),
}
AGES = {"5m": timedelta(minutes=5), "1h": timedelta(hours=1), "1d": timedelta(days=1)}
STATES = ("claimed", "unclaimed")
GROUPINGS = ("agent", "chain")
VIEWS = ("list", "cards")
DECIDED = [s for s in EscalationStatus.values if s != EscalationStatus.PENDING]
# Each sort's keys, in order, as (field, descending): the keyset a page starts after.
KEYS: dict[str, tuple[tuple[str, bool], ...]] = {
    "priority": (("priority_rank", True), ("created_at", True), ("pk", True)),
    "deadline": (("deadline", False), ("priority_rank", True), ("pk", False)),
    "newest": (("created_at", True), ("pk", True)),
    "oldest": (("created_at", False), ("pk", False)),
}


def rows_past(keys: tuple[tuple[str, bool], ...], row: Escalation, forward: bool) -> Q:
    """The rows that come after `row` in the order of `keys` (before it, unless `forward`).
    Only the deadline may be empty; empty deadlines come last."""
    where = Q(pk__in=[])
    same = Q()
    for name, descending in keys:
        value = getattr(row, name)
        later = descending != forward  # the direction in which this key's values grow
        if value is None:
            # Nothing follows an empty deadline; every set one precedes it.
            beyond = Q(pk__in=[]) if later else Q(**{f"{name}__isnull": False})
            equal = Q(**{f"{name}__isnull": True})
        else:
            beyond = Q(**{f"{name}__gt" if later else f"{name}__lt": value})
            if name == "deadline" and later:
                beyond |= Q(deadline__isnull=True)
            equal = Q(**{name: value})
        where |= same & beyond
        same &= equal
    return where


@dataclass(frozen=True)
class InboxFilter:
    """What the inbox shows; every field is a URL parameter of the page (unknown values are
    dropped, never an error: a shared link keeps working)."""

    agent: str = ""
    # "caller:target"
    pair: str = ""
    kind: str = ""
    priority: str = ""
    skill: str = ""
    # Older than: one of AGES.
    age: str = ""
    # One of STATES.
    state: str = ""
    q: str = ""
    sort: str = "priority"
    # One of GROUPINGS.
    group: str = ""
    # One of VIEWS; empty: cards up to CARDS_UP_TO matches, the dense list beyond.
    view: str = ""

    @classmethod
    def from_params(cls, params: Mapping[str, str]) -> InboxFilter:
        def pick(name: str, allowed: Iterable[str], default: str = "") -> str:
            value = str(params.get(name) or "")
            return value if value in allowed else default

        def text(name: str, size: int) -> str:
            return str(params.get(name) or "").replace("\x00", "").strip()[:size]

        return cls(
            agent=text("agent", 64),
            pair=text("pair", 130) if ":" in str(params.get("pair") or "") else "",
            kind=pick("kind", EscalationKind.values),
            priority=pick("priority", Priority.values),
            skill=text("skill", 200),
            age=pick("age", AGES),
            state=pick("state", STATES),
            q=text("q", 200),
            sort=pick("sort", SORTS, "priority"),
            group=pick("group", GROUPINGS),
            view=pick("view", VIEWS),
        )

    def query(self) -> str:
        """The URL query of this view (defaults left out)."""
        values = {
            k: v for k, v in asdict(self).items() if v and not (k == "sort" and v == "priority")
        }
        return urlencode(values)

    def narrows(self, rows: QuerySet[Escalation], *, now: datetime) -> QuerySet[Escalation]:
        where = Q()
        if self.agent:
            where &= Q(agent__slug=self.agent)
        if self.pair:
            caller, _, target = self.pair.partition(":")
            where &= Q(task__caller__slug=caller, task__target__slug=target)
        if self.kind:
            where &= Q(kind=self.kind)
        if self.priority:
            where &= Q(priority=self.priority)
        if self.skill:
            where &= Q(task__skill=self.skill)
        if self.age:
            where &= Q(created_at__lte=now - AGES[self.age])
        if self.q:
            where &= (
                Q(question__icontains=self.q)
                | Q(reason__icontains=self.q)
                | Q(message__summary__icontains=self.q)
                | Q(agent__slug__icontains=self.q)
                | Q(task__target__slug__icontains=self.q)
            )
        return rows.filter(where)
