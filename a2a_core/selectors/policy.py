"""Reads for the policy editor: the versions, one version, and the agents a policy can name."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from a2a_core.errors import NotFound
from a2a_core.models import Agent, PolicyVersion
from a2a_core.policy.wording import policy_changes
from a2a_core.schemas.policy import ANY, default_policy


@dataclass(frozen=True)
class AgentRef:
    """An agent as the policy editor names it: its slug, and its display name if registered."""

    slug: str
    name: str = ""
    registered: bool = True


def policy_versions(*, limit: int = 30) -> list[PolicyVersion]:
    """The newest `limit` versions, newest first, with their authors."""
    return list(PolicyVersion.objects.select_related("author").order_by("-number")[:limit])


def policy_version_count() -> int:
    return PolicyVersion.objects.count()


def policy_version_get(*, number: int) -> PolicyVersion:
    version = PolicyVersion.objects.select_related("author").filter(number=number).first()
    if version is None:
        raise NotFound(f"there is no policy version {number}")
    return version


def policy_agents(*, also: set[str] | frozenset[str] = frozenset()) -> list[AgentRef]:
    """Every registered agent, plus the slugs in `also` that are not registered (a policy may
    name an agent that has gone, or has not come yet), ordered by slug."""
    registered = {
        slug: AgentRef(slug=slug, name=name)
        for slug, name in Agent.objects.order_by("slug").values_list("slug", "name")
    }
    for slug in also - set(registered) - {ANY}:
        registered[slug] = AgentRef(slug=slug, registered=False)
    return sorted(registered.values(), key=lambda ref: ref.slug)


def policy_named_agents(document: dict[str, Any]) -> set[str]:
    """The agent slugs a policy document names anywhere (matrix, limits, approvals, redirects)."""
    names: set[str] = set()
    for rule in document.get("matrix", []):
        names.update((rule.get("caller", ""), rule.get("target", "")))
    names.update(document.get("agentLimits", {}))
    for rule in document.get("approvals", []):
        names.update(rule.get("callers", []))
        names.update(rule.get("targets", []))
    for rule in document.get("redirects", []):
        names.update(rule.get("targets", []))
        to = rule.get("to") or []
        # A list of agents; one agent (or null) in documents stored before lists.
        names.update([to] if isinstance(to, str) else to)
    return names - {ANY, ""}


def policy_versions_changes(versions: list[PolicyVersion]) -> dict[int, list[str]]:
    """What each of `versions` changed from the version before it, in words, by number."""
    numbers = {v.number - 1 for v in versions} - {v.number for v in versions}
    documents = {v.number: v.document for v in versions}
    documents.update(
        PolicyVersion.objects.filter(number__in=numbers).values_list("number", "document")
    )
    defaults = default_policy().as_document()
    return {
        v.number: policy_changes(documents.get(v.number - 1, defaults), v.document)
        for v in versions
    }
