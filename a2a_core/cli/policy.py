"""`a2a policy show|set|history|rollback|dry-run`: the policy from a terminal."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from a2a_core.cli.output import acting, ago, fail, hub_error, read_json, table
from a2a_core.errors import HubError
from a2a_core.models import PolicyVersion
from a2a_core.schemas.policy import default_policy
from a2a_core.selectors.policy import policy_versions_changes
from a2a_core.selectors.policy_dry_run import policy_dry_run
from a2a_core.services import policy as policy_services


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("policy", help="show, change, roll back or dry-run the routing policy")
    policy_sub = p.add_subparsers(
        dest="policy_command", required=True, metavar="show|set|history|rollback|dry-run"
    )

    s = policy_sub.add_parser("show", help="print the active policy (or another version) as JSON")
    s.add_argument("--version", type=int, metavar="N", help="show version N instead")
    s.set_defaults(handler=show)

    s = policy_sub.add_parser("set", help="validate FILE and make it the active policy")
    s.add_argument("file", type=Path, help="the policy document, JSON ('-' for stdin)")
    s.add_argument("--reason", required=True, help="why it changes; kept in the history")
    s.set_defaults(handler=set_policy)

    s = policy_sub.add_parser("history", help="list the policy versions, newest first")
    s.add_argument("--limit", type=int, default=20, help="how many versions (default 20)")
    s.add_argument("--json", action="store_true", help="one JSON object per version, with diffs")
    s.set_defaults(handler=history)

    s = policy_sub.add_parser("rollback", help="make version N's document active again")
    s.add_argument("number", type=int, metavar="N")
    s.add_argument("--reason", required=True, help="why; kept in the history")
    s.set_defaults(handler=rollback)

    s = policy_sub.add_parser(
        "dry-run", help="replay recent traffic through FILE and report what would change"
    )
    s.add_argument("file", type=Path, help="the draft policy, JSON ('-' for stdin)")
    s.add_argument(
        "--last", type=int, default=1000, metavar="N", help="replay the last N messages (1000)"
    )
    s.add_argument("--json", action="store_true", help="print the report as JSON")
    s.set_defaults(handler=dry_run)


def show(args: argparse.Namespace, out: Any) -> None:
    if args.version is None:
        version = policy_services.policy_active_version()
        document = version.document if version else default_policy().as_document()
    else:
        version = PolicyVersion.objects.filter(number=args.version).first()
        if version is None:
            raise fail(f"there is no policy version {args.version}")
        document = version.document
    out.write(json.dumps(document, indent=2))


def _published(version: PolicyVersion, out: Any) -> None:
    changes = policy_versions_changes([version])[version.number]
    count = len(changes)
    out.write(f"policy v{version.number} is active ({count} change{'s' if count != 1 else ''})")
    for line in changes:
        out.write(f"  {line}")


def set_policy(args: argparse.Namespace, out: Any) -> None:
    document = read_json(args.file)
    try:
        version = policy_services.policy_publish(
            document=document, reason=args.reason, **acting(args)
        )
    except HubError as exc:
        raise hub_error(exc) from None
    _published(version, out)


def rollback(args: argparse.Namespace, out: Any) -> None:
    try:
        version = policy_services.policy_rollback(
            number=args.number, reason=args.reason, **acting(args)
        )
    except HubError as exc:
        raise hub_error(exc) from None
    _published(version, out)


def history(args: argparse.Namespace, out: Any) -> None:
    versions = list(PolicyVersion.objects.select_related("author")[: max(args.limit, 1)])
    changes = policy_versions_changes(versions)
    if args.json:
        for v in versions:
            out.write(
                json.dumps(
                    {
                        "number": v.number,
                        "active": v.is_active,
                        "author": v.author.get_username() if v.author else v.author_label,
                        "createdAt": v.created_at.isoformat(),
                        "reason": v.reason,
                        "diff": v.diff,
                        "changes": changes[v.number],
                    }
                )
            )
        return
    if not versions:
        out.write("No policy published yet: the defaults apply (manage.py a2a policy show).")
        return
    out.write(
        table(
            ["VERSION", "ACTIVE", "AUTHOR", "WHEN", "CHANGES", "REASON"],
            [
                [
                    f"v{v.number}",
                    "*" if v.is_active else "",
                    (v.author.get_username() if v.author else v.author_label) or "-",
                    ago(v.created_at),
                    len(changes[v.number]),
                    v.reason.splitlines()[0] if v.reason else "",
                ]
                for v in versions
            ],
        )
    )


def dry_run(args: argparse.Namespace, out: Any) -> None:
    document = read_json(args.file)
    try:
        report = policy_dry_run(document=document, last=args.last)
    except HubError as exc:
        raise hub_error(exc) from None
    if args.json:
        out.write(json.dumps(report.as_dict(), indent=2))
        return
    out.write(
        f"replayed {report.messages} message{'s' if report.messages != 1 else ''}: "
        f"{report.changed} would be decided differently by the draft than by the active policy"
    )
    for transition, count in sorted(report.transitions.items(), key=lambda kv: -kv[1]):
        out.write(f"  {transition}: {count}")
    if report.reasons:
        out.write("by reason:")
        for reason, count in sorted(report.reasons.items(), key=lambda kv: -kv[1]):
            out.write(f"  {reason}: {count}")
    if report.pairs:
        out.write("by pair:")
        for pair, count in sorted(report.pairs.items(), key=lambda kv: -kv[1]):
            out.write(f"  {pair}: {count}")
    if report.examples:
        out.write("examples:")
        for e in report.examples:
            out.write(
                f"  {e['at']}  {e['caller']} -> {e['target']}  active: {e['before']}  draft: {e['after']}"
            )
    for note in report.notes:
        out.write(f"note: {note}")
