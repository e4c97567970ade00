"""`a2a agent credentials set|show|clear SLUG`: what the hub calls an agent behind its own
auth with. Secrets are read from an environment variable or stdin, never from arguments (which
other users of the machine can see in the process list), and never shown again."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from django.conf import settings

from a2a_core import agent_cache, selectors
from a2a_core.cli.output import acting, ago, fail, hub_error
from a2a_core.errors import HubError
from a2a_core.schemas.credentials import MAX_SECRET
from a2a_core.services.credentials import (
    agent_credentials_clear,
    agent_credentials_set,
    agent_peer_trust,
)


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("agent", help="one agent's settings: the credential the hub calls it with")
    agent_sub = p.add_subparsers(dest="agent_command", required=True, metavar="credentials|peer")
    c = agent_sub.add_parser(
        "credentials", help="the credential the hub calls an agent behind its own auth with"
    )
    cred_sub = c.add_subparsers(dest="credentials_command", required=True, metavar="set|show|clear")

    s = cred_sub.add_parser(
        "set",
        help="set (or replace) it; the secret from --from-env or --stdin, never an argument",
    )
    s.add_argument("slug")
    s.add_argument(
        "--scheme",
        help="the name of the scheme in the agent card's securitySchemes (needed when it "
        "declares several)",
    )
    source = s.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--from-env",
        metavar="VAR",
        help="read the secret (bearer token, API key or OAuth2 client secret) from this "
        "environment variable",
    )
    source.add_argument("--stdin", action="store_true", help="read the secret from stdin")
    s.add_argument("--client-id", default="", help="OAuth2: the hub's client id")
    s.add_argument(
        "--token-url", default="", help="OAuth2: the token endpoint (default: the card's)"
    )
    s.add_argument(
        "--scope", dest="scopes", action="append", help="OAuth2: a scope to ask for (repeatable)"
    )
    s.set_defaults(handler=credentials_set)

    for name, handler, text in (
        ("show", credentials_show, "which scheme is set, when and by whom (never the secret)"),
        ("clear", credentials_clear, "forget it: the hub calls the agent without one"),
    ):
        q = cred_sub.add_parser(name, help=text)
        q.add_argument("slug")
        q.set_defaults(handler=handler)

    peer = agent_sub.add_parser(
        "peer", help="trust an agent as another hub: record and judge the chain it sends"
    )
    peer_sub = peer.add_subparsers(dest="peer_command", required=True, metavar="trust|untrust")
    for name, trusted, text in (
        ("trust", True, "take the caller chain this agent (another hub) sends as who asked"),
        ("untrust", False, "ignore it again, as from any agent"),
    ):
        q = peer_sub.add_parser(name, help=text)
        q.add_argument("slug")
        q.set_defaults(handler=peer_trust, trusted=trusted)


def _agent(slug: str) -> Any:
    try:
        return selectors.agent_get(slug=slug)
    except HubError as exc:
        raise hub_error(exc) from None


def read_secret(env: str | None, *, stdin: bool) -> str | None:
    """The secret from the environment variable `env`, or from stdin (one line, its line
    break dropped); None when neither is asked for."""
    if env:
        secret = os.environ.get(env)
        if secret is None:
            raise fail(f"the environment variable {env[:100]} is not set")
        return secret
    if not stdin:
        return None
    secret = sys.stdin.read(MAX_SECRET + 2)
    if secret.endswith("\n"):
        secret = secret[:-1].removesuffix("\r")
    return secret


def credentials_set(args: argparse.Namespace, out: Any) -> None:
    agent = _agent(args.slug)
    try:
        agent = agent_credentials_set(
            agent=agent,
            scheme=args.scheme,
            secret=read_secret(args.from_env, stdin=args.stdin) or "",
            client_id=args.client_id,
            token_url=args.token_url,
            scopes=args.scopes,
            **acting(args),
        )
    except HubError as exc:
        raise hub_error(exc) from None
    agent_cache.wait_until_seen()  # every worker calls it with this credential once this returns
    out.write(f"set the credential {agent.slug} is called with (scheme {agent.credential_scheme})")


def credentials_show(args: argparse.Namespace, out: Any) -> None:
    agent = _agent(args.slug)
    out.write(credential_line(agent))
    if agent.auth_failure:
        out.write(f"last refusal ({ago(agent.auth_failure_at)}): {agent.auth_failure}")


def credential_line(agent: Any) -> str:
    if agent.credential_sealed:
        line = (
            f"{agent.slug}: set (scheme {agent.credential_scheme}, {agent.credential_kind}), "
            f"{ago(agent.credential_set_at)} by {agent.credential_set_by or 'unknown'}"
        )
    else:
        line = f"{agent.slug}: no credential set (called without one)"
    return line + (" (trusted as a peer hub)" if agent.peer_hub else "")


def credentials_clear(args: argparse.Namespace, out: Any) -> None:
    agent = _agent(args.slug)
    if agent_credentials_clear(agent=agent, **acting(args)):
        agent_cache.wait_until_seen()
        out.write(f"cleared the credential of {agent.slug}; it is called without one")
    else:
        out.write(f"{agent.slug} has no credential set")


def peer_trust(args: argparse.Namespace, out: Any) -> None:
    agent = _agent(args.slug)
    changed = agent_peer_trust(agent=agent, trusted=args.trusted, **acting(args))
    if changed:
        agent_cache.wait_until_seen()  # every worker judges its calls so once this returns
    if args.trusted:
        out.write(
            f"{agent.slug} is trusted as a peer hub"
            + ("" if changed else " already")
            + (
                ""
                if settings.HUB_ID
                else " (this hub has no HUB_ID: it takes no chain until one is set)"
            )
        )
    else:
        out.write(f"{agent.slug} is {'no longer' if changed else 'not'} trusted as a peer hub")
