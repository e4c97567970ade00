"""`a2a issuer add|list|remove`: identity providers whose JWTs agents may sign in with."""

from __future__ import annotations

import argparse
import json
from typing import Any

from a2a_core import selectors
from a2a_core.cli.output import fail, hub_error, table
from a2a_core.errors import HubError
from a2a_core.services import identity


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("issuer", help="trust identity providers whose JWTs agents sign in with")
    issuer_sub = p.add_subparsers(dest="issuer_command", required=True, metavar="add|list|remove")

    s = issuer_sub.add_parser(
        "add", help="trust ISSUER and let its tokens for a subject (or a claim) sign in as AGENT"
    )
    s.add_argument("issuer", help="the tokens' `iss`, exactly (e.g. https://login.example.com/)")
    s.add_argument("--jwks-url", required=True, help="where the issuer publishes its keys")
    s.add_argument("--audience", required=True, help="the `aud` its tokens for this hub carry")
    s.add_argument("--agent", required=True, metavar="SLUG", help="the agent they sign in as")
    who = s.add_mutually_exclusive_group(required=True)
    who.add_argument("--subject", help="the token's `sub` (e.g. the OAuth2 client id)")
    who.add_argument("--claim", metavar="NAME=VALUE", help="another claim instead of `sub`")
    s.set_defaults(handler=add)

    s = issuer_sub.add_parser("list", help="list trusted issuers and who signs in with them")
    s.add_argument("--json", action="store_true", help="one JSON object per issuer")
    s.set_defaults(handler=list_issuers)

    s = issuer_sub.add_parser("remove", help="stop trusting ISSUER (or only for one agent)")
    s.add_argument("issuer")
    s.add_argument("--agent", metavar="SLUG", help="only stop mapping its tokens to this agent")
    s.set_defaults(handler=remove)


def _claim(args: argparse.Namespace) -> tuple[str, str]:
    if args.subject is not None:
        return "sub", args.subject
    name, sep, value = args.claim.partition("=")
    if not sep or not name:
        raise fail(f"--claim must be NAME=VALUE, got {args.claim!r}")
    return name, value


def add(args: argparse.Namespace, out: Any) -> None:
    claim, value = _claim(args)
    try:
        agent = selectors.agent_get(slug=args.agent)
        identity.issuer_trust(
            issuer=args.issuer,
            jwks_url=args.jwks_url,
            audience=args.audience,
            agent=agent,
            claim=claim,
            value=value,
            actor_label="cli",
        )
    except HubError as exc:
        raise hub_error(exc) from None
    out.write(
        f"{agent.slug} signs in with {args.issuer} tokens whose {claim} is {value!r} "
        f"(audience {args.audience!r}, keys from {args.jwks_url})"
    )


def list_issuers(args: argparse.Namespace, out: Any) -> None:
    issuers = identity.issuer_list()
    if args.json:
        for row in issuers:
            document = {
                "issuer": row.issuer,
                "jwksUrl": row.jwks_url,
                "audience": row.audience,
                "agents": [
                    {"claim": m.claim, "value": m.value, "agent": m.agent.slug}
                    for m in row.mappings.all()
                ],
            }
            out.write(json.dumps(document))
        return
    rows = [
        [row.issuer, row.audience, f"{m.claim}={m.value}", m.agent.slug, row.jwks_url]
        for row in issuers
        for m in row.mappings.all()
    ] + [
        [row.issuer, row.audience, "-", "-", row.jwks_url]
        for row in issuers
        if not row.mappings.all()
    ]
    out.write(table(["ISSUER", "AUDIENCE", "CLAIM", "AGENT", "JWKS"], rows))


def remove(args: argparse.Namespace, out: Any) -> None:
    try:
        agent = selectors.agent_get(slug=args.agent) if args.agent else None
        removed = identity.issuer_remove(issuer=args.issuer, agent=agent, actor_label="cli")
    except HubError as exc:
        raise hub_error(exc) from None
    if agent is None:
        out.write(f"{args.issuer} is no longer trusted ({removed} mapping(s) removed)")
    else:
        out.write(f"{agent.slug} no longer signs in with {args.issuer} tokens ({removed} removed)")
