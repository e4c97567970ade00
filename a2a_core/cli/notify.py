"""`a2a notify`: who is told when an escalation waits (webhooks in Slack or signed JSON
format, email addresses), how often (digests), about what (routing rules), who is told next
when nobody answers (pass-on), and a test sent by the running hub."""

from __future__ import annotations

import argparse
import time
from typing import Any

from a2a_core.cli.output import acting, ago, fail, hub_error, table
from a2a_core.errors import HubError, ValidationFailed
from a2a_core.models import NotificationState, NotificationTarget, TargetKind
from a2a_core.services import notify as service


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("notify", help="who is told when an escalation waits (webhook, email)")
    actions = p.add_subparsers(dest="notify_action", required=True, metavar="add|list|remove|test")
    a = actions.add_parser("add", help="tell a webhook or an email address about escalations")
    kinds = a.add_subparsers(dest="kind", required=True, metavar="webhook|email")
    w = kinds.add_parser("webhook", help="POST to a URL (Slack-compatible, or signed JSON)")
    w.add_argument("address", metavar="URL")
    w.add_argument(
        "--format",
        choices=["slack", "json"],
        default="slack",
        help='slack: {"text": ...} (default); json: the escalation, signed with an HMAC',
    )
    w.set_defaults(handler=add)
    e = kinds.add_parser("email", help="send an email (SMTP settings from the environment)")
    _options(w)
    e.add_argument("address", metavar="ADDRESS")
    _options(e)
    e.set_defaults(handler=add, format="")
    a = actions.add_parser(
        "set", help="change a target's digest interval, routing rules, pass-on or user"
    )
    a.add_argument("id", type=int, metavar="ID")
    _options(a)
    a.add_argument(
        "--everything", action="store_true", help="drop every routing rule (told about all)"
    )
    a.set_defaults(handler=change)
    a = actions.add_parser("list", help="the targets, and how their last notifications went")
    a.set_defaults(handler=list_targets)
    a = actions.add_parser("remove", help="stop telling a target")
    a.add_argument("id", type=int, metavar="ID")
    a.set_defaults(handler=remove)
    a = actions.add_parser(
        "test", help="have the running hub send a test notification now; say how it went"
    )
    a.add_argument("id", type=int, metavar="ID")
    a.add_argument(
        "--wait",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="how long to wait for the hub to try (default 30)",
    )
    a.set_defaults(handler=test)


def _options(p: Any) -> None:
    p.add_argument(
        "--digest",
        type=int,
        metavar="SECONDS",
        help="at most one message per this many seconds (default: HUB_NOTIFY_DIGEST_SECONDS)",
    )
    for name, metavar, what in (
        ("agent", "SLUG", "an agent involved (caller, target or asker)"),
        ("pair", "CALLER:TARGET", "a caller -> target pair"),
        ("kind", "KIND", "approval, input_required, or a message kind"),
        ("priority", "PRIORITY", "low, normal, high or urgent"),
        ("skill", "SKILL", "the task's skill"),
    ):
        p.add_argument(
            f"--{name}",
            action="append",
            metavar=metavar,
            dest=f"rule_{name}",
            help=f"only items with {what} (repeat for several; a rule given replaces that rule)",
        )
    p.add_argument("--pass-to", type=int, metavar="ID", help="tell this target next when...")
    p.add_argument(
        "--pass-after",
        type=float,
        metavar="MINUTES",
        help="...an item this target was told about is still undecided this many minutes later",
    )
    p.add_argument(
        "--user", metavar="USERNAME", help="email: its Approve/Reject links act as this hub user"
    )


RULE_ARGS = {
    "agent": "agents",
    "pair": "pairs",
    "kind": "kinds",
    "priority": "priorities",
    "skill": "skills",
}


