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

import re
import statistics

from audit_page import fill_and_log_in, get, report, sample


def main() -> None:
    filled = fill_and_log_in("traces", "engineer")
    client, args = filled.client, filled.args
    since, until, agent, other = filled.since, filled.until, filled.agent, filled.other

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
