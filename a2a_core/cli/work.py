"""`a2a tasks` and `a2a escalations`: the work in the hub, and the questions waiting for a human.

The services that decide are imported by the commands that decide: listing needs selectors
alone (the services pull in the delivery path, a second of every listing's start)."""

from __future__ import annotations

import argparse
import json
import secrets
from typing import Any

from django.core.management.base import CommandError
from django.utils import timezone

from a2a_core.cli.output import acting, ago, cut, fail, hub_error, table
from a2a_core.errors import HubError, ValidationFailed
from a2a_core.models import EscalationKind, TaskState
from a2a_core.selectors.audit import agent_ids
from a2a_core.selectors.escalations import escalation_inbox
from a2a_core.selectors.inbox_filter import Cursor, InboxFilter
from a2a_core.selectors.task_views import task_recent
from a2a_core.services.users import ROLES, user_create, user_set_role


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("tasks", help="the most recently updated tasks")
    p.add_argument("--agent", metavar="ID", help="tasks this agent calls or serves")
    p.add_argument("--state", help="tasks in this state (e.g. working, input-required, failed)")
    p.add_argument("--limit", type=int, default=50, metavar="N", help="how many (default 50)")
    p.add_argument("--json", action="store_true", help="one JSON object per task")
    p.set_defaults(handler=tasks)

    p = sub.add_parser("escalations", help="what waits for a human; answer or decide it")
    p.add_argument("--json", action="store_true", help="one JSON object per escalation")
    p.add_argument("--limit", type=int, default=100, metavar="N", help="how many (default 100)")
    p.add_argument(
        "--after", type=int, metavar="ID", help="the page after this escalation (paging)"
    )
    p.add_argument("--agent", metavar="ID", help="those this agent asks")
    p.add_argument(
        "--sort", choices=["priority", "deadline", "newest", "oldest"], default="priority"
    )
    p.set_defaults(handler=escalations)
    actions = p.add_subparsers(dest="action", metavar="ACTION")
    a = actions.add_parser("answer", help="answer an agent's question (input-required)")
    a.add_argument("id", type=int, metavar="ID")
    a.add_argument("text", metavar="TEXT")
    a.add_argument("--data", metavar="JSON", help="structured data, when the agent asked for it")
    a.set_defaults(handler=answer)
    a = actions.add_parser("approve", help="let a held message through")
    a.add_argument("id", type=int, metavar="ID")
    a.add_argument("--text", help="replace the message's text before it is delivered")
    a.set_defaults(handler=approve)
    a = actions.add_parser("redirect", help="send a held message to another agent")
    a.add_argument("id", type=int, metavar="ID")
    a.add_argument("to", metavar="AGENT")
    a.set_defaults(handler=redirect)
    a = actions.add_parser("reject", help="refuse a held message; the caller sees the reason")
    a.add_argument("id", type=int, metavar="ID")
    a.add_argument("reason", metavar="REASON")
    a.set_defaults(handler=reject)
    a = actions.add_parser("claim", help='mark an escalation as yours ("I\'m on it")')
    a.add_argument("id", type=int, metavar="ID")
    a.add_argument(
        "--take-over", action="store_true", help="take it even if someone else claimed it"
    )
    a.set_defaults(handler=claim)
    a = actions.add_parser("release", help="give a claim up")
    a.add_argument("id", type=int, metavar="ID")
    a.set_defaults(handler=release)


