"""`a2a agents`, `a2a register`, `a2a suspend`/`resume`, `a2a token rotate`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from a2a_core import selectors
from a2a_core.cli.output import acting, ago, cut, fail, hub_error, read_json, table
from a2a_core.errors import HubError


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("agents", help="list registered agents")
    p.add_argument("--json", action="store_true", help="one JSON object per agent")
    p.add_argument(
        "--limit", type=int, default=500, metavar="N", help="how many, by name (default 500)"
    )
    p.set_defaults(handler=agents)

    p = sub.add_parser("register", help="register (or re-register) an agent from its card")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "card", type=Path, nargs="?", help="the agent card, a JSON file (A2A 1.0 or 0.3)"
    )
    source.add_argument(
        "--url",
        help="fetch the card from the agent (or another hub): its card's URL, or the URL "
        "its /.well-known/agent-card.json is under",
    )
    p.add_argument("--slug", help="the agent's id in the hub (default: from the card's name)")
    p.add_argument("--role", help="a short role, e.g. 'reviewer'")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument(
        "--inbox",
        dest="mode",
        action="store_const",
        const="inbox",
        help="the agent has no server: it connects to the hub for its work",
    )
    mode.add_argument(
        "--endpoint",
        dest="mode",
        action="store_const",
        const="endpoint",
        help="the hub forwards calls to the agent's own A2A server",
    )
    p.add_argument(
        "--scope",
        dest="scopes",
        action="append",
        help="a2a:call and/or a2a:receive (repeatable; default both)",
    )
    secret = p.add_mutually_exclusive_group()
    secret.add_argument(
        "--credential-from-env",
        metavar="VAR",
        help="the secret the hub calls the agent with (e.g. the token another hub issued), "
        "from this environment variable; see `a2a agent credentials set`",
    )
    secret.add_argument(
        "--credential-stdin", action="store_true", help="... read from stdin instead"
    )
    p.add_argument(
        "--credential-scheme",
        metavar="NAME",
        help="the card's scheme the credential answers (needed when it declares several)",
    )
    p.set_defaults(handler=register)

    p = sub.add_parser("suspend", help="stop routing to and from an agent; end its connections")
    p.add_argument("slug")
    p.add_argument("--reason", default="", help="why, for the audit log")
    p.set_defaults(handler=suspend)

    p = sub.add_parser("resume", help="lift a suspension")
    p.add_argument("slug")
    p.set_defaults(handler=resume)

    p = sub.add_parser("token", help="manage an agent's bearer token")
    token_sub = p.add_subparsers(dest="token_command", required=True, metavar="rotate")
    r = token_sub.add_parser("rotate", help="issue a new token; the old one stops working")
    r.add_argument("slug")
    r.set_defaults(handler=token_rotate)


def agents(args: argparse.Namespace, out: Any) -> None:
    """The agents as the dashboard's agents page shows them: the same status, mode and "last
    seen" (an endpoint agent is seen when it calls or answers, not only when it connects)."""
    from a2a_core.selectors.agent_board import agent_board

    if args.limit < 1:
        raise fail("--limit: must be 1 or more")
    rows = agent_board(limit=args.limit + 1)
    more = len(rows) > args.limit
    rows = rows[: args.limit]
    if args.json:
        for row in rows:
            summary = selectors.agent_summary(row.agent)
            summary.update(
                status=row.status,
                mode=row.mode,
                lastSeenAt=_iso(row.agent.last_seen_at),
                credential=row.agent.credential_scheme or None,
                authFailure=row.agent.auth_failure or None,
            )
            out.write(json.dumps(summary))
        if more:
            cut(f"{len(rows)} agents shown, more are registered: --limit {args.limit * 2}")
        return
    if not rows:
        out.write("No agents registered. Register one with: manage.py a2a register CARD.json")
        return
    out.write(
        table(
            ["AGENT", "STATUS", "MODE", "SKILLS", "CREDENTIAL", "LAST SEEN"],
            [
                [
                    a.agent.slug,
                    a.status,
                    a.mode,
                    ", ".join(a.skills) or "-",
                    (a.agent.credential_scheme or "-")
                    + (" (refused)" if a.agent.auth_failure else ""),
                    ago(a.agent.last_seen_at),
                ]
                for a in rows
            ],
        )
    )
    for a in rows:
        if a.agent.auth_failure:
            out.write(f"{a.agent.slug}: {a.agent.auth_failure} ({ago(a.agent.auth_failure_at)})")
    if more:
        cut(f"the first {len(rows)} agents by name are shown; more are registered: --limit N")


