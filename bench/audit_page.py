"""The audit page over 1,000,000 stored messages (target: first page under 200 ms on SQLite).

    python bench/audit_page.py [--messages 1000000] [--agents 50] [--runs 7] [--seed 3]

Fills a fresh database with `--messages` messages among `--agents` agents, the way the hub
records them: conversations (a request, progress, a reply) on tasks in every state, with
envelopes naming files, refusals without a task, holds and redirects, over 30 days, some
messages sharing a timestamp. Then times, through the real view (Django's test client logged
in as a viewer): the first audit page, filtered pages (agent, pair, kind, decision, reason,
task state, time range, text), an older page (cursor), one message's JSON, and the export of
10,000 filtered rows. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import itertools
import json
import os
import random
import re
import statistics
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from _setup import django_with_fresh_db

WORDS = [
    "parser",
    "cache",
    "schema",
    "migration",
    "login",
    "billing",
    "invoice",
    "report",
    "search",
    "index",
    "queue",
    "retry",
    "timeout",
    "token",
    "session",
    "upload",
    "export",
    "import",
    "webhook",
    "payment",
    "refund",
    "audit",
    "review",
    "deploy",
    "rollback",
    "metrics",
    "alert",
    "dashboard",
    "profile",
    "avatar",
    "locale",
    "checkout",
    "cart",
    "coupon",
    "shipping",
]
VERBS = [
    "fix",
    "review",
    "implement",
    "refactor",
    "test",
    "document",
    "profile",
    "investigate",
    "ship",
    "revert",
]
RARE_WORD = "heliotrope"  # in about 1 message of 1,000: what a free-text search looks for
KIND_WEIGHTS = {
    "request": 40,
    "task_request": 15,
    "review_request": 10,
    "question": 8,
    "status_update": 0,  # only as progress inside a conversation
    "knowledge_share": 4,
    "escalation": 3,
    "notification": 5,
}
TASK_STATES = {
    "completed": 80,
    "failed": 7,
    "canceled": 2,
    "rejected": 1,
    "working": 4,
    "input-required": 3,
    "submitted": 2,
    "auth-required": 1,
}
REJECT_REASONS = ["denied_by_matrix", "rate_limit_minute", "loop_detected", "hop_limit"]

MESSAGE_COLUMNS = [
    "message_id",
    "role",
    "parts",
    "metadata",
    "extensions",
    "reference_task_ids",
    "direction",
    "kind",
    "envelope",
    "summary",
    "recipients",
    "context_id",
    "correlation_id",
    "hop",
    "trace_id",
    "decision",
    "decision_reason",
    "decision_detail",
    "decision_latency_us",
    "delivery_state",
    "responded_at",
    "latency_ms",
    "late",
    "digest",
    "request_metadata",
    "repeat",
    "sealed_parts",
    "created_at",
    "author_id",
    "redirected_to_id",
    "sender_id",
    "target_id",
    "task_id",
]
TASK_COLUMNS = [
    "id",
    "context_id",
    "state",
    "status_message",
    "status_timestamp",
    "metadata",
    "skill",
    "depth",
    "trace_id",
    "deadline",
    "remote_task_id",
    "remote_context_id",
    "path",
    "reason",
    "event_seq",
    "created_at",
    "updated_at",
    "addressed_to_id",
    "caller_id",
    "parent_id",
    "root_id",
    "target_id",
]


def _insert(table: str, columns: list[str], rows: list[tuple[Any, ...]]) -> None:
    from django.db import connection

    marks = ", ".join(["%s"] * len(columns))
    names = ", ".join(connection.ops.quote_name(c) for c in columns)
    with connection.cursor() as cursor:
        cursor.executemany(f"INSERT INTO {table} ({names}) VALUES ({marks})", rows)


class Traffic:
    """Conversations as the hub records them, one after another in time."""

    def __init__(self, agent_ids: list[int], slugs: dict[int, str], rng: random.Random) -> None:
        from django.db import connection

        self.rng = rng
        self.agents = agent_ids
        self.slugs = slugs
        # Naive UTC for SQLite's text timestamps, aware for PostgreSQL.
        self.naive = connection.vendor == "sqlite"
        self.moment = datetime.now(UTC).replace(tzinfo=None) - timedelta(days=30)
        self.kinds = list(KIND_WEIGHTS)
        self.kind_weights = list(itertools.accumulate(KIND_WEIGHTS.values()))
        self.states = list(TASK_STATES)
        self.state_weights = list(itertools.accumulate(TASK_STATES.values()))
        self.defaults = dict.fromkeys(MESSAGE_COLUMNS)
        self.defaults.update(
            role="user",
            metadata="{}",
            extensions="[]",
            reference_task_ids="[]",
            direction="request",
            recipients="[]",
            correlation_id="",
            hop=1,
            decision="deliver",
            decision_reason="ok",
            decision_detail="",
            delivery_state="delivered",
            late=False,
            digest="",
            request_metadata="{}",
            repeat=0,
            sealed_parts="",
        )

    def stamp(self, moment: datetime) -> Any:
        return str(moment) if self.naive else moment.replace(tzinfo=UTC)

    def tick(self, mean_seconds: float) -> datetime:
        # About 1 message in 20 shares its predecessor's timestamp (same microsecond).
        if self.rng.random() > 0.05:
            self.moment += timedelta(microseconds=int(self.rng.expovariate(1 / mean_seconds) * 1e6))
        return self.moment

    def summary(self) -> str:
        rng = self.rng
        words = " ".join(rng.sample(WORDS, 3))
        number = int(rng.random() * 4_000_000)
        text = f"{VERBS[number % 10]} the {words} in module_{number % 400}.py (#{number // 400})"
        if rng.random() < 0.001:
            text += f" — {RARE_WORD}"
        return text

    def envelope(self, kind: str, summary: str, sender: str, target: str) -> str | None:
        files = [f"src/{self.rng.choice(WORDS)}/module_{self.rng.randrange(400)}.py"]
        payloads: dict[str, dict[str, Any]] = {
            "task_request": {"title": summary[:200], "context": {"files": files}},
            "review_request": {"title": summary[:200], "files": files},
            "question": {"text": summary},
            "escalation": {"reason": summary, "files": files},
            "knowledge_share": {"topic": summary[:200], "discovery": summary},
            "notification": {"text": summary},
        }
        if kind not in payloads:
            return None
        return json.dumps(
            {
                "kind": kind,
                "from": {"agentId": sender},
                "to": {"agentId": target},
                "payload": payloads[kind],
                "priority": "normal",
                "expectsResponse": kind in ("question", "escalation"),
            }
        )

    def message(self, **fields: Any) -> tuple[Any, ...]:
        row = {**self.defaults, **fields}
        row["message_id"] = f"{self.rng.getrandbits(128):032x}"
        row["parts"] = json.dumps([{"text": fields["summary"]}])
        row["created_at"] = self.stamp(fields["created_at"])
        if row["responded_at"] is not None:
            row["responded_at"] = self.stamp(row["responded_at"])
        return tuple(row.values())

    def conversation(self) -> tuple[list[tuple[Any, ...]], tuple[Any, ...] | None]:
        """The messages of one exchange, and its task (None for a refused message)."""
        rng = self.rng
        caller, target = rng.sample(self.agents, 2)
        kind = rng.choices(self.kinds, cum_weights=self.kind_weights)[0]
        summary = self.summary()
        start = self.tick(2.6)
        trace = f"{rng.getrandbits(128):032x}"
        context = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        common = {
            "kind": kind,
            "summary": summary,
            "sender_id": caller,
            "target_id": target,
            "recipients": f'["{self.slugs[target]}"]',
            "envelope": self.envelope(kind, summary, self.slugs[caller], self.slugs[target]),
            "context_id": context,
            "trace_id": trace,
            "created_at": start,
            "decision_latency_us": 30 + int(rng.random() * 370),
        }
        roll = rng.random()
        if roll < 0.06:  # refused: recorded, no task
            reason = REJECT_REASONS[int(roll * 1000) % len(REJECT_REASONS)]
            return [
                self.message(
                    **common,
                    decision="reject",
                    decision_reason=reason,
                    decision_detail=f"refused: {reason}",
                    delivery_state="rejected",
                )
            ], None
        task_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        state = rng.choices(self.states, cum_weights=self.state_weights)[0]
        decision, reason, redirected = "deliver", "ok", None
        if roll < 0.08:
            decision, reason, state = "hold", "approval_required", "input-required"
        elif roll < 0.10:
            redirected = rng.choice([a for a in self.agents if a not in (caller, target)])
            decision, reason = "redirect", "redirected"
        served_by = redirected or target
        latency = int(rng.lognormvariate(4, 1)) + 1
        finished = state in ("completed", "failed", "canceled", "rejected")
        rows = [
            self.message(
                **common,
                decision=decision,
                decision_reason=reason,
                decision_detail="" if decision == "deliver" else f"{reason} by the policy",
                redirected_to_id=redirected,
                delivery_state="held" if decision == "hold" else "delivered",
                task_id=task_id,
                responded_at=start + timedelta(milliseconds=latency) if finished else None,
                latency_ms=latency if finished else None,
            )
        ]
        reply = {
            "role": "agent",
            "direction": "reply",
            "decision_reason": "",
            "sender_id": served_by,
            "target_id": caller,
            "context_id": context,
            "trace_id": trace,
            "task_id": task_id,
        }
        for _ in range(rng.choice((0, 0, 1, 2))):  # progress from the agent
            percent = int(rng.random() * 100)
            rows.append(
                self.message(
                    **reply,
                    kind="status_update",
                    summary=f"working on it: {percent}%",
                    created_at=self.tick(0.5),
                )
            )
        if finished:
            rows.append(
                self.message(
                    **reply,
                    kind="response",
                    summary=f"{state}: {self.summary()}",
                    created_at=self.tick(0.5),
                )
            )
        stamp = self.stamp(self.moment)
        task = (
            task_id,
            context,
            state,
            None,
            stamp,
            "{}",
            rng.choice(WORDS),
            0,
            trace,
            None,
            "",
            "",
            f'["{self.slugs[caller]}", "{self.slugs[served_by]}"]',
            "it broke" if state == "failed" else "",
            len(rows),
            self.stamp(start),
            stamp,
            target,
            caller,
            None,
            None,
            served_by,
        )
        return rows, task

    def batches(self, total: int, size: int) -> Iterator[tuple[list[tuple], list[tuple]]]:
        made = 0
        while made < total:
            messages: list[tuple[Any, ...]] = []
            tasks: list[tuple[Any, ...]] = []
            while len(messages) < size and made + len(messages) < total:
                rows, task = self.conversation()
                messages.extend(rows)
                if task is not None:
                    tasks.append(task)
            made += len(messages)
            yield messages, tasks


def populate(total: int, agents: int, rng: random.Random) -> dict[str, Any]:
    """Insert `agents` agents and `total` messages (with their tasks); what the cases need."""
    from django.db import transaction

    from a2a_core.models import Agent, Message, Task

    created = Agent.objects.bulk_create(
        Agent(
            slug=f"agent-{i:02d}",
            name=f"Agent {i}",
            card={},
            card_version="1",
            card_digest="x",
            delivery_mode="endpoint",
            status="online",
            scopes=["a2a:call", "a2a:receive"],
        )
        for i in range(agents)
    )
    slugs = {a.pk: a.slug for a in created}
    traffic = Traffic(list(slugs), slugs, rng)
    start = time.perf_counter()
    done = 0
    with _bulk_loading():
        for messages, tasks in traffic.batches(total, 20_000):
            with transaction.atomic():
                _insert(Task._meta.db_table, TASK_COLUMNS, tasks)
                _insert(Message._meta.db_table, MESSAGE_COLUMNS, messages)
            done += len(messages)
            if done // 100_000 != (done - len(messages)) // 100_000 or done == total:
                rate = done / (time.perf_counter() - start)
                print(f"  {done:>9,} messages  ({rate:,.0f}/s)", flush=True)
    return {"slugs": list(slugs.values()), "newest": traffic.moment}


@contextlib.contextmanager
def _bulk_loading() -> Iterator[None]:
    """SQLite: load with a big page cache and no syncs, then measure with the hub's settings."""
    from django.db import connection

    if connection.vendor != "sqlite":
        yield
        return
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA cache_size = -500000")
        cursor.execute("PRAGMA synchronous = OFF")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA cache_size = -2000")
            cursor.execute("PRAGMA synchronous = NORMAL")
            cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def get(client: Any, url: str, **headers: str) -> tuple[float, bytes]:
    """One GET through the whole Django stack: milliseconds, and the body."""
    start = time.perf_counter()
    response = client.get(url, **headers)
    body = b"".join(response.streaming_content) if response.streaming else response.content
    elapsed = (time.perf_counter() - start) * 1000
    assert response.status_code == 200, (url, response.status_code, body[:300])
    return elapsed, body