def _given(args: argparse.Namespace, *, new: bool) -> dict[str, Any]:
    """The service's options from the flags given (`new`: a target being added)."""
    options: dict[str, Any] = {}
    if args.digest is not None:
        options["digest_seconds"] = args.digest
    rules = {
        key: getattr(args, f"rule_{flag}")
        for flag, key in RULE_ARGS.items()
        if getattr(args, f"rule_{flag}")
    }
    if rules or getattr(args, "everything", False):
        if not new:
            current = service.notify_target_rules(target_id=args.id)
            rules = {} if args.everything else {**current, **rules}
        options["rules"] = rules
    if args.pass_to is not None:
        options["pass_to"] = args.pass_to
    if args.pass_after is not None:
        options["pass_after_seconds"] = max(1, round(args.pass_after * 60))
    if args.user is not None:
        options["user"] = args.user
    return options


def _fail(exc: HubError) -> Any:
    if isinstance(exc, ValidationFailed):
        return fail("; ".join([exc.message, *(str(p) for p in exc.problems)]))
    return hub_error(exc)


def add(args: argparse.Namespace, out: Any) -> None:
    try:
        target = service.notify_target_add(
            kind=args.kind,
            address=args.address,
            format=args.format,
            **_given(args, new=True),
            **acting(args),
        )
    except HubError as exc:
        raise _fail(exc) from None
    out.write(f"added {target.kind} target {target.pk}: {target.shown_address}")
    if target.secret:
        out.write(f"signing secret: {target.secret}")
        out.write(
            "Bodies are signed like push notifications (X-A2A-Signature, HMAC-SHA256 keyed by "
            "this secret; see a2a_core/client/webhooks.py). It is shown once."
        )
    out.write(f"told: {target.how}")


def change(args: argparse.Namespace, out: Any) -> None:
    try:
        target = service.notify_target_update(
            target_id=args.id, **_given(args, new=False), **acting(args)
        )
    except HubError as exc:
        raise _fail(exc) from None
    out.write(f"target {target.pk}: {target.how}")


def list_targets(args: argparse.Namespace, out: Any) -> None:
    targets = list(NotificationTarget.objects.select_related("user"))
    if not targets:
        out.write("Nobody is told about escalations. Add: manage.py a2a notify add webhook URL")
        return
    out.write(
        table(
            ["ID", "KIND", "ADDRESS", "FORMAT", "LAST OK", "LAST ERROR", "GIVEN UP", "HOW"],
            [
                [
                    t.pk,
                    t.kind,
                    t.shown_address,
                    t.format or "-",
                    ago(t.last_ok_at) if t.last_ok_at else "never",
                    f"{t.last_error} ({ago(t.last_error_at)})" if t.last_error else "-",
                    t.failures,
                    t.how,
                ]
                for t in targets
            ],
        )
    )


def remove(args: argparse.Namespace, out: Any) -> None:
    try:
        target = service.notify_target_remove(target_id=args.id, **acting(args))
    except HubError as exc:
        raise _fail(exc) from None
    out.write(f"removed {target.kind} target {args.id}")


def test(args: argparse.Namespace, out: Any) -> None:
    """Queue a test notification for the running hub, wait for its first attempt, and say
    how it went: what the hub itself does, with its own settings and network."""
    try:
        note = service.notify_test(target_id=args.id)
    except HubError as exc:
        raise _fail(exc) from None
    deadline = time.monotonic() + max(args.wait, 0.0)
    while True:
        note.refresh_from_db()
        if note.attempts or note.state != NotificationState.PENDING:
            break
        if time.monotonic() > deadline:
            raise fail(
                f"no running hub sent the test within {args.wait:g}s: is the hub running "
                "(a2a serve, ./hub run) with this database? It stays queued and goes when one "
                "runs."
            )
        time.sleep(0.1)
    target = note.target
    if note.state == NotificationState.SENT:
        kind = "email" if target.kind == TargetKind.EMAIL else "POST"
        out.write(f"the hub sent a test {kind} to {target.shown_address}: delivered")
    else:
        raise fail(f"test to {target.shown_address} failed: {note.last_error}")
