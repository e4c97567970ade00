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
from a2a_core.services.rows import marks, select_rows

MINUTE, HOUR = 60, 3600


@dataclass(frozen=True)
class Windows:
    """The current windows' counter keys for a caller -> target pair."""

    caller_minute: str
    caller_hour: str
    target_minute: str
    minute_resets_in: float
    hour_resets_in: float

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


def _limit(value: int | None) -> int:
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


def _checks(
    windows: Windows, limits: RateLimits, target_limits: RateLimits
) -> list[tuple[str, int | None]]:
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
        checks = _checks(windows, limits, target_limits)
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
        keys = (key for a in asks for key, _ in _checks(a.windows, a.limits, a.target_limits))
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


# --- Redis ----------------------------------------------------------------------------------

_RESERVE = """
for i = 1, #KEYS do
  local limit = tonumber(ARGV[i])
  if limit >= 0 and tonumber(redis.call('GET', KEYS[i]) or '0') >= limit then return 0 end
end
for i = 1, #KEYS do
  redis.call('INCR', KEYS[i])
  redis.call('EXPIRE', KEYS[i], tonumber(ARGV[#KEYS + i]))
end
return 1
"""

_CLAIM = """
local opened = tonumber(redis.call('HGET', KEYS[1], 'opened_until') or '-1')
if opened < 0 or opened > tonumber(ARGV[1]) then return 0 end
local probe = tonumber(redis.call('HGET', KEYS[1], 'probe_until') or '0')
if probe > tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'probe_until', ARGV[2])
return 1
"""

_FAIL = """
local failures = redis.call('HINCRBY', KEYS[1], 'failures', 1)
local opened = tonumber(redis.call('HGET', KEYS[1], 'opened_until') or '-1')
local half_open = opened >= 0 and opened <= tonumber(ARGV[1])
if failures >= tonumber(ARGV[2]) or half_open then
  redis.call('HSET', KEYS[1], 'opened_until', ARGV[3])
  redis.call('HDEL', KEYS[1], 'probe_until')
  return 'open'
end
if opened >= 0 then return 'open' end
return 'closed'
"""


# KEYS: the batch's window counters, then its targets' breakers. ARGV: how many counters, now,
# each counter's lifetime, then seven values per message: its three counters (indexes into
# KEYS), their limits (-1: none), its breaker (index among the breakers; 0: none) or -1 when
# it is not to be counted. Returns the counters as they were, which messages it counted, and
# each breaker's failures, opened_until, probe_until.
_GATHER = """
local n = tonumber(ARGV[1])
local now = tonumber(ARGV[2])
local before, counts, breakers, counted = {}, {}, {}, {}
for i = 1, n do
  before[i] = tonumber(redis.call('GET', KEYS[i]) or '0')
  counts[i] = before[i]
end
for i = n + 1, #KEYS do
  breakers[i - n] = redis.call('HMGET', KEYS[i], 'failures', 'opened_until', 'probe_until')
end
local first = 3 + n
for m = 0, (#ARGV - first + 1) / 7 - 1 do
  local at = first + m * 7
  local breaker = tonumber(ARGV[at + 6])
  local ok = breaker >= 0
  if breaker > 0 then
    local opened = tonumber(breakers[breaker][2] or '-1')
    local probe = tonumber(breakers[breaker][3] or '0')
    if opened >= 0 and (opened > now or probe > now) then ok = false end
  end
  for j = 0, 2 do
    local limit = tonumber(ARGV[at + 3 + j])
    if ok and limit >= 0 and counts[tonumber(ARGV[at + j])] >= limit then ok = false end
  end
  if ok then
    for j = 0, 2 do
      local k = tonumber(ARGV[at + j])
      counts[k] = counts[k] + 1
    end
  end
  counted[m + 1] = ok and 1 or 0
end
for i = 1, n do
  if counts[i] ~= before[i] then
    redis.call('INCRBY', KEYS[i], counts[i] - before[i])
    redis.call('EXPIRE', KEYS[i], tonumber(ARGV[2 + i]))
  end
end
return {before, counted, breakers}
"""


def _lifetime(key: str) -> int:
    return (HOUR if ":h:" in key else MINUTE) + 5


class _RedisWindows(WindowCounts):
    """Redis counts as it goes: the batch's script counted the messages it could; any other
    reservation is one atomic script of its own."""

    def __init__(self, counts: dict[str, int], state: RedisState, held: dict[int, Windows]):
        super().__init__(counts)
        self.state = state
        self.held = held

    def reserve(
        self,
        windows: Windows,
        limits: RateLimits,
        target_limits: RateLimits,
        *,
        ask: int | None = None,
    ) -> bool:
        checks = _checks(windows, limits, target_limits)
        held = self.held.pop(ask, None) if ask is not None else None
        if held == windows:
            ok = True
        else:
            if held is not None:  # counted for another target (a redirect): give it back
                self.state.release([held])
            ok = bool(
                self.state._reserve(
                    keys=[self.state.prefix + key for key, _ in checks],
                    args=[
                        *(_limit(limit) for _, limit in checks),
                        *(_lifetime(k) for k, _ in checks),
                    ],
                )
            )
        if ok:
            for key, _ in checks:
                self.counts[key] = self.get(key) + 1
        else:
            self.counts.update(self.state.counts([key for key, _ in checks]))
        return ok

    def save(self) -> None:
        # Every reservation was written as it was made; a message counted by the batch's
        # script and refused after all (rare: a reservation made since moved a window past
        # its limit) gives its count back.
        if self.held:
            self.state.release(self.held.values())
            self.held.clear()