def sample(client: Any, url: str, runs: int, **headers: str) -> tuple[list[float], bytes]:
    get(client, url, **headers)  # the first run warms this query's plan and pages
    samples, body = [], b""
    for _ in range(runs):
        elapsed, body = get(client, url, **headers)
        samples.append(elapsed)
    return samples, body


def rows(html: bytes) -> str:
    return f"{html.count(b'<tr data-message=')} rows"


def report(label: str, samples: list[float], note: str = "") -> None:
    print(
        f"  {label:<30} p50 {statistics.median(samples):7.1f} ms   max {max(samples):7.1f} ms"
        + (f"   {note}" if note else "")
    )


@dataclass
class Filled:
    """A fresh database filled by `populate`, and a viewer logged in to read it."""

    args: argparse.Namespace
    client: Any
    # A one-day range three days before the newest message, and two agents that talk.
    since: str
    until: str
    agent: str
    other: str


def fill_and_log_in(name: str, username: str) -> Filled:
    """The command line every page bench takes (--messages, --agents, --runs, --seed), a fresh
    database filled with that many messages, and a viewer logged in."""
    parser = argparse.ArgumentParser(description=sys.modules["__main__"].__doc__)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--agents", type=int, default=50)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args()

    os.environ.setdefault("ALLOWED_HOSTS", "testserver")
    tmp = django_with_fresh_db(name)
    from django.db import connection
    from django.test import Client

    from a2a_core.services.users import user_create

    print(f"populating {args.messages:,} messages among {args.agents} agents ({connection.vendor})")
    start = time.perf_counter()
    made = populate(args.messages, args.agents, random.Random(args.seed))
    print(f"populated in {time.perf_counter() - start:.0f} s ({tmp})")
    # The rows built to populate the tables are garbage now: collect them once so the timings
    # measure the page, not a collection of setup leftovers.
    gc.collect()
    gc.freeze()

    client = Client()
    client.force_login(user_create(username=username, password="bench-password-1", role="viewer"))
    newest: datetime = made["newest"]
    return Filled(
        args=args,
        client=client,
        since=(newest - timedelta(days=3)).strftime("%Y-%m-%dT%H:%M"),
        until=(newest - timedelta(days=2)).strftime("%Y-%m-%dT%H:%M"),
        agent=made["slugs"][3],
        other=made["slugs"][7],
    )