def _iso(moment: Any) -> str | None:
    return moment.isoformat() if moment is not None else None


def register(args: argparse.Namespace, out: Any) -> None:
    from a2a_core import agent_cache
    from a2a_core.cli.credentials import read_secret
    from a2a_core.services import agents as agent_services
    from a2a_core.services.credentials import agent_credentials_set

    if args.credential_stdin and str(args.card) == "-":
        raise fail("the card and the credential cannot both come from stdin")
    card = fetch_card(args.url) if args.url else read_json(args.card)
    # Read before registering: a missing variable leaves nothing half done.
    secret = read_secret(args.credential_from_env, stdin=args.credential_stdin)
    try:
        result = agent_services.agent_register(
            card=card,
            slug=args.slug,
            role=args.role,
            delivery_mode=args.mode,
            scopes=args.scopes,
            **acting(args),
        )
    except HubError as exc:
        raise hub_error(exc) from None
    agent = result.agent
    if result.converted_from:
        out.write(f"note: converted an A2A {result.converted_from} card to A2A 1.0")
    if result.signature:
        out.write(f"card signature: {result.signature}")
    if result.created:
        out.write(f"registered {agent.slug} ({agent.delivery_mode}, card v{agent.card_version})")
        out.write(f"token: {result.token}")
        out.write(
            "This token is shown once. Store it now; rotate it with: "
            f"manage.py a2a token rotate {agent.slug}"
        )
    elif result.changed:
        out.write(f"updated {agent.slug} (card v{agent.card_version}); its token is unchanged")
    else:
        out.write(f"{agent.slug} is already registered with this card; nothing changed")
    if secret is not None:
        try:
            agent = agent_credentials_set(
                agent=agent, scheme=args.credential_scheme, secret=secret, **acting(args)
            )
        except HubError as exc:
            raise fail(f"registered {agent.slug}, but its credential was not set: {exc}") from None
        agent_cache.wait_until_seen()
        out.write(
            f"set the credential {agent.slug} is called with (scheme {agent.credential_scheme})"
        )


CARD_PATH = "/.well-known/agent-card.json"
FETCH_SECONDS = 10.0


def fetch_card(url: str) -> Any:
    """The card served at `url` (a `.json` URL), or under it at /.well-known/agent-card.json,
    asked for as an A2A 1.0 client asks (`A2A-Version: 1.0`); a clear error naming the URL
    when it cannot be had."""
    import httpx

    where = url if urlsplit(url).path.endswith(".json") else url.rstrip("/") + CARD_PATH
    if urlsplit(where).scheme not in ("http", "https"):
        raise fail(f"--url must be an http(s) URL, got {url!r}")
    try:
        response = httpx.get(where, headers={"A2A-Version": "1.0"}, timeout=FETCH_SECONDS)
    except httpx.HTTPError as exc:
        raise fail(f"cannot fetch the card at {where}: {exc or type(exc).__name__}") from None
    if response.status_code != 200:
        raise fail(f"cannot fetch the card at {where}: it answered {response.status_code}")
    try:
        return response.json()
    except ValueError:
        raise fail(f"the answer at {where} is not JSON") from None


def _agent(slug: str) -> Any:
    try:
        return selectors.agent_get(slug=slug)
    except HubError as exc:
        raise hub_error(exc) from None


def suspend(args: argparse.Namespace, out: Any) -> None:
    from a2a_core import agent_cache
    from a2a_core.services import agents as agent_services

    agent = _agent(args.slug)
    if agent_services.agent_suspend(agent=agent, reason=args.reason, **acting(args)):
        agent_cache.wait_until_seen()  # every worker refuses it once this returns
        out.write(f"suspended {agent.slug}")
    else:
        out.write(f"{agent.slug} was already suspended")


def resume(args: argparse.Namespace, out: Any) -> None:
    from a2a_core.services import agents as agent_services

    agent = _agent(args.slug)
    if agent_services.agent_resume(agent=agent, **acting(args)):
        out.write(f"resumed {agent.slug}")
    else:
        out.write(f"{agent.slug} is not suspended")


def token_rotate(args: argparse.Namespace, out: Any) -> None:
    from a2a_core import agent_cache
    from a2a_core.services import agents as agent_services

    agent = _agent(args.slug)
    token = agent_services.agent_token_rotate(agent=agent, **acting(args))
    agent_cache.wait_until_seen()  # every worker refuses the old token once this returns
    out.write(f"token: {token}")
    out.write(
        f"The previous token of {agent.slug} no longer works; connections opened with it are "
        "closed. This token is shown once."
    )
