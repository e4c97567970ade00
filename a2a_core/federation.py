"""Hubs that call each other: a hub's delegation chain, sent along to the agents it calls and
taken from a trusted peer hub.

With `HUB_ID` set, every call the hub forwards carries `A2A-Hub-Chain`: the task's path (the
original caller first, the agent called last), each entry `<hub id>/<agent>`. A hub takes that
header only from a caller an admin trusts as a peer hub (`a2a agent peer trust`): the task then
starts with the peer's chain (its own entries back in its own names), so the policy sees who
really asked and a loop that runs across hubs is refused as any loop is. From anyone else, and
when malformed, the header is ignored.
"""

from __future__ import annotations

import re

from django.conf import settings

HEADER = "A2A-Hub-Chain"
MAX_ENTRIES = 32
_ENTRY = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}/[a-z0-9][a-z0-9_-]{0,63}$")


def chain_header(path: list[str]) -> str:
    """The header value for a task's `path` ('' when this hub has no HUB_ID)."""
    hub_id = settings.HUB_ID
    if not hub_id:
        return ""
    return ",".join(entry if "/" in entry else f"{hub_id}/{entry}" for entry in path)


def peer_chain(value: str) -> tuple[str, ...]:
    """A trusted peer's chain as this hub names it: its entries for this hub's agents as
    their slugs, the others as `<hub id>/<agent>`; () when there is none or it is malformed."""
    hub_id = settings.HUB_ID
    if not hub_id or not value or len(value) > MAX_ENTRIES * 130:
        return ()
    entries = [entry.strip() for entry in value.split(",")]
    if len(entries) > MAX_ENTRIES or not all(_ENTRY.match(entry) for entry in entries):
        return ()
    own = f"{hub_id}/"
    return tuple(entry.removeprefix(own) for entry in entries)
