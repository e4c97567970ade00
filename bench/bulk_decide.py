"""Bulk decisions: an operator approves held messages from the inbox, several at a time.

    python bench/bulk_decide.py [--sizes 1,20,50] [--rounds 3]

One run: a fresh database (SQLite, or the empty PostgreSQL database DATABASE_URL names: one
that holds a hub already is refused; in-memory channel layer unless REDIS_URL is set), the
bench echo agent and the hub (uvicorn, one worker, as `a2a serve` runs it) as separate
processes, a policy that holds every call to the echo agent for approval, and an operator who
logs in through the login form. SendMessage calls to the echo agent are held until there are
enough (each answers auth-required). Then the operator approves them, oldest first, through
the inbox's bulk form as the browser sends it (`POST /escalations/bulk/`, htmx headers and
CSRF token): each size of `--sizes` in turn, `--rounds` times. After each answer the bench
waits until every message it approved has been delivered and its task has completed, so one
decision's deliveries never overlap the next decision.

Printed per size: the answer's p50 and max, the same per decision, the ratio of per decision to
size 1's (the baseline, same run), and the p50 time from the click until every approved task
completed. Numbers are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import aiohttp
import websockets
from load import free_port, send_message_body, serve_hub, spawn, stop, wait_for_port
from throughput import OUT_OF_REACH, prepare_hub
from websockets.typing import Origin

USERNAME = "bench-operator"
PASSWORD = "bench-operator-password-2026"
HELD_AT_ONCE = 8


def prepare(data_dir: Path, echo_port: int) -> tuple[dict[str, str], str]:
    """Fresh database, echo agent and caller registered, every call held, an operator."""
    env, token = prepare_hub(data_dir, echo_port)
    from django.db import connections

    from a2a_core.services.policy import policy_publish
    from a2a_core.services.users import user_create

    policy_publish(
        document={
            **OUT_OF_REACH,
            "matrix": [{"caller": "bench-caller", "target": "echo", "action": "approve"}],
        },
        reason="bench: hold every call for approval",
    )
    user_create(username=USERNAME, password=PASSWORD, role="operator")
    connections.close_all()
    return env, token


def pending_ids() -> list[int]:
    from django.db import connections

    from a2a_core.models import Escalation

    ids = list(
        Escalation.objects.filter(status="pending").order_by("pk").values_list("pk", flat=True)
    )
    connections.close_all()
    return ids


def completed(ids: list[int]) -> int:
    from django.db import connections

    from a2a_core.models import Escalation

    done = Escalation.objects.filter(pk__in=ids, task__state="completed").count()
    connections.close_all()
    return done


async def hold(hub: str, token: str, count: int) -> None:
    """`count` SendMessage calls, each held for approval."""
    headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {token}"}
    gate = asyncio.Semaphore(HELD_AT_ONCE)
    async with aiohttp.ClientSession(headers=headers) as session:

        async def call(i: int) -> None:
            async with gate:
                body = send_message_body(f"deploy service #{i}")
                async with session.post(f"{hub}/a2a/echo/", json=body) as response:
                    answer = await response.json()
            state = answer.get("result", {}).get("task", {}).get("status", {}).get("state")
            if state != "TASK_STATE_AUTH_REQUIRED":
                raise RuntimeError(f"call {i} was not held: {answer}")

        await asyncio.gather(*(call(i) for i in range(count)))


async def log_in(http: aiohttp.ClientSession, hub: str) -> str:
    """Log the operator in through the login form; return the CSRF token."""
    async with http.get(f"{hub}/login/") as response:
        response.raise_for_status()
    csrf = next(c.value for c in http.cookie_jar if c.key == "csrftoken")
    form = {"username": USERNAME, "password": PASSWORD, "csrfmiddlewaretoken": csrf}
    async with http.post(f"{hub}/login/", data=form, allow_redirects=False) as response:
        if response.status != 302:
            raise RuntimeError(f"login failed: {response.status} {await response.text()}")
    return next(c.value for c in http.cookie_jar if c.key == "csrftoken")


async def approve(
    http: aiohttp.ClientSession, hub: str, headers: dict[str, str], chosen: list[int]
) -> tuple[float, float]:
    """Approve `chosen` in one bulk; (answer ms, click to every task completed ms)."""
    form = [("action", "approve"), *(("ids", str(pk)) for pk in chosen)]
    began = time.perf_counter()
    async with http.post(f"{hub}/escalations/bulk/", data=form, headers=headers) as response:
        page = await response.text()
    answered = time.perf_counter()
    if f"Approved {len(chosen)} of {len(chosen)}." not in page:
        raise RuntimeError(f"bulk approval answered {response.status}: {page}")
    while True:
        if await asyncio.to_thread(completed, chosen) == len(chosen):
            break
        await asyncio.sleep(0.01)
    return (answered - began) * 1000, (time.perf_counter() - began) * 1000


async def inbox_page(hub: str, http: aiohttp.ClientSession, cookie: str, gets: list[int]) -> None:
    """One open inbox page: on each live update that touches escalations, the page fetches
    the inbox again, as its htmx does (`hx-sync` replace: updates that arrive meanwhile
    make one more fetch). Counts its fetches in `gets`."""
    wanted = asyncio.Event()

    async def refresh() -> None:
        while True:
            await wanted.wait()
            wanted.clear()
            async with http.get(f"{hub}/escalations/", headers={"HX-Request": "true"}) as r:
                await r.read()
            gets[0] += 1

    fetcher = asyncio.create_task(refresh())
    url = hub.replace("http", "ws", 1) + "/ws/dashboard/?page=escalations"
    try:
        async with websockets.connect(
            url, origin=Origin(hub), additional_headers={"Cookie": cookie}, max_size=None
        ) as ws:
            async for frame in ws:
                if "escalations-refresh" in str(frame):
                    wanted.set()
    finally:
        fetcher.cancel()


async def decide(
    hub: str, ids: list[int], sizes: list[int], rounds: int, pages: int
) -> tuple[dict[int, list[tuple[float, float]]], int]:
    """size -> (answer ms, click to every task completed ms) per bulk approval, with `pages`
    inbox pages open; and how many times those pages fetched the inbox."""
    timings: dict[int, list[tuple[float, float]]] = defaultdict(list)
    jar = aiohttp.CookieJar(unsafe=True)  # cookies from 127.0.0.1
    gets = [0]
    async with aiohttp.ClientSession(cookie_jar=jar) as http:
        csrf = await log_in(http, hub)
        cookie = "; ".join(f"{c.key}={c.value}" for c in jar)
        open_pages = [
            asyncio.create_task(inbox_page(hub, http, cookie, gets)) for _ in range(pages)
        ]
        headers = {"HX-Request": "true", "X-CSRFToken": csrf, "Referer": f"{hub}/escalations/"}
        queue = iter(ids)
        await approve(http, hub, headers, [next(queue)])  # a fresh process's first: not counted
        for _ in range(rounds):
            for size in sizes:
                timings[size].append(
                    await approve(http, hub, headers, [next(queue) for _ in range(size)])
                )
        for page in open_pages:
            page.cancel()
        await asyncio.gather(*open_pages, return_exceptions=True)
    return timings, gets[0]


def report(timings: dict[int, list[tuple[float, float]]]) -> None:
    base = statistics.median(answer for answer, _ in timings[min(timings)]) / min(timings)
    print(
        f"  {'size':>4}  {'answer p50':>10}  {'max':>7}  {'per decision':>12}  "
        f"{'vs size ' + str(min(timings)):>10}  {'all completed p50':>17}"
    )
    for size, rows in sorted(timings.items()):
        answers = [answer for answer, _ in rows]
        each = statistics.median(answers) / size
        print(
            f"  {size:>4}  {statistics.median(answers):>7.0f} ms  {max(answers):>4.0f} ms"
            f"  {each:>9.1f} ms  {each / base:>9.2f}x"
            f"  {statistics.median(done for _, done in rows):>14.0f} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1,20,50", help="decisions per bulk approval")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pages", type=int, default=1, help="inbox pages open meanwhile")
    args = parser.parse_args()
    sizes = sorted({int(size) for size in args.sizes.split(",")})
    if not sizes or sizes[0] < 1:
        raise SystemExit("--sizes: whole numbers of at least 1, comma-separated")
    needed = 1 + args.rounds * sum(sizes)

    echo_port, port = free_port(), free_port()
    data_dir = Path(tempfile.mkdtemp(prefix="hub-bench-bulk-"))
    echo = spawn(["bench/echo_agent.py", str(echo_port)])
    hub: subprocess.Popen[bytes] | None = None
    try:
        env, token = prepare(data_dir, echo_port)
        hub = serve_hub(port, env, "--lifespan", "on")
        wait_for_port(echo_port, echo)
        wait_for_port(port, hub)
        url = f"http://127.0.0.1:{port}"
        database = "PostgreSQL" if "postgres" in env["DATABASE_URL"] else "SQLite"
        layer = "Redis" if os.environ.get("REDIS_URL") else "in-memory layer"
        print(
            f"bulk approvals of {args.sizes} held messages, {args.pages} inbox page(s) open, "
            f"uvicorn x1 + {database} + {layer}"
        )
        print(f"holding {needed} calls to the echo agent ...")
        asyncio.run(hold(url, token, needed))
        ids = pending_ids()
        print(f"{len(ids)} held; approving them {args.rounds} rounds of {args.sizes}:")
        timings, gets = asyncio.run(decide(url, ids, sizes, args.rounds, args.pages))
        report(timings)
        print(f"the {args.pages} open inbox page(s) fetched the inbox {gets} times")
    except KeyboardInterrupt:
        print("interrupted")
    finally:
        stop(hub, echo)


if __name__ == "__main__":
    main()