def tasks(args: argparse.Namespace, out: Any) -> None:
    agent_id = None
    if args.agent:
        agent_id = agent_ids([args.agent]).get(args.agent)
        if agent_id is None:
            raise fail(
                f"--agent: no agent {args.agent!r} is registered (see: manage.py a2a agents)"
            )
    if args.state and args.state not in TaskState.values:
        raise fail(
            f"--state: unknown state {args.state!r}; use one of {', '.join(TaskState.values)}"
        )
    _positive(args.limit, "--limit")
    found = task_recent(agent_id=agent_id, state=args.state or "", limit=args.limit + 1)
    if len(found) > args.limit:
        found = found[: args.limit]
        cut(f"the {args.limit} most recently updated tasks are shown; --limit N for more")
    if args.json:
        for task in found:
            out.write(
                json.dumps(
                    {
                        "id": task.pk,
                        "contextId": task.context_id,
                        "state": task.state,
                        "caller": task.caller.slug if task.caller else None,
                        "target": task.target.slug,
                        "skill": task.skill or None,
                        "parentId": task.parent_id,
                        "depth": task.depth,
                        "updatedAt": task.status_timestamp.isoformat(),
                        "reason": task.reason or None,
                        "summary": getattr(task, "first_summary", None),
                    },
                    ensure_ascii=False,
                )
            )
        return
    if not found:
        out.write("No tasks match." if args.agent or args.state else "No tasks yet.")
        return
    out.write(
        table(
            ["TASK", "STATE", "CALLER", "TARGET", "SKILL", "DEPTH", "UPDATED", "ABOUT"],
            [
                [
                    task.pk,
                    task.state,
                    task.caller.slug if task.caller else "-",
                    task.target.slug,
                    task.skill or "-",
                    task.depth,
                    ago(task.status_timestamp),
                    _short(task.reason or getattr(task, "first_summary", "") or ""),
                ]
                for task in found
            ],
        )
    )


def _short(text: str, width: int = 60) -> str:
    text = " ".join(text.split())
    return text[:width] + ("…" if len(text) > width else "")


def _due(deadline: Any) -> str:
    if deadline is None:
        return "-"
    seconds = int((deadline - timezone.now()).total_seconds())
    if seconds <= 0:
        return "overdue"
    return f"in {seconds // 60}m{seconds % 60:02d}s" if seconds < 3600 else f"in {seconds // 3600}h"


def _positive(value: int | None, option: str) -> None:
    if value is not None and value < 1:
        raise fail(f"{option}: must be 1 or more")


def escalations(args: argparse.Namespace, out: Any) -> None:
    _positive(args.limit, "--limit")
    _positive(args.after, "--after")
    filters = InboxFilter(view="list", agent=args.agent or "", sort=args.sort)
    inbox = escalation_inbox(
        filters=filters,
        pending_limit=args.limit,
        decided_limit=0,
        fold=False,
        cursor=Cursor(after=args.after),
    )
    if inbox.has_after:
        # Never cut silently: how many there are, and the command for the next page.
        more = [f"--after {inbox.last_pk}", f"--limit {args.limit}"]
        more += [f"--agent {args.agent}"] if args.agent else []
        more += [f"--sort {args.sort}"] if args.sort != "priority" else []
        cut(
            f"{len(inbox.pending)} of {inbox.pending_total} pending escalations shown; "
            f"the next page: a2a escalations {' '.join(more)}"
        )
    if args.json:
        for card in inbox.pending:
            e = card.escalation
            out.write(
                json.dumps(
                    {
                        "id": e.pk,
                        "kind": e.kind,
                        "priority": e.priority,
                        "agent": e.agent.slug,
                        "taskId": e.task_id,
                        "question": e.question,
                        "reason": e.reason,
                        "answerSchema": e.answer_schema,
                        "deadline": e.deadline.isoformat() if e.deadline else None,
                        "claimedBy": e.claimed_by_name or None,
                        "chain": [t.pk for t in card.chain],
                    },
                    ensure_ascii=False,
                )
            )
        return
    if not inbox.pending:
        out.write("Nothing waits for a human.")
        return
    out.write(
        table(
            ["ID", "KIND", "PRIORITY", "AGENT", "TASK", "DUE", "CLAIMED", "QUESTION"],
            [
                [
                    c.escalation.pk,
                    "question" if c.escalation.kind == EscalationKind.INPUT_REQUIRED else "held",
                    c.escalation.priority,
                    c.escalation.agent.slug,
                    c.escalation.task_id,
                    _due(c.escalation.deadline),
                    c.escalation.claimed_by_name or "-",
                    _short(c.escalation.question or c.message_text),
                ]
                for c in inbox.pending
            ],
        )
    )
    out.write("")
    out.write(
        "Answer a question: a2a escalations answer ID TEXT; a held message: "
        "approve ID | redirect ID AGENT | reject ID REASON; claim ID | release ID. "
        "--as USER says who you act for (default: the OS user)."
    )


