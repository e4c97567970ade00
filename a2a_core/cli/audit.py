"""`a2a log` and `a2a export`: the recorded traffic for auditors, read like a log or saved whole.

Both take the same filters as the dashboard's audit (they share its selectors): `--agent`,
`--pair A:B` (sent by A to B), `--type`, `--decision`, `--reason`, `--text`, `--since`,
`--until`. A filter that names something unknown (an agent, a kind, a time) is one clear line
on stderr and exit status 2, before anything is read.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

from django.utils import timezone

from a2a_core.cli.output import acting, fail
from a2a_core.models import Decision
from a2a_core.schemas.envelopes import canonical_kind, valid_kinds_text
from a2a_core.selectors.audit import AuditFilter, Position, agent_ids
from a2a_core.selectors.audit_export import (
    EXPORT_CHUNK,
    audit_count,
    audit_log_chunk,
    audit_log_since,
    audit_log_tail,
    training_chunk,
)
from a2a_core.services.audit import audit_record

# `--follow` looks for new messages this often, and reads again this far back: messages are
# committed in batches, so one can land a little after a newer one was already shown.
FOLLOW_INTERVAL = 0.5
FOLLOW_OVERLAP = timedelta(seconds=5)
DEFAULT_LIMIT = 50
_AGE = re.compile(r"^(\d+)\s*([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
# What `--decision` accepts: the stored values and the words the dashboard shows.
_DECISIONS = {
    **{value: value for value in Decision.values},
    "delivered": Decision.DELIVER,
    "held": Decision.HOLD,
    "redirected": Decision.REDIRECT,
    "rejected": Decision.REJECT,
}


def _add_filters(p: argparse.ArgumentParser) -> None:
    p.add_argument("--agent", metavar="ID", help="messages sent or received by this agent")
    p.add_argument("--pair", metavar="A:B", help="messages sent by agent A to agent B")
    p.add_argument("--type", metavar="KIND", help="messages of this kind (e.g. task_request)")
    p.add_argument(
        "--decision",
        metavar="D",
        help="the policy's decision: deliver, hold, redirect or reject",
    )
    p.add_argument("--reason", help="the decision's reason code (e.g. rate_limit_minute)")
    p.add_argument("--text", help="words in the message's summary")
    p.add_argument(
        "--since",
        metavar="TIME",
        help="from this time: ISO 8601 (2026-11-21, 2026-11-21T09:30, ...Z) or an age (15m, 2h, 7d)",
    )
    p.add_argument("--until", metavar="TIME", help="before this time (same forms as --since)")


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("log", help="the recorded traffic, oldest first; --follow for live")
    _add_filters(p)
    p.add_argument(
        "--limit",
        type=int,
        metavar="N",
        help=f"show the N most recent (default {DEFAULT_LIMIT}; all with --since; 0: all)",
    )
    p.add_argument("--follow", "-f", action="store_true", help="then print new messages live")
    p.add_argument("--json", action="store_true", help="one JSON object per message (JSONL)")
    p.set_defaults(handler=log)

    p = sub.add_parser("export", help="save the filtered traffic as JSONL or training data")
    _add_filters(p)
    p.add_argument(
        "--format",
        choices=["jsonl", "training"],
        default="jsonl",
        help="jsonl: the traffic log, a message per line; training: a conversation per task",
    )
    p.add_argument(
        "-o", "--output", metavar="FILE", default="-", help="where to write (default: stdout)"
    )
    p.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    p.set_defaults(handler=export)


# --- filters --------------------------------------------------------------------------------


def parse_time(value: str, option: str, *, now: datetime | None = None) -> datetime:
    """An ISO 8601 date or time (UTC unless it says otherwise) or an age such as `15m`."""
    text = value.strip()
    now = now or timezone.now()
    if match := _AGE.match(text.lower()):
        return now - timedelta(**{_UNITS[match[2]]: int(match[1])})
    if text.lower() == "now":
        return now
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise fail(
            f"{option}: {value!r} is not a time; use ISO 8601 (2026-11-21 or "
            "2026-11-21T09:30:00Z) or an age (30s, 15m, 2h, 7d, 1w)"
        ) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def parse_filters(args: argparse.Namespace) -> AuditFilter:
    """The options as an `AuditFilter`, or `fail` (exit 2) naming the first bad one."""
    sender = target = ""
    if args.pair:
        sender, sep, target = args.pair.partition(":")
        if not sep or not sender or not target:
            raise fail(f"--pair: {args.pair!r} is not A:B (the sender's id, a colon, the target's)")
    wanted = [slug for slug in (args.agent, sender, target) if slug]
    ids = agent_ids(wanted)
    for option, slug in (("--agent", args.agent), ("--pair", sender), ("--pair", target)):
        if slug and slug not in ids:
            raise fail(f"{option}: no agent {slug!r} is registered (see: manage.py a2a agents)")
    kind = ""
    if args.type:
        kind = canonical_kind(args.type) or ""
        if not kind:
            raise fail(f"--type: unknown kind {args.type!r}; valid kinds: {valid_kinds_text()}")
    decision = ""
    if args.decision:
        decision = _DECISIONS.get(args.decision.strip().lower(), "")
        if not decision:
            raise fail(
                f"--decision: unknown decision {args.decision!r}; use one of "
                + ", ".join(Decision.values)
            )
    since = parse_time(args.since, "--since") if args.since else None
    until = parse_time(args.until, "--until") if args.until else None
    if since and until and since >= until:
        raise fail("--until must be after --since")
    return AuditFilter(
        agent_id=ids.get(args.agent or ""),
        sender_id=ids.get(sender),
        target_id=ids.get(target),
        kind=kind,
        decision=decision,
        reason=(args.reason or "").strip(),
        since=since,
        until=until,
        text=(args.text or "").strip(),
    )


def _given(args: argparse.Namespace) -> dict[str, str]:
    names = ("agent", "pair", "type", "decision", "reason", "text", "since", "until")
    return {name: value for name in names if (value := getattr(args, name, None))}


# --- a2a log --------------------------------------------------------------------------------


def _decision_text(line: dict[str, Any]) -> str:
    action = line["policyDecision"]
    verdict = {
        Decision.DELIVER: "delivered",
        Decision.HOLD: "held",
        Decision.REDIRECT: "redirected",
        Decision.REJECT: "rejected",
    }.get(action["action"], action["action"] or "-")
    if action["reason"].endswith("_by_human") and action["detail"]:
        return f"{verdict} ({action['detail']})"
    return f"{verdict} ({action['reason']})" if action["reason"] else verdict


def _row(line: dict[str, Any]) -> list[str]:
    moment = datetime.fromisoformat(line["timestamp"].replace("Z", "+00:00"))
    latency = line["latencyMs"]
    summary = " ".join((line["messageSummary"] or "").split())
    return [
        timezone.localtime(moment).strftime("%Y-%m-%d %H:%M:%S"),
        line["from"] or "-",
        line["to"] or "-",
        line["type"],
        _decision_text(line),
        line["policyDecision"].get("decidedBy") or "-",
        "-" if latency is None else f"{latency} ms",
        summary[:80] + ("…" if len(summary) > 80 else ""),
    ]


HEADERS = ["TIME", "FROM", "TO", "KIND", "DECISION", "DECIDED BY", "LATENCY", "SUMMARY"]
# Fixed widths, so the rows `--follow` prints later line up with the first ones.
WIDTHS = [19, 14, 14, 18, 30, 24, 8]


def _columns(cells: list[str]) -> str:
    padded = [cell.ljust(width) for cell, width in zip(cells, WIDTHS, strict=False)]
    return "  ".join([*padded, *cells[len(WIDTHS) :]]).rstrip()


def _print(lines: list[dict[str, Any]], args: argparse.Namespace, out: Any) -> None:
    for line in lines:
        out.write(json.dumps(line, ensure_ascii=False) if args.json else _columns(_row(line)))


def log(args: argparse.Namespace, out: Any) -> None:
    filters = parse_filters(args)
    if args.limit is not None and args.limit < 0:
        raise fail("--limit: must be 0 (all) or more")
    limit = args.limit if args.limit is not None else (0 if filters.since else DEFAULT_LIMIT)
    if limit:
        entries = audit_log_tail(filters=filters, size=limit)
    else:
        entries = []
        after: Position | None = None
        while chunk := audit_log_since(filters=filters, after=after):
            entries.extend(chunk)
            after = chunk[-1][0]
    lines = [line for _, line in entries]
    if not lines and not args.follow:
        if not args.json:
            out.write("No messages match." if _given(args) else "No messages recorded yet.")
        return
    if not args.json:
        out.write(_columns(HEADERS))
    _print(lines, args, out)
    if args.follow:
        # Started in the background by a script, a process inherits SIGINT ignored; Ctrl-C or
        # `kill -INT` ends a follow however it was started.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        with contextlib.suppress(KeyboardInterrupt):
            _follow(filters, entries, args, out)


def _follow(
    filters: AuditFilter,
    entries: list[tuple[Position, dict[str, Any]]],
    args: argparse.Namespace,
    out: Any,
) -> None:
    """Print the messages recorded after those in `entries` as they come, until interrupted.

    Each poll reads again from `FOLLOW_OVERLAP` before the newest message shown, so one
    committed late (in a batch that started earlier) still shows, once."""
    floor = entries[-1][0] if entries else (timezone.now(), 0)
    last = floor
    seen = {pk: moment for (moment, pk), _ in entries}
    while True:
        fresh: list[tuple[Position, dict[str, Any]]] = []
        after: Position | None = (last[0] - FOLLOW_OVERLAP, 0)
        while chunk := audit_log_since(filters=filters, after=after):
            fresh.extend(e for e in chunk if e[0] > floor and e[0][1] not in seen)
            after = chunk[-1][0]
        if fresh:
            _print([line for _, line in fresh], args, out)
            out.flush()
            seen.update((pk, moment) for (moment, pk), _ in fresh)
            last = max(last, fresh[-1][0])
        horizon = last[0] - FOLLOW_OVERLAP
        seen = {pk: moment for pk, moment in seen.items() if moment >= horizon}
        time.sleep(FOLLOW_INTERVAL)


# --- a2a export -----------------------------------------------------------------------------


class Progress:
    """A progress bar on stderr (a line now and then when stderr is not a terminal)."""

    def __init__(self, total: int, what: str, stream: IO[str], *, quiet: bool) -> None:
        self.total, self.what, self.stream, self.quiet = total, what, stream, quiet
        self.tty = stream.isatty()
        self.started = self.shown = time.monotonic()
        self.done = 0

    def advance(self, rows: int, scanned: int) -> None:
        self.done = scanned
        now = time.monotonic()
        if self.quiet or now - self.shown < (0.2 if self.tty else 5.0):
            return
        self.shown = now
        self._show(rows)

    def _show(self, rows: int, end: str = "") -> None:
        total = max(self.total, 1)
        share = min(self.done / total, 1.0)
        rate = self.done / max(time.monotonic() - self.started, 1e-6)
        bar = "#" * int(share * 30)
        text = (
            f"[{bar:<30}] {share:4.0%}  {self.done:,}/{self.total:,} messages read, "
            f"{rows:,} {self.what} written, {rate:,.0f} messages/s"
        )
        self.stream.write(("\r" + text if self.tty else text + "\n") + end)
        self.stream.flush()

    def finish(self, rows: int) -> None:
        if not self.quiet:
            self.done = self.total
            self._show(rows, end="\n" if self.tty else "")


def export(args: argparse.Namespace, out: Any) -> None:
    filters = parse_filters(args)
    training = args.format == "training"
    what = "tasks" if training else "messages"
    chunk = training_chunk if training else audit_log_chunk
    to_stdout = args.output == "-"
    target = Path(args.output)
    if not to_stdout and target.is_dir():
        raise fail(f"-o: {args.output} is a directory; name a file")
    partial = target.with_name(target.name + ".partial")
    file: IO[str] | None = None
    if not to_stdout:
        try:
            file = partial.open("w", encoding="utf-8")
        except OSError as exc:
            raise fail(f"-o: cannot write {args.output}: {exc.strerror}") from None
    progress = Progress(audit_count(filters=filters), what, sys.stderr, quiet=args.quiet)
    rows, scanned, complete, after = 0, 0, False, None
    try:
        while True:
            lines, onward = chunk(filters=filters, after=after, size=EXPORT_CHUNK)
            rows += len(lines)
            scanned += EXPORT_CHUNK
            text = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
            if file is not None:
                file.write(text)
            elif text:
                out.write(text, ending="")  # Django's wrapper would add a newline
            progress.advance(rows, scanned)
            if onward is None:
                complete = True
                break
            after = onward
    finally:
        if file is not None:
            # The file appears under its name only when complete: never a truncated export.
            file.close()
            if complete:
                os.replace(partial, target)
            else:
                partial.unlink(missing_ok=True)
        audit_record(
            action=f"audit.export.{what}",
            summary=f"exported {rows} {what}" + ("" if complete else " (interrupted)"),
            **acting(args),
            object_type="audit",
            data={"filters": _given(args), "rows": rows, "complete": complete},
        )
    progress.finish(rows)
    if not to_stdout:
        out.write(f"exported {rows:,} {what} to {args.output}")
