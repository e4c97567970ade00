"""The policy's shared state in Redis (scaled mode): see `a2a_core.storage.policy_state`.

A batch of calls costs one round trip: `_GATHER` reads the batch's windows and its targets'
breakers and counts, in order, every message that can pass, atomically across workers.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from a2a_core.policy.decide import BreakerView
from a2a_core.schemas.policy import Breaker, RateLimits
from a2a_core.storage.policy_state import (
    HOUR,
    MINUTE,
    Ask,
    PolicyState,
    WindowCounts,
    Windows,
    breaker_view,
    checks_of,
    script_limit,
)

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
        checks = checks_of(windows, limits, target_limits)
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
                        *(script_limit(limit) for _, limit in checks),
                        *(_lifetime(k) for k, _ in checks),
                    ],
                )
            )
        if ok:
            for key, _ in checks:
                self.counts[key] = self.get(key) + 1
        else:
            # The windows as they are now, less what the batch's script counted for messages
            # not judged yet: each is judged as if its own count were not made.
            fresh = self.state.counts([key for key, _ in checks])
            for other in self.held.values():
                for key in other.keys:
                    if key in fresh:
                        fresh[key] -= 1
            self.counts.update(fresh)
        return ok

    def save(self) -> None:
        # Every reservation was written as it was made; a message the batch's script counted
        # and the judgement refused after all (for a reason the guess did not foresee) gives
        # its count back.
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
            for key in windows.keys:
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
            checks = checks_of(a.windows, a.limits, a.target_limits)
            plan += [keys.setdefault(key, len(keys) + 1) for key, _ in checks]
            plan += [script_limit(limit) for _, limit in checks]
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
