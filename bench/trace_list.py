"""The trace list over 1,000,000 stored messages (target: first page under 200 ms on SQLite,
like the audit's).

    python bench/trace_list.py [--messages 1000000] [--agents 50] [--runs 7] [--seed 3]

Fills a fresh database as `audit_page.py` does (its `populate`: conversations on tasks in
every state, refusals without a task, holds and redirects, over 30 days), then times, through
the real view (Django's test client logged in as a viewer): the first page of /traces/, an
older page (cursor), and the filters — on the root (state, time range), and about whole
traces (an agent anywhere, a pair, a duration, errors, a decision), which look through at
most `WINDOW` traces a page. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import re
import statistics
import time
from datetime import datetime, timedelta

from _setup import django_with_fresh_db
from audit_page import get, populate, report, sample


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--agents", type=int, default=50)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args()

    os.environ.setdefault("ALLOWED_HOSTS", "testserver")
    tmp = django_with_fresh_db("traces")
    from django.db import connection
    from django.test import Client

    from a2a_core.services.users import user_create

    print(f"populating {args.messages:,} messages among {args.agents} agents ({connection.vendor})")
    start = time.perf_counter()
    made = populate(args.messages, args.agents, random.Random(args.seed))
    print(f"populated in {time.perf_counter() - start:.0f} s ({tmp})")
    gc.collect()
    gc.freeze()

    client = Client()
    client.force_login(user_create(username="engineer", password="bench-password-1", role="viewer"))
    newest: datetime = made["newest"]
    since = (newest - timedelta(days=3)).strftime("%Y-%m-%dT%H:%M")
    until = (newest - timedelta(days=2)).strftime("%Y-%m-%dT%H:%M")
    agent, other = made["slugs"][3], made["slugs"][7]

    cold, _ = get(client, "/traces/")
    print(f"\nfirst trace list page, first request of a fresh process: {cold:.1f} ms")
    first, body = sample(client, "/traces/", args.runs)
    older = re.search(rb'rel="next" href="\?cursor=([\w-]+)"', body)
    assert older is not None, "the first page links to older traces"
    print(f"trace list pages over {args.messages:,} messages, {args.runs} warm runs each:")
    report("first page (no filter)", first, _rows(body))
    cases = [
        ("older page (cursor)", f"/traces/?cursor={older[1].decode()}"),
        ("root state (running)", "/traces/?state=running"),
        ("time range (one day)", f"/traces/?since={since}&until={until}"),
        ("agent anywhere", f"/traces/?agent={agent}"),
        ("pair (caller -> target)", f"/traces/?caller={agent}&target={other}"),
        ("took at least 2 s", "/traces/?min=2s"),
        ("with errors", "/traces/?error=1"),
        ("decision (refused)", "/traces/?decision=reject"),
        ("agent + time range", f"/traces/?agent={agent}&since={since}&until={until}"),
    ]
    for label, url in cases:
        samples, body = sample(client, url, args.runs)
        report(label, samples, _rows(body))

    p50 = statistics.median(first)
    print(
        f"\ntarget: first trace list page under 200 ms over {args.messages:,} messages -> "
        f"{'met' if p50 < 200 else 'NOT met'} (p50 {p50:.1f} ms, max {max(first):.1f} ms; "
        f"cold {cold:.1f} ms)"
    )


def _rows(html: bytes) -> str:
    shown = html.count(b"<tr data-trace=")
    scanned = re.search(rb"Looked through ([\d,]+) traces", html)
    return f"{shown} rows" + (f", looked through {scanned[1].decode()}" if scanned else "")


if __name__ == "__main__":
    main()
