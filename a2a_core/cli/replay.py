"""`a2a replay`: send recorded tasks' inputs again, through the hub, to another agent or to the
same one after a change, and compare the answers with the recorded ones."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils.dateparse import parse_datetime

from a2a_core.cli.output import acting, fail, hub_error, table
from a2a_core.delivery.replay import replay_run
from a2a_core.errors import HubError
from a2a_core.models import Agent, Decision, ReplayItem, ReplaySet
from a2a_core.selectors.replay import replay_jsonl, replay_set_get, replay_sets_recent
from a2a_core.selectors.trace_list import STATES, TraceFilter, matching_roots, parse_duration_ms
from a2a_core.services.replay import DEFAULT_CALLER, REPLAY_ROLE, replay_caller, replay_set_create


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("replay", help="send recorded tasks again and compare the answers")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)

    a = actions.add_parser(
        "run",
        help="make a replay set from tasks (named, or the roots of the traces that match) "
        "and run it",
    )
    a.add_argument("--task", action="append", default=[], metavar="ID", help="a task (repeat)")
    a.add_argument("--agent", help="traces with this agent anywhere on them")
    a.add_argument("--caller", help="traces with a hop from this caller ...")
    a.add_argument("--target", help="... to this target")
    a.add_argument("--state", help="traces whose root is in this state (or running)")
    a.add_argument("--min", metavar="DURATION", help="traces that took at least this (2s, 250ms)")
    a.add_argument("--max", metavar="DURATION", help="traces that took at most this")
    a.add_argument("--errors", action="store_true", help="traces with a failed or refused hop")
    a.add_argument("--decision", help="traces with a message that got this decision")
    a.add_argument("--since", metavar="ISO", help="traces started at or after this time")
    a.add_argument("--until", metavar="ISO", help="traces started before this time")
    a.add_argument("--limit", type=int, default=100, metavar="N", help="at most N tasks (100)")
    a.add_argument(
        "--to", metavar="AGENT", help="send each to this agent (default: the one that answered it)"
    )
    _run_options(a)
    a.add_argument("--name", default="", help="what to call the set")
    a.set_defaults(handler=run)

    a = actions.add_parser("rerun", help="run a replay set again")
    a.add_argument("id", type=int, metavar="SET")
    _run_options(a, caller=False)
    a.set_defaults(handler=rerun)

    a = actions.add_parser("list", help="the latest replay sets")
    a.set_defaults(handler=list_sets)

    a = actions.add_parser("show", help="a set's answers, recorded and replayed")
    a.add_argument("id", type=int, metavar="SET")
    a.set_defaults(handler=show)

    a = actions.add_parser("export", help="a set as JSONL: input, expected, actual")
    a.add_argument("id", type=int, metavar="SET")
    a.add_argument("-o", "--output", type=Path, metavar="FILE", help="write here (default: stdout)")
    a.set_defaults(handler=export)


def _run_options(parser: argparse.ArgumentParser, *, caller: bool = True) -> None:
    if caller:
        parser.add_argument(
            "--from",
            dest="caller_slug",
            default=DEFAULT_CALLER,
            metavar="AGENT",
            help="the caller replays are sent as (default: the hub's own `replay`); another "
            "agent needs its token",
        )
    parser.add_argument(
        "--token",
        default=os.environ.get("HUB_REPLAY_TOKEN", ""),
        help="the caller's token, for a caller that is not the hub's own (HUB_REPLAY_TOKEN)",
    )
    parser.add_argument(
        "--hub",
        default=settings.HUB_PUBLIC_URL or "http://127.0.0.1:8000",
        metavar="URL",
        help="the hub to send through (default: HUB_PUBLIC_URL or http://127.0.0.1:8000)",
    )


def _agent(slug: str, option: str) -> Agent:
    agent = Agent.objects.filter(slug=slug).first()
    if agent is None:
        raise fail(f"{option}: no agent {slug!r} is registered (see: manage.py a2a agents)")
    return agent


def _caller(slug: str, token: str) -> Agent:
    existing = Agent.objects.filter(slug=slug).first()
    if existing is not None and existing.role != REPLAY_ROLE:
        if not token:
            raise fail(f"--from: {slug} is not the hub's own replay caller: give its --token")
        return existing
    try:
        return replay_caller(slug=slug)
    except HubError as exc:
        raise hub_error(exc) from None


def _when(value: str | None, option: str) -> Any:
    if not value:
        return None
    moment = parse_datetime(value)
    if moment is None:
        raise fail(f"{option}: not an ISO 8601 time: {value!r}")
    return moment


def _task_ids(args: argparse.Namespace) -> list[str]:
    if args.task:
        return list(args.task)
    if args.limit < 1:
        raise fail("--limit: must be 1 or more")
    for option in ("agent", "caller", "target"):
        if getattr(args, option):
            _agent(getattr(args, option), f"--{option}")
    if args.state and args.state not in STATES:
        raise fail(f"--state: unknown state {args.state!r}; use one of {', '.join(STATES)}")
    if args.decision and args.decision not in Decision.values:
        raise fail(
            f"--decision: unknown decision {args.decision!r}; "
            f"use one of {', '.join(Decision.values)}"
        )
    try:
        filters = TraceFilter(
            agent=args.agent or "",
            caller=args.caller or "",
            target=args.target or "",
            state=args.state or "",
            min_ms=parse_duration_ms(args.min or "", "--min"),
            max_ms=parse_duration_ms(args.max or "", "--max"),
            errors=args.errors,
            decision=args.decision or "",
            since=_when(args.since, "--since"),
            until=_when(args.until, "--until"),
        )
    except HubError as exc:
        raise hub_error(exc) from None
    ids = matching_roots(filters, limit=args.limit)
    if not ids:
        raise fail("no trace matches these filters: nothing to replay")
    return ids


def run(args: argparse.Namespace, out: Any) -> None:
    target = _agent(args.to, "--to") if args.to else None
    caller = _caller(args.caller_slug, args.token)
    task_ids = _task_ids(args)
    source = " ".join(sys.argv[2:])[:1000] if sys.argv[1:2] == ["a2a"] else ""
    try:
        replay_set = replay_set_create(
            task_ids=task_ids,
            caller=caller,
            target=target,
            name=args.name,
            source=source,
            actor=acting(args)["actor"],
        )
    except HubError as exc:
        raise hub_error(exc) from None
    _run(replay_set.pk, args, out)


def rerun(args: argparse.Namespace, out: Any) -> None:
    if not ReplaySet.objects.filter(pk=args.id).exists():
        raise fail(f"no replay set {args.id} (see: manage.py a2a replay list)")
    _run(args.id, args, out)


def _run(set_id: int, args: argparse.Namespace, out: Any) -> None:
    def progress(item: ReplayItem, done: int, total: int) -> None:
        said = f"{item.outcome}" + (f" ({item.reason})" if item.reason else "")
        state = (item.actual or {}).get("state", "")
        print(
            f"[{done}/{total}] task {item.original_id or '?'}: {said}"
            + (f", {state}" if state else ""),
            file=sys.stderr,
            flush=True,
        )

    try:
        ran = asyncio.run(replay_run(set_id, hub_url=args.hub, token=args.token, progress=progress))
    except HubError as exc:
        raise hub_error(exc) from None
    view = replay_set_get(set_id=set_id)
    counts = ", ".join(f"{n} {outcome}" for outcome, n in sorted(view.counts.items()))
    out.write(f"replay set {ran.pk}, run {ran.runs}: {counts}\n")
    out.write(f"  see it: /replays/{ran.pk}/ · export it: manage.py a2a replay export {ran.pk}\n")


def list_sets(args: argparse.Namespace, out: Any) -> None:
    rows = [
        (
            s.pk,
            s.name or "-",
            s.caller.slug,
            s.target.slug if s.target else "(as recorded)",
            s.status,
            s.runs,
            s.items.count(),
        )
        for s in replay_sets_recent()
    ]
    out.write(table(["SET", "NAME", "FROM", "TO", "STATUS", "RUNS", "ITEMS"], rows) + "\n")


def show(args: argparse.Namespace, out: Any) -> None:
    try:
        view = replay_set_get(set_id=args.id)
    except HubError as exc:
        raise hub_error(exc) from None
    rows = []
    for v in view.items:
        expected, actual = v.item.expected, v.item.actual or {}
        rows.append(
            (
                v.item.position,
                v.target,
                v.item.outcome or "pending",
                f"{expected.get('state')} → {actual.get('state', '-')}",
                "same" if v.same_text else "changed",
                _one_line(expected.get("text", "")),
                _one_line(actual.get("text", "") or v.item.reason),
            )
        )
    out.write(table(["#", "TO", "OUTCOME", "STATE", "TEXT", "RECORDED", "REPLAYED"], rows) + "\n")


def _one_line(text: str, width: int = 40) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def export(args: argparse.Namespace, out: Any) -> None:
    try:
        lines = list(replay_jsonl(set_id=args.id))
    except HubError as exc:
        raise hub_error(exc) from None
    if args.output is None:
        out.write("".join(lines))
        return
    try:
        args.output.write_text("".join(lines), encoding="utf-8")
    except OSError as exc:
        raise fail(f"cannot write {args.output}: {exc.strerror}") from None
    print(f"wrote {len(lines)} items to {args.output}", file=sys.stderr)
