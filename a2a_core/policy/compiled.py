"""A policy document compiled for the judgement: its rules indexed so that a lookup costs the
same with 10 rules or 10,000 (`a2a_core.policy.decide` asks it).

Pure, like `decide`: only the policy document in, no ORM, no I/O, no clock.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from a2a_core.policy.content import ContentRules
from a2a_core.schemas.policy import ANY, ApprovalRule, MatrixRule, Policy, RateLimits, RedirectRule

if TYPE_CHECKING:
    from a2a_core.policy.decide import Facts


def _applies(rule: MatrixRule, kind: str, skill: str) -> bool:
    return (not rule.kinds or kind in rule.kinds) and (not rule.skills or skill in rule.skills)


class CompiledPolicy:
    """A policy indexed for constant-time lookups (10,000 matrix rules cost no more than 10)."""

    def __init__(self, policy: Policy, *, version: int = 0, author: str = "") -> None:
        self.policy = policy
        self.version = version
        # Who published this version (its author's name, or the label a command gave).
        self.author = author
        self._matrix: dict[tuple[str, str], list[MatrixRule]] = {}
        # Rules with `via`: only for a chain's root caller (`delegation_rule`).
        self._via: dict[tuple[str, str], list[MatrixRule]] = {}
        for rule in policy.matrix:
            rules = self._via if rule.via else self._matrix
            rules.setdefault((rule.caller, rule.target), []).append(rule)
        self.grants = bool(self._via)
        # The pairs a rule without `via` may deny: a delegated call whose root and target
        # match none of them (under a default that is not deny) needs no lookup of its own.
        self._default_denies = policy.default_action == "deny"
        self._may_deny = frozenset(
            (rule.caller, rule.target)
            for rule in policy.matrix
            if rule.action == "deny" and not rule.via
        )
        self._limits = dict(policy.agent_limits)
        self.content = ContentRules(policy.content_rules)

    def matrix_rule(self, caller: str, target: str, kind: str, skill: str) -> MatrixRule | None:
        """The most specific rule that applies to the pair; None when none does."""
        for key in ((caller, target), (caller, ANY), (ANY, target), (ANY, ANY)):
            for rule in self._matrix.get(key, ()):
                if _applies(rule, kind, skill):
                    return rule
        return None

    def matrix_action(self, caller: str, target: str, kind: str, skill: str) -> tuple[str, str]:
        """(action, why): the most specific rule wins; the default when none applies."""
        rule = self.matrix_rule(caller, target, kind, skill)
        if rule is None:
            return self.policy.default_action, "the default for unlisted pairs"
        return rule.action, f"matrix rule {rule.caller} -> {rule.target}"

    def may_deny(self, caller: str, target: str) -> bool:
        """Whether the matrix may deny the pair (False: it allows it, or needs approval)."""
        deny = self._may_deny
        return (
            self._default_denies
            or (caller, target) in deny
            or (caller, ANY) in deny
            or (ANY, target) in deny
            or (ANY, ANY) in deny
        )

    def delegation_rule(
        self, root: str, target: str, through: tuple[str, ...], kind: str, skill: str
    ) -> MatrixRule | None:
        """The most specific rule with `via` for `root` reaching `target` through the agents
        `through` (each must match one of its `via`); None when none applies."""
        for key in ((root, target), (root, ANY), (ANY, target), (ANY, ANY)):
            for rule in self._via.get(key, ()):
                if _applies(rule, kind, skill) and all(
                    ANY in rule.via or agent in rule.via for agent in through
                ):
                    return rule
        return None

    def limits_for(self, caller: str) -> RateLimits:
        return self._limits.get(caller, self.policy.limits)

    def approval_for(self, facts: Facts) -> ApprovalRule | None:
        for rule in self.policy.approvals:
            if (
                (not rule.kinds or facts.kind in rule.kinds)
                and (not rule.skills or facts.skill in rule.skills)
                and (not rule.priorities or facts.priority in rule.priorities)
                and (not rule.callers or ANY in rule.callers or facts.caller in rule.callers)
                and (not rule.targets or ANY in rule.targets or facts.target in rule.targets)
            ):
                return rule
        return None

    def redirect_rules(self, target: str, why: str) -> list[RedirectRule]:
        return [
            rule
            for rule in self.policy.redirects
            if why in rule.when and (ANY in rule.targets or target in rule.targets)
        ]