def _decide(action: Any, args: argparse.Namespace, out: Any, done: str, **kwargs: Any) -> None:
    try:
        escalation = action(**acting(args), **kwargs)
    except HubError as exc:
        raise _one_line(exc) from None
    out.write(
        f"{done} escalation {escalation.pk} ({escalation.agent.slug}, task {escalation.task_id})"
    )


def answer(args: argparse.Namespace, out: Any) -> None:
    from a2a_core.services import escalations as decide

    data = None
    if args.data is not None:
        try:
            data = json.loads(args.data)
        except json.JSONDecodeError as exc:
            raise fail(f"--data is not valid JSON: {exc.msg} (column {exc.colno})") from None
    _decide(
        decide.escalation_answer,
        args,
        out,
        "answered",
        escalation_id=args.id,
        text=args.text,
        data=data,
    )


def approve(args: argparse.Namespace, out: Any) -> None:
    from a2a_core.services import escalations as decide

    _decide(
        decide.escalation_approve,
        args,
        out,
        "approved",
        escalation_id=args.id,
        edited_text=args.text,
    )


def redirect(args: argparse.Namespace, out: Any) -> None:
    from a2a_core.services import escalations as decide

    _decide(
        decide.escalation_redirect,
        args,
        out,
        f"redirected to {args.to}:",
        escalation_id=args.id,
        to=args.to,
    )


def reject(args: argparse.Namespace, out: Any) -> None:
    from a2a_core.services import escalations as decide

    _decide(
        decide.escalation_reject, args, out, "rejected", escalation_id=args.id, reason=args.reason
    )


def claim(args: argparse.Namespace, out: Any) -> None:
    from a2a_core.services import escalation_triage as triage

    _decide(
        triage.escalation_claim,
        args,
        out,
        "claimed",
        escalation_id=args.id,
        take_over=args.take_over,
    )


def release(args: argparse.Namespace, out: Any) -> None:
    from a2a_core.services import escalation_triage as triage

    _decide(triage.escalation_release, args, out, "released", escalation_id=args.id)


# --- dashboard users --------------------------------------------------------------------------


def add_user_parsers(sub: Any) -> None:
    p = sub.add_parser("user", help="add dashboard users and change their role")
    actions = p.add_subparsers(dest="user_action", required=True, metavar="add|role")
    a = actions.add_parser("add", help="create a user; prints a generated password once")
    a.add_argument("username")
    a.add_argument("--role", choices=ROLES, default="viewer", help="default: viewer")
    a.set_defaults(handler=user_add)
    a = actions.add_parser("role", help="give a user another role")
    a.add_argument("username")
    a.add_argument("role", choices=ROLES)
    a.set_defaults(handler=user_role)


def _one_line(exc: HubError) -> CommandError:
    if isinstance(exc, ValidationFailed):
        return fail("; ".join([exc.message, *(str(p) for p in exc.problems)]))
    return hub_error(exc)


def user_add(args: argparse.Namespace, out: Any) -> None:
    password = secrets.token_urlsafe(12)
    try:
        user_create(username=args.username, password=password, role=args.role, **acting(args))
    except HubError as exc:
        raise _one_line(exc) from None
    out.write(f"created {args.role} {args.username}\npassword: {password}")
    out.write("This password is shown once; the user can log in at /login/ with it.")


def user_role(args: argparse.Namespace, out: Any) -> None:
    try:
        user_set_role(username=args.username, role=args.role, **acting(args))
    except HubError as exc:
        raise _one_line(exc) from None
    out.write(f"{args.username} is now {args.role}")
