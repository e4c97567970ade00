"""`a2a serve`: run the hub (uvicorn workers or daphne) and its demo agents, print where to log
in, replace a worker that dies (`a2a_core.cli.supervise`), stop cleanly."""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.conf import settings
from prometheus_client import multiprocess

from a2a_core.cli.output import fail
from a2a_core.cli.supervise import GaveUp, Supervisor
from a2a_core.errors import HubError

if TYPE_CHECKING:
    from a2a_core.demo.launch import Demo


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("serve", help="run the hub (and its demo agents) until Ctrl-C")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--no-demo", action="store_true", help="start the hub alone")
    p.add_argument("--workers", type=int, default=1, help="hub processes (needs REDIS_URL for >1)")
    p.add_argument(
        "--server",
        choices=["uvicorn", "daphne"],
        default=os.environ.get("HUB_SERVER", "uvicorn"),
        help="the ASGI server (default uvicorn: faster here, and it runs clean shutdowns)",
    )
    p.set_defaults(handler=serve)

    p = sub.add_parser("admin-login", help="create the admin user or give it a new password")
    p.add_argument("--username", default="admin")
    p.set_defaults(handler=admin_login)


def fresh_admin_login(username: str = "admin") -> str:
    """Create `username` as a superuser, or reset its password; return the new password."""
    from a2a_core.services.users import user_ensure_admin

    password = secrets.token_urlsafe(12)
    user_ensure_admin(username=username, password=password)
    return password


def admin_login(args: argparse.Namespace, out: Any) -> None:
    password = fresh_admin_login(args.username)
    out.write(f"username: {args.username}\npassword: {password}")


def _port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def grpc_port(port: int) -> int:
    """The gRPC port the hub serves beside HTTP `port`: HUB_GRPC_PORT, else `port` + 1;
    0 when HUB_GRPC_PORT is 0 or "off"."""
    if os.environ.get("HUB_GRPC_PORT", "") == "":
        return port + 1
    return int(settings.HUB_GRPC_PORT)


def hub_process(
    host: str, port: int, workers: int, server: str, metrics_dir: str, *, quiet: bool = False
) -> Callable[[], subprocess.Popen[bytes]]:
    """What starts one of the hub's server processes: daphne, or a uvicorn worker that
    listens on the port itself (see `a2a_core.cli.worker`)."""
    # Each worker keeps its share of every per-agent limit (see a2a_core.delivery.slots).
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="config.settings", HUB_WORKERS=str(workers))
    env["HUB_GRPC_PORT"] = str(grpc_port(port))
    env.setdefault("HUB_GRPC_HOST", host)
    if quiet:
        # With the demo's traffic, a log line per call would bury the demo's own lines.
        env.setdefault("HUB_LOG_LEVEL", "WARNING")
    if metrics_dir:
        # Every worker writes its counters there; each scrape of /metrics sums them.
        env["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir
    if server == "daphne":
        args = ["-m", "daphne", "--verbosity", "0", "-b", host, "-p", str(port)]
        command = [sys.executable, *args, "config.asgi:application"]
    else:
        command = [sys.executable, "-m", "a2a_core.cli.worker", host, str(port)]
    return lambda: subprocess.Popen(command, env=env)


def spawn_hub(
    host: str, port: int, workers: int, server: str, metrics_dir: str, *, quiet: bool = False
) -> list[subprocess.Popen[bytes]]:
    """Start the hub's server processes once (daphne: one), unsupervised."""
    start = hub_process(host, port, workers, server, metrics_dir, quiet=quiet)
    return [start() for _ in range(1 if server == "daphne" else workers)]


def _port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def _start_demo(host: str, port: int, out: Any) -> Demo | None:
    """Register the demo cast and start its processes; None (said why) if it cannot start."""
    from a2a_core.demo.launch import demo_start

    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"  # the agents run here: they reach the hub on loopback
    hub_url = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
    try:
        return demo_start(hub_url=hub_url, hub_port=port)
    except HubError as exc:
        out.write(f"  the demo did not start: {exc.message}")
        return None


def serve(args: argparse.Namespace, out: Any) -> None:
    # Every refusal comes before anything changes (the admin's password among them).
    if args.workers < 1:
        raise fail(f"--workers must be at least 1, got {args.workers}")
    if args.workers > 1 and args.server == "daphne":
        raise fail("several workers are run with uvicorn (--server uvicorn)")
    if args.workers > 1 and not settings.REDIS_URL:
        raise fail("several workers need REDIS_URL (their events travel through Redis)")
    if not _port_free(args.host, args.port):
        raise fail(f"port {args.port} on {args.host} is in use; pick another with --port")
    grpc = grpc_port(args.port)
    if grpc and not _port_free(args.host, grpc):
        raise fail(
            f"port {grpc} on {args.host} (gRPC) is in use; pick another with HUB_GRPC_PORT, "
            "or turn gRPC off with HUB_GRPC_PORT=off"
        )
    password = fresh_admin_login()
    metrics_dir = ""
    if args.workers > 1 and not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        metrics_dir = tempfile.mkdtemp(prefix="a2a-hub-metrics-")
    start = hub_process(
        args.host, args.port, args.workers, args.server, metrics_dir, quiet=not args.no_demo
    )
    shared_metrics = metrics_dir or os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")
    supervisor = Supervisor(
        start,
        1 if args.server == "daphne" else args.workers,
        say=out.write,
        # A dead worker's live gauges (queue sizes) are no longer true: /metrics drops them.
        on_death=(lambda pid: multiprocess.mark_process_dead(pid, shared_metrics))
        if shared_metrics
        else None,
    )
    demo: Demo | None = None

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    # Started in the background by a script, a process inherits SIGINT ignored; `kill -INT`
    # must still stop the hub the way Ctrl-C does.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        supervisor.start()
        deadline = time.monotonic() + 60
        while not _port_open(args.host, args.port):
            supervisor.check()
            if time.monotonic() > deadline:
                raise fail("the hub did not start within 60 s; see the messages above")
            time.sleep(0.1)
        if not args.no_demo:
            demo = _start_demo(args.host, args.port, out)
        base = f"http://{args.host}:{args.port}"
        out.write("")
        out.write(f"  A2A Hub is running: {base}/")
        out.write(f"  Log in as  admin / {password}")
        out.write(
            f"  Agents reach the hub at {base}/a2a/<agent>/ (card: /.well-known/agent-card.json)"
        )
        if grpc:
            host = f"[{args.host}]" if ":" in args.host else args.host
            out.write(f"  and over gRPC at {host}:{grpc} (tenant: the agent's name)")
        if demo is not None:
            out.write(f"  {demo.summary()}")
        out.write(
            "  Ctrl-C stops the hub." if demo is None else "  Ctrl-C stops the hub and the demo."
        )
        out.write("")
        demo_ended = False
        while True:
            supervisor.check()
            if demo is not None and not demo_ended:
                codes = [p.returncode for p in demo.processes if p.poll() is not None]
                if codes:
                    demo_ended = True
                    out.write(f"  the demo agents stopped (exit {codes[0]}); the hub runs on")
            time.sleep(0.2)
    except GaveUp as exc:
        raise fail(str(exc)) from None
    except KeyboardInterrupt:
        out.write("stopping…")
    finally:
        if demo is not None:
            demo.stop()  # the agents first, while the hub still answers them
        supervisor.stop()
        if metrics_dir:
            shutil.rmtree(metrics_dir, ignore_errors=True)
