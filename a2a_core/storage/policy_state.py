"""The policy's shared state: rate-limit windows and circuit breakers, right across workers.

Two implementations behind one interface: Redis (when REDIS_URL is set; a batch's windows and
breakers are read, and the messages that can pass counted, by one Lua script: one round trip,
atomic across processes) and the database (rows locked in the caller's
transaction; on SQLite every write transaction is serialized anyway). Tasks in flight are
counted from the task table, which is the truth in both cases.

Windows are fixed and aligned (this minute, this hour), so "N per minute" lets exactly N
through in each minute and `Retry-After` is the time to the next window.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.db import connection

from a2a_core.models import BreakerState, PolicyCounter
from a2a_core.policy.decide import CLOSED, BreakerView
from a2a_core.schemas.policy import Breaker, RateLimits
from a2a_core.storage.reads import marks, select_rows

MINUTE, HOUR = 60, 3600


@dataclass(frozen=True)
class Windows:
    """The current windows' counter keys for a caller -> target pair."""

    caller_minute: str
    caller_hour: str
    target_minute: str
    minute_resets_in: float
    hour_resets_in: float

    @property
    def keys(self) -> tuple[str, str, str]:
        return (self.caller_minute, self.caller_hour, self.target_minute)

    @classmethod
    def at(cls, now: float, caller: str, target: str) -> Windows:
        minute = int(now // MINUTE) * MINUTE
        hour = int(now // HOUR) * HOUR
        return cls(
            caller_minute=f"caller:{caller}:m:{minute}",
            caller_hour=f"caller:{caller}:h:{hour}",
            target_minute=f"target:{target}:m:{minute}",
            minute_resets_in=minute + MINUTE - now,
            hour_resets_in=hour + HOUR - now,
        )


def _window_of(key: str) -> int:
    return int(key.rsplit(":", 1)[1])


def script_limit(value: int | None) -> int:
    """A limit as the Redis scripts take it (-1: none)."""
    return -1 if value is None else value


def breaker_view(
    failures: int, opened_until: float | None, probe_until: float | None, now: float
) -> BreakerView:
    if opened_until is None:
        return BreakerView(failures=failures) if failures else CLOSED
    if opened_until > now:
        return BreakerView("open", retry_after=opened_until - now, failures=failures)
    probe_free = probe_until is None or probe_until <= now
    return BreakerView(
        "half_open",
        retry_after=max(0.0, (probe_until or now) - now),
        probe_available=probe_free,
        failures=failures,
    )


def checks_of(
    windows: Windows, limits: RateLimits, target_limits: RateLimits
) -> list[tuple[str, int | None]]:
    """Each window a message counts in, with its limit."""
    return [
        (windows.caller_minute, limits.per_minute),
        (windows.caller_hour, limits.per_hour),
        (windows.target_minute, target_limits.incoming_per_minute),
    ]


@dataclass(frozen=True)
class Ask:
    """One message of a batch for `PolicyState.gather`: its windows, the limits on them, the
    breaker of its target, and whether it passes every check that does not depend on the
    shared state (then the store may count it at once)."""

    windows: Windows
    limits: RateLimits
    target_limits: RateLimits
    target: str
    reserve: bool


class WindowCounts(ABC):
    """The counts of a batch's windows, held for the length of the batch."""

    def __init__(self, counts: dict[str, int]) -> None:
        self.counts = counts

    def get(self, key: str) -> int:
        return self.counts.get(key, 0)

    @abstractmethod
    def reserve(
        self,
        windows: Windows,
        limits: RateLimits,
        target_limits: RateLimits,
        *,
        ask: int | None = None,
    ) -> bool:
        """Count one message in the caller's and target's windows, unless that would pass a
        limit (then nothing is counted). Exact across workers. `ask`: the message's index in
        the asks the counts were gathered for, to take a count made then."""

    @abstractmethod
    def save(self) -> None:
        """Write what the batch counted (when the store does not count as it goes), and give
        back counts made for messages that were refused after all."""


class PolicyState(ABC):
    @abstractmethod
    def gather(
        self, asks: Sequence[Ask], now: float, *, breakers: bool
    ) -> tuple[WindowCounts, dict[str, BreakerView]]:
        """The current counts of the asks' windows, held (locked, where the store locks)
        until the batch's transaction ends, and (when `breakers`) the breakers of their
        targets that are open, half-open or counting failures. A store may count the asks
        marked `reserve` right away, in order, where the windows have room and the breaker
        lets calls through; `WindowCounts.reserve(..., ask=i)` then takes that count."""

    @abstractmethod
    def tripped(self, now: float) -> dict[str, BreakerView]:
        """Every breaker that is open, half-open or counting failures, by target."""

    @abstractmethod
    def claim_probe(self, target: str, now: float, hold_seconds: float) -> bool:
        """Take the half-open breaker's one trial call; False if another call has it."""

    @abstractmethod
    def record(self, target: str, ok: bool, breaker: Breaker, now: float) -> str:
        """Count an outcome of a call to `target`; return the breaker state after it."""


# --- the database ---------------------------------------------------------------------------


def _dt(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def _ts(moment: datetime | None) -> float | None:
    return moment.timestamp() if moment is not None else None


class _LockedWindows(WindowCounts):
    """Window rows locked in the current transaction: checked and counted in memory, written
    back once. Exact, because no other transaction can touch the rows until this one ends."""

    def __init__(self, counts: dict[str, int]) -> None:
        super().__init__(counts)
        self._stored = set(counts)
        self._dirty: set[str] = set()

    def reserve(
        self,
        windows: Windows,
        limits: RateLimits,
        target_limits: RateLimits,
        *,
        ask: int | None = None,
    ) -> bool:
        checks = checks_of(windows, limits, target_limits)
        if any(limit is not None and self.get(key) >= limit for key, limit in checks):
            return False
        for key, _ in checks:
            self.counts[key] = self.get(key) + 1
            self._dirty.add(key)
        return True

    def save(self) -> None:
        if not self._dirty:
            return
        # A redirect can count in a window that was not loaded (the other agent's).
        _insert_missing(self._dirty - self._stored)
        q = connection.ops.quote_name
        with connection.cursor() as cursor:
            cursor.executemany(
                f"UPDATE {q(PolicyCounter._meta.db_table)} SET {q('count')} = %s "
                f"WHERE {q('key')} = %s",
                [(self.counts[key], key) for key in sorted(self._dirty)],
            )
        self._stored |= self._dirty
        self._dirty.clear()


def _insert_missing(keys: Iterable[str]) -> None:
    PolicyCounter.objects.bulk_create(
        [PolicyCounter(key=key, window=_window_of(key)) for key in keys], ignore_conflicts=True
    )


def _locked_counts(keys: list[str]) -> dict[str, int]:
    """The counts of window `keys` that have a row, locking those rows (in key order, so
    concurrent batches cannot deadlock). Keys name their window, so they are unique."""
    q = connection.ops.quote_name
    lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {q('key')}, {q('count')} FROM {q(PolicyCounter._meta.db_table)} "
            f"WHERE {q('key')} IN ({', '.join(['%s'] * len(keys))}) ORDER BY {q('key')}{lock}",
            keys,
        )
        return dict(cursor.fetchall())


class DatabaseState(PolicyState):
    """Call inside the transaction that records the messages (window rows are locked in it)."""

    def gather(
        self, asks: Sequence[Ask], now: float, *, breakers: bool
    ) -> tuple[WindowCounts, dict[str, BreakerView]]:
        keys = (key for a in asks for key, _ in checks_of(a.windows, a.limits, a.target_limits))
        views = self.breakers({a.target for a in asks}, now) if breakers else {}
        return self.windows(keys), views

    def windows(self, keys: Iterable[str]) -> WindowCounts:
        wanted = sorted(set(keys))
        if not wanted:
            return _LockedWindows({})
        counts = _locked_counts(wanted)
        missing = [key for key in wanted if key not in counts]
        if missing:  # the first message of a window
            _insert_missing(missing)
            counts.update(_locked_counts(missing))
        return _LockedWindows(counts)

    def breakers(self, targets: Iterable[str], now: float) -> dict[str, BreakerView]:
        slugs = sorted(set(targets))
        if not slugs:
            return {}
        return self._views(f"agent_slug IN ({marks(len(slugs))})", slugs, now)

    def tripped(self, now: float) -> dict[str, BreakerView]:
        return self._views("", [], now)

    @staticmethod
    def _views(among: str, params: list[Any], now: float) -> dict[str, BreakerView]:
        # Read for every batch of messages: plain SQL, not a queryset compiled each time.
        counting = "(failures > 0 OR opened_until IS NOT NULL)"
        rows = select_rows(
            BreakerState,
            ("agent_slug", "failures", "opened_until", "probe_until"),
            f"{among} AND {counting}" if among else counting,
            params,
        )
        return {
            slug: breaker_view(failures, _ts(opened), _ts(probe), now)
            for slug, failures, opened, probe in rows
        }

    def claim_probe(self, target: str, now: float, hold_seconds: float) -> bool:
        moment = _dt(now)
        claimed = (
            BreakerState.objects.filter(agent_slug=target, opened_until__lte=moment)
            .exclude(probe_until__gt=moment)
            .update(probe_until=moment + timedelta(seconds=hold_seconds))
        )
        return claimed == 1

    def record(self, target: str, ok: bool, breaker: Breaker, now: float) -> str:
        if ok:
            BreakerState.objects.filter(agent_slug=target).exclude(
                failures=0, opened_until__isnull=True
            ).update(failures=0, opened_until=None, probe_until=None)
            return "closed"
        state, _ = BreakerState.objects.select_for_update().get_or_create(agent_slug=target)
        state.failures += 1
        half_open = state.opened_until is not None and state.opened_until.timestamp() <= now
        if state.failures >= breaker.failure_threshold or half_open:
            state.opened_until = _dt(now + breaker.cooldown_seconds)
            state.probe_until = None
        state.save()
        return "open" if state.opened_until is not None else "closed"


@lru_cache(maxsize=1)
def policy_state() -> PolicyState:
    """The state store of this deployment: Redis when configured, else the database."""
    if settings.REDIS_URL:
        from a2a_core.storage.redis_state import RedisState

        return RedisState(settings.REDIS_URL)
    return DatabaseState()


def retry_seconds(value: float | None) -> int | None:
    return None if value is None else max(1, math.ceil(value))
