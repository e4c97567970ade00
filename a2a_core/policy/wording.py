"""A policy change in words: "director → ledger: allow → deny", not `matrix[1].action`.

Pure: two policy documents in, one line per change out, in the order an editor shows them
(routing, the matrix, limits, the chain rules, breakers, approvals, redirects, content rules).
Also who an automatic decision is by: "policy v3 by alice" (`decided_by_policy`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from a2a_core.errors import ValidationFailed
from a2a_core.schemas.policy import Policy, parse_policy

LIMIT_WORDS = {
    "perMinute": "messages per minute",
    "perHour": "messages per hour",
    "concurrent": "tasks in flight",
    "incomingPerMinute": "incoming per minute",
    "incomingConcurrent": "incoming calls at once",
    "inboxQueue": "inbox queue",
    "questionDeadlineSeconds": "question deadline (s)",
}
# What None means, where it is not "no limit".
NONE_WORDS = {"questionDeadlineSeconds": "the hub's default"}
BREAKER_WORDS = {
    "enabled": "on",
    "failureThreshold": "failures before it opens",
    "cooldownSeconds": "cooldown (s)",
}
ACTION_WORDS = {"allow": "allow", "deny": "deny", "approve": "needs approval"}


def decided_by_policy(version: int | None, author: str = "") -> str:
    """Who stands behind a decision policy version `version` made: the version and the person
    who published it ("policy v3 by alice"); the hub's default policy (version 0) is nobody's.
    '' when the version is not known (a message recorded before versions were kept)."""
    if version is None:
        return ""
    if version == 0:
        return "the default policy (v0)"
    return f"policy v{version} by {author}" if author else f"policy v{version}"


def _value(value: Any, *, none: str = "no limit") -> str:
    if value is None:
        return none
    if value is True:
        return "yes"
    if value is False:
        return "no"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, list):
        return ", ".join(str(v) for v in value) if value else "any"
    return str(value)


def _changed(what: str, old: Any, new: Any, *, none: str = "no limit") -> str:
    return f"{what}: {_value(old, none=none)} → {_value(new, none=none)}"


def _only(rule: dict[str, Any]) -> str:
    only = [f"{key} {', '.join(rule[key])}" for key in ("kinds", "skills") if rule.get(key)]
    return f" (only {'; '.join(only)})" if only else ""


def _matrix(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[str]:
    def keyed(rules: list[dict[str, Any]]) -> dict[tuple[Any, ...], dict[str, Any]]:
        return {
            (
                r["caller"],
                r["target"],
                tuple(r.get("kinds", ())),
                tuple(r.get("skills", ())),
                tuple(r.get("via", ())),
            ): r
            for r in rules
        }

    before, after = keyed(old), keyed(new)
    lines = []
    for key in [*before, *(k for k in after if k not in before)]:
        # A rule with `via` grants (or refuses) a chain's root caller the target.
        pair = f"{key[0]} → {key[1]}" + (f" via {', '.join(key[4])}" if key[4] else "")
        was, now = before.get(key), after.get(key)
        if was is not None and now is not None:
            if was["action"] != now["action"]:
                rule = f"{pair}{_only(now)}"
                lines.append(
                    _changed(rule, ACTION_WORDS[was["action"]], ACTION_WORDS[now["action"]])
                )
        elif now is not None:
            lines.append(f"{pair}{_only(now)}: {ACTION_WORDS[now['action']]} (new rule)")
        elif was is not None:
            lines.append(f"{pair}{_only(was)}: rule removed (was {ACTION_WORDS[was['action']]})")
    return lines


def _fields(
    what: str, words: dict[str, str], old: dict[str, Any], new: dict[str, Any]
) -> list[str]:
    return [
        _changed(f"{what}{word}", old.get(key), new.get(key), none=NONE_WORDS.get(key, "no limit"))
        for key, word in words.items()
        if old.get(key) != new.get(key)
    ]


def _named_rules(
    what: str, name: Callable[[dict[str, Any]], str], old: list[Any], new: list[Any]
) -> list[str]:
    lines = [f"{what} removed: {name(rule)}" for rule in old if rule not in new]
    lines += [f"{what} added: {name(rule)}" for rule in new if rule not in old]
    return lines


def _approval(rule: dict[str, Any]) -> str:
    return str(rule["name"])


def _redirect(rule: dict[str, Any]) -> str:
    named = rule.get("to") or []
    if isinstance(named, str):  # documents from before a rule named several agents
        named = [named]
    to = " or ".join(named) or "another agent with the skill"
    return f"{', '.join(rule['targets'])} when {', '.join(rule['when'])} → {to}"


CONTENT_ACTION_WORDS = {"hold": "held for a human", "redact": "redacted", "reject": "rejected"}


def _content_rule(rule: dict[str, Any]) -> str:
    """ "cards: card in requests → redacted"."""
    what = rule["detect"] if rule["detect"] != "pattern" else f"pattern {rule.get('pattern')}"
    where = {"request": "requests", "answer": "answers", "both": "requests and answers"}
    scope = [
        f"{key} {', '.join(rule[key])}"
        for key in ("callers", "targets", "kinds", "skills")
        if rule.get(key)
    ]
    only = f" (only {'; '.join(scope)})" if scope else ""
    action = CONTENT_ACTION_WORDS[rule["action"]]
    return f"{rule['name']}: {what} in {where[rule['direction']]}{only} → {action}"


def _content(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[str]:
    before = {rule["name"]: rule for rule in old}
    after = {rule["name"]: rule for rule in new}
    lines = [
        f"content rule removed: {_content_rule(r)}" for n, r in before.items() if n not in after
    ]
    for name, rule in after.items():
        was = before.get(name)
        if was is None:
            lines.append(f"content rule added: {_content_rule(rule)}")
        elif was != rule:
            lines.append(f"content rule changed: {_content_rule(was)} ⇒ {_content_rule(rule)}")
    return lines


def policy_changes(old: Any, new: Any) -> list[str]:
    """The changes from policy document `old` to `new`, in words; documents that do not
    validate are compared as given (missing fields take their defaults either way)."""
    before, after = _normal(old), _normal(new)
    lines = []
    if before["routingEnabled"] != after["routingEnabled"]:
        states = {True: "running", False: "stopped"}
        lines.append(
            f"routing: {states[before['routingEnabled']]} → {states[after['routingEnabled']]}"
        )
    if before["defaultAction"] != after["defaultAction"]:
        lines.append(
            _changed(
                "pairs without a rule",
                ACTION_WORDS[before["defaultAction"]],
                ACTION_WORDS[after["defaultAction"]],
            )
        )
    lines += _matrix(before["matrix"], after["matrix"])
    lines += _fields("limits: ", LIMIT_WORDS, before["limits"], after["limits"])
    for slug in sorted(set(before["agentLimits"]) | set(after["agentLimits"])):
        was, now = before["agentLimits"].get(slug), after["agentLimits"].get(slug)
        if was is None:
            lines.append(f"{slug}'s own limits added")
            was = before["limits"]
        if now is None:
            lines.append(f"{slug}'s own limits removed")
            continue
        lines += _fields(f"{slug}'s limits: ", LIMIT_WORDS, was, now)
    if before["maxHops"] != after["maxHops"]:
        lines.append(
            _changed("longest delegation chain (hops)", before["maxHops"], after["maxHops"])
        )
    if before["loopDetection"] != after["loopDetection"]:
        lines.append(_changed("loop detection", before["loopDetection"], after["loopDetection"]))
    lines += _fields("circuit breaker: ", BREAKER_WORDS, before["breaker"], after["breaker"])
    lines += _named_rules("approval rule", _approval, before["approvals"], after["approvals"])
    lines += _named_rules("redirect rule", _redirect, before["redirects"], after["redirects"])
    lines += _content(before.get("contentRules", []), after.get("contentRules", []))
    return lines


def _normal(document: Any) -> dict[str, Any]:
    defaults = Policy().as_document()
    if not isinstance(document, dict):
        return defaults
    try:
        return parse_policy(document).as_document()
    except ValidationFailed:  # a stored document from an older schema: compare what it says
        return {**defaults, **document}