class RedisState(PolicyState):
    prefix = "a2ahub:policy:"

    def __init__(self, url: str) -> None:
        import redis

        self.redis: Any = redis.Redis.from_url(url, decode_responses=True)
        self._gather = self.redis.register_script(_GATHER)
        self._reserve = self.redis.register_script(_RESERVE)
        self._claim = self.redis.register_script(_CLAIM)
        self._fail = self.redis.register_script(_FAIL)

    def counts(self, keys: Iterable[str]) -> dict[str, int]:
        keys = list(dict.fromkeys(keys))
        if not keys:
            return {}
        values = self.redis.mget([self.prefix + key for key in keys])
        return {
            key: int(value) for key, value in zip(keys, values, strict=True) if value is not None
        }

    def release(self, held: Iterable[Windows]) -> None:
        """Take back counts made for messages that were not sent."""
        pipe = self.redis.pipeline(transaction=False)
        for windows in held:
            for key in (windows.caller_minute, windows.caller_hour, windows.target_minute):
                pipe.decr(self.prefix + key)
        pipe.execute()

    def gather(
        self, asks: Sequence[Ask], now: float, *, breakers: bool
    ) -> tuple[WindowCounts, dict[str, BreakerView]]:
        """One round trip: the `_GATHER` script."""
        if not asks:
            return _RedisWindows({}, self, {}), {}
        keys: dict[str, int] = {}
        targets: dict[str, int] = {}
        plan: list[Any] = []
        for a in asks:
            checks = _checks(a.windows, a.limits, a.target_limits)
            plan += [keys.setdefault(key, len(keys) + 1) for key, _ in checks]
            plan += [_limit(limit) for _, limit in checks]
            breaker = targets.setdefault(a.target, len(targets) + 1) if breakers else 0
            plan.append(breaker if a.reserve else -1)
        before, counted, found = self._gather(
            keys=[
                *(self.prefix + key for key in keys),
                *(f"{self.prefix}breaker:{target}" for target in (targets if breakers else ())),
            ],
            args=[len(keys), now, *(_lifetime(key) for key in keys), *plan],
        )
        counts = {key: int(value) for key, value in zip(keys, before, strict=True) if value}
        held = {i: a.windows for i, (a, ok) in enumerate(zip(asks, counted, strict=True)) if ok}
        views = {
            target: breaker_view(
                int(failures or 0),
                float(opened) if opened else None,
                float(probe) if probe else None,
                now,
            )
            for target, (failures, opened, probe) in zip(targets, found, strict=True)
            if failures or opened
        }
        return _RedisWindows(counts, self, held), views

    def tripped(self, now: float) -> dict[str, BreakerView]:
        prefix = f"{self.prefix}breaker:"
        keys = [key.removeprefix(prefix) for key in self.redis.scan_iter(prefix + "*", count=500)]
        return self.breakers(keys, now)

    def breakers(self, targets: Iterable[str], now: float) -> dict[str, BreakerView]:
        targets = list(dict.fromkeys(targets))
        if not targets:
            return {}
        pipe = self.redis.pipeline(transaction=False)
        for target in targets:
            pipe.hgetall(f"{self.prefix}breaker:{target}")
        found = {}
        for target, data in zip(targets, pipe.execute(), strict=True):
            if data:
                probe = data.get("probe_until")
                opened = data.get("opened_until")
                found[target] = breaker_view(
                    int(data.get("failures", 0)),
                    float(opened) if opened else None,
                    float(probe) if probe else None,
                    now,
                )
        return found

    def claim_probe(self, target: str, now: float, hold_seconds: float) -> bool:
        key = f"{self.prefix}breaker:{target}"
        return bool(self._claim(keys=[key], args=[now, now + hold_seconds]))

    def record(self, target: str, ok: bool, breaker: Breaker, now: float) -> str:
        key = f"{self.prefix}breaker:{target}"
        if ok:
            self.redis.delete(key)
            return "closed"
        result = self._fail(
            keys=[key], args=[now, breaker.failure_threshold, now + breaker.cooldown_seconds]
        )
        return str(result)

    def reset(self) -> None:
        """Forget every counter and breaker (tests)."""
        for key in self.redis.scan_iter(self.prefix + "*"):
            self.redis.delete(key)


@lru_cache(maxsize=1)
def policy_state() -> PolicyState:
    """The state store of this deployment: Redis when configured, else the database."""
    if settings.REDIS_URL:
        return RedisState(settings.REDIS_URL)
    return DatabaseState()


def retry_seconds(value: float | None) -> int | None:
    return None if value is None else max(1, math.ceil(value))