def main() -> None:
    filled = fill_and_log_in("audit", "auditor")
    from a2a_core.models import Message

    client, args = filled.client, filled.args
    since, until, agent, other = filled.since, filled.until, filled.agent, filled.other

    cold, _ = get(client, "/audit/")
    print(f"\nfirst audit page, first request of a fresh process: {cold:.1f} ms")
    first, body = sample(client, "/audit/", args.runs)
    older = re.search(rb'rel="next" href="\?cursor=([\w-]+)"', body)
    assert older is not None, "the first page links to older messages"
    print(f"audit pages over {args.messages:,} messages, {args.runs} warm runs each:")
    report("first page (no filter)", first, rows(body))
    cases = [
        ("older page (cursor)", f"/audit/?cursor={older[1].decode()}"),
        ("agent (sent or received)", f"/audit/?agent={agent}"),
        ("pair (from -> to)", f"/audit/?sender={agent}&target={other}"),
        ("kind", "/audit/?kind=escalation"),
        ("decision", "/audit/?decision=reject"),
        ("reason", "/audit/?reason=loop_detected"),
        ("task state (common)", "/audit/?state=completed"),
        ("task state (rare)", "/audit/?state=auth-required"),
        ("time range (one day)", f"/audit/?since={since}&until={until}"),
        ("agent + time range", f"/audit/?agent={agent}&since={since}&until={until}"),
        ("text (rare word)", f"/audit/?q={RARE_WORD}"),
        ("text + agent", f"/audit/?q={RARE_WORD}&agent={agent}"),
        ("text + kind", "/audit/?q=review&kind=review_request"),
    ]
    for label, url in cases:
        samples, body = sample(client, url, args.runs)
        report(label, samples, rows(body))
    samples, _ = sample(client, "/audit/?decision=hold", args.runs, HTTP_HX_REQUEST="true")
    report("htmx results (decision)", samples)

    pk = Message.objects.order_by("-created_at", "-pk").values_list("pk", flat=True)[500]
    samples, _ = sample(client, f"/messages/{pk}/", args.runs)
    report("one message's JSON", samples)

    # Exports: the delivered messages of the recent stretch that holds 10,000 of them.
    start_at = (
        Message.objects.filter(decision="deliver")
        .order_by("-created_at", "-pk")
        .values_list("created_at", flat=True)[9_999]
    )
    query = f"decision=deliver&since={start_at.strftime('%Y-%m-%dT%H:%M:%S')}"
    print("exports, streamed (3 runs each):")
    for label, url in (
        ("traffic log", f"/audit/export.jsonl?{query}"),
        ("training data", f"/audit/training.jsonl?{query}"),
    ):
        samples, body = sample(client, url, 3)
        what = "messages" if "export" in url else "tasks"
        report(label, samples, f"{body.count(b'\n'):,} {what}, {len(body) / 1e6:.1f} MB")

    p50 = statistics.median(first)
    print(
        f"\ntarget: first audit page under 200 ms over {args.messages:,} messages -> "
        f"{'met' if p50 < 200 else 'NOT met'} (p50 {p50:.1f} ms, max {max(first):.1f} ms; "
        f"cold {cold:.1f} ms)"
    )


if __name__ == "__main__":
    main()
