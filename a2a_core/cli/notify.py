"""`a2a notify`: who is told when an escalation waits (webhooks in Slack or signed JSON
format, email addresses)."""

from __future__ import annotations

import argparse
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
    e.add_argument("address", metavar="ADDRESS")
    e.set_defaults(handler=add, format="")
    a = actions.add_parser("list", help="the targets, and how their last notifications went")
    a.set_defaults(handler=list_targets)
    a = actions.add_parser("remove", help="stop telling a target")
    a.add_argument("id", type=int, metavar="ID")
    a.set_defaults(handler=remove)
    a = actions.add_parser("test", help="send a test notification now and say how it went")
    a.add_argument("id", type=int, metavar="ID")
    a.set_defaults(handler=test)


def _fail(exc: HubError) -> Any:
    if isinstance(exc, ValidationFailed):
        return fail("; ".join([exc.message, *(str(p) for p in exc.problems)]))
    return hub_error(exc)


def add(args: argparse.Namespace, out: Any) -> None:
    try:
        target = service.notify_target_add(
            kind=args.kind, address=args.address, format=args.format, **acting(args)
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


def list_targets(args: argparse.Namespace, out: Any) -> None:
    targets = list(NotificationTarget.objects.all())
    if not targets:
        out.write("Nobody is told about escalations. Add: manage.py a2a notify add webhook URL")
        return
    out.write(
        table(
            ["ID", "KIND", "ADDRESS", "FORMAT", "LAST OK", "LAST ERROR", "GIVEN UP"],
            [
                [
                    t.pk,
                    t.kind,
                    t.shown_address,
                    t.format or "-",
                    ago(t.last_ok_at) if t.last_ok_at else "never",
                    f"{t.last_error} ({ago(t.last_error_at)})" if t.last_error else "-",
                    t.failures,
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
    """Send a test notification from this process, at once, and say how it went."""
    from a2a_core.delivery.notify import notify_send_now

    try:
        note = service.notify_test(target_id=args.id)
    except HubError as exc:
        raise _fail(exc) from None
    sent = notify_send_now(note.pk)
    if sent.state == NotificationState.SENT:
        kind = "email" if sent.target.kind == TargetKind.EMAIL else "POST"
        out.write(f"test {kind} to {sent.target.shown_address} delivered")
    else:
        raise fail(f"test to {sent.target.shown_address} failed: {sent.last_error}")
