"""The escalation inbox with 10,000 pending items (targets: the first page's server render
p50 under 150 ms, the dense list's HTML under 100 KB).

    python bench/escalation_page.py [--pending 10000] [--decided 500] [--agents 20] [--runs 7]

Fills a fresh database with `--pending` held messages and questions among `--agents` agents,
the way the hub records them: each with its task (some three levels down a delegation chain),
the held message (a third with a typed envelope, so the edit form is built from its schema),
about one in ten an identical copy of another (the inbox folds those), a few claimed; and
`--decided` decided ones. Then times, through the real view (Django's test client logged in
as an operator, who gets every card's buttons and edit form): the first render, the filtered,
searched, sorted and grouped views, the last page (keyset paging), the cards view, and the
htmx refresh a live update triggers. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import random
import statistics
import time
import uuid
from datetime import timedelta
from typing import Any

from _setup import django_with_fresh_db

TOPICS = ["deploy", "migrate", "rotate key", "restart", "drop table", "scale", "purge cache"]


def populate(pending: int, decided: int, agents: int, rng: random.Random) -> list[str]:
    from django.db import transaction
    from django.utils import timezone

    from a2a_core.models import PRIORITY_RANK, Agent, Escalation, Message, Task
    from a2a_core.schemas.envelopes import ENVELOPE_MEDIA_TYPE

    made = Agent.objects.bulk_create(
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
    now = timezone.now()
    tasks: list[Task] = []
    messages: list[Message] = []
    escalations: list[Escalation] = []
    roots: list[Task] = []
    previous: tuple[int, int, str] | None = None
    for i in range(pending + decided):
        caller, target = rng.sample(made, 2)
        text = f"{rng.choice(TOPICS)} service-{rng.randrange(10_000)} in {rng.choice(['eu', 'us'])}"
        if previous and rng.random() < 0.1:  # an identical copy of the one before
            caller, target, text = made[previous[0]], made[previous[1]], previous[2]
        previous = (made.index(caller), made.index(target), text)
        parent = rng.choice(roots) if roots and rng.random() < 0.3 else None
        task = Task(
            id=str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            context_id=str(uuid.uuid4()),
            state="auth-required",
            caller=caller,
            target=target,
            skill=rng.choice(["deploy", "db", "ops", ""]),
            parent=parent,
            root=(parent.root or parent) if parent else None,
            depth=parent.depth + 1 if parent else 0,
            path=[caller.slug, target.slug],
            deadline=now + timedelta(minutes=30),
            status_timestamp=now,
        )
        if parent is None and rng.random() < 0.2:
            roots.append(task)
        tasks.append(task)
        parts: list[dict[str, Any]] = [{"text": text}]
        if rng.random() < 0.33:
            envelope = {"kind": "task_request", "payload": {"title": text}}
            parts.append({"data": envelope, "mediaType": ENVELOPE_MEDIA_TYPE})
        messages.append(
            Message(
                message_id=f"m-{i}",
                role="user",
                kind="request",
                parts=parts,
                summary=text,
                sender=caller,
                target=target,
                task=task,
                decision="hold",
                decision_reason="approval_required",
                delivery_state="held",
            )
        )
        priority = rng.choice(["low", "normal", "normal", "high", "urgent"])
        fingerprint = hashlib.sha256(
            json.dumps([caller.pk, target.pk, parts], sort_keys=True).encode()
        ).hexdigest()
        is_decided = i >= pending
        escalations.append(
            Escalation(
                kind="approval",
                priority=priority,
                priority_rank=PRIORITY_RANK[priority],
                task=task,
                agent=caller,
                question=text,
                reason=f"matrix rule {caller.slug} -> {target.slug} needs approval",
                deadline=now + timedelta(minutes=rng.randrange(5, 120)),
                fingerprint=fingerprint,
                claimed_by_name="dana" if rng.random() < 0.05 and not is_decided else "",
                status="approved" if is_decided else "pending",
                decided_by_name="erin" if is_decided else "",
                decided_at=now if is_decided else None,
            )
        )
    with transaction.atomic():
        Task.objects.bulk_create(tasks, batch_size=500)
        Message.objects.bulk_create(messages, batch_size=500)
        for escalation, message in zip(escalations, messages, strict=True):
            escalation.message = message
        Escalation.objects.bulk_create(escalations, batch_size=500)
    return [a.slug for a in made]


def get(client: Any, url: str, **headers: str) -> tuple[float, bytes]:
    start = time.perf_counter()
    response = client.get(url, **headers)
    elapsed = (time.perf_counter() - start) * 1000
    assert response.status_code == 200, (url, response.status_code)
    return elapsed, response.content


def report(label: str, samples: list[float], body: bytes) -> None:
    cards = body.count(b'<article id="escalation-')
    lines = body.count(b'<tr id="escalation-')
    shown = f"{cards} cards" if cards else f"{lines} lines"
    print(
        f"  {label:<34} p50 {statistics.median(samples):7.1f} ms   max {max(samples):7.1f} ms"
        f"   {shown}, {len(body) / 1e3:.0f} kB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pending", type=int, default=10_000)
    parser.add_argument("--decided", type=int, default=500)
    parser.add_argument("--agents", type=int, default=20)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()

    os.environ.setdefault("ALLOWED_HOSTS", "testserver")
    tmp = django_with_fresh_db("escalations")
    from django.db import connection
    from django.test import Client

    from a2a_core.services.users import user_create

    print(
        f"populating {args.pending:,} pending and {args.decided:,} decided escalations "
        f"among {args.agents} agents ({connection.vendor}, {tmp})"
    )
    slugs = populate(args.pending, args.decided, args.agents, random.Random(args.seed))
    gc.collect()
    gc.freeze()
    client = Client()
    client.force_login(user_create(username="dana", password="bench-password-1", role="operator"))

    cold, _ = get(client, "/escalations/")
    print(f"\nfirst render, first request of a fresh process: {cold:.1f} ms")
    print(f"the inbox with {args.pending:,} pending, {args.runs} warm runs each:")
    first: list[float] = []
    body = b""
    for _ in range(args.runs):
        elapsed, body = get(client, "/escalations/")
        first.append(elapsed)
    report("first render (no filter)", first, body)
    page_html = body
    cases = [
        ("agent", f"/escalations/?agent={slugs[3]}"),
        ("pair", f"/escalations/?pair={slugs[3]}:{slugs[4]}"),
        ("search", "/escalations/?q=rotate+key"),
        ("sort by deadline", "/escalations/?sort=deadline"),
        ("grouped by agent", "/escalations/?group=agent"),
        ("grouped by chain", "/escalations/?group=chain"),
        ("claimed by someone", "/escalations/?state=claimed"),
        ("the last page", "/escalations/?last=1"),
        ("cards (50 a page)", "/escalations/?view=cards"),
    ]
    for label, url in cases:
        samples = []
        for _ in range(args.runs):
            elapsed, body = get(client, url)
            samples.append(elapsed)
        report(label, samples, body)
    samples = []
    for _ in range(args.runs):
        elapsed, body = get(client, "/escalations/", HTTP_HX_REQUEST="true")
        samples.append(elapsed)
    report("live refresh (htmx, the list)", samples, body)
    p50 = statistics.median(first)
    size = len(page_html) / 1000
    print(
        f"\nfirst page server render p50 {p50:.1f} ms with {args.pending:,} pending "
        f"(target < 150 ms: {'met' if p50 < 150 else 'NOT met'}; max {max(first):.1f} ms, "
        f"cold {cold:.1f} ms)"
    )
    print(
        f"dense list HTML {size:.0f} kB for its first page "
        f"(target < 100 KB: {'met' if size < 100 else 'NOT met'})"
    )


if __name__ == "__main__":
    main()
