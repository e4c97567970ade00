"""Start the demo cast against a running hub: register it, publish its policy, run its two
processes (`a2a serve` does this unless `--no-demo`).

The agents' tokens reach the processes in a file only their user can read, which each process
deletes once read; they are never printed.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from typing import IO, Any

from django.conf import settings
from django.db import transaction

from a2a_core.demo import cast
from a2a_core.demo.common import CONFIG_ENV
from a2a_core.errors import Conflict
from a2a_core.models import DeliveryMode, PolicyVersion
from a2a_core.services.agents import agent_register, agent_token_rotate
from a2a_core.services.policy import policy_publish

# Endpoint agents listen on the hub's port + PORT_OFFSET + 1, + 2... when those are free
# (8101-8108 next to the default 8000), so their cards stay the same from one run to the next.
PORT_OFFSET = 100


@dataclass
class Demo:
    """The running cast: its two processes and who is in it."""

    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    endpoint: list[str] = field(default_factory=list)
    inbox: list[str] = field(default_factory=list)
    # The processes' configuration files: each deletes its own once read; `stop` makes sure.
    files: list[str] = field(default_factory=list)

    def summary(self) -> str:
        names = ", ".join([*self.endpoint, *self.inbox])
        return f"demo agents: {names} ({len(self.endpoint)} endpoint, {len(self.inbox)} inbox)"

    def stop(self, timeout: float = 5.0) -> None:
        """SIGTERM, then SIGKILL whatever is still running after `timeout` seconds."""
        for proc in self.processes:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.processes:
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for path in self.files:
            with contextlib.suppress(OSError):
                os.unlink(path)


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _any_free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def pick_ports(hub_port: int) -> dict[str, int]:
    """A loopback port for each endpoint agent: its usual one when free, else any free one."""
    ports: dict[str, int] = {}
    for i, member in enumerate(cast.ENDPOINTS, start=1):
        usual = hub_port + PORT_OFFSET + i
        ports[member.slug] = usual if usual <= 65535 and _port_free(usual) else _any_free_port()
    return ports


@transaction.atomic
def cast_register(*, ports: dict[str, int], hub_port: int) -> dict[str, str]:
    """Register every cast member (or refresh its card) and give each a fresh token; returns
    the tokens by agent. Idempotent apart from the tokens: an unchanged card changes nothing.
    Raises `ValidationFailed` or `Conflict` (a same-named agent with another card at the
    demo's version) — then the demo cannot start."""
    tokens: dict[str, str] = {}
    for member in cast.CAST:
        if member.endpoint:
            port = ports[member.slug]
            usual = hub_port + PORT_OFFSET + 1 + cast.ENDPOINTS.index(member)
            card = cast.card(
                member, f"http://127.0.0.1:{port}", port=None if port == usual else port
            )
            mode = DeliveryMode.ENDPOINT
        else:
            card, mode = cast.card(member), DeliveryMode.INBOX
        registration = agent_register(
            card=card,
            slug=member.slug,
            role=member.role,
            delivery_mode=mode,
            actor_label=cast.DEMO_ACTOR,
        )
        tokens[member.slug] = registration.token or agent_token_rotate(
            agent=registration.agent, actor_label=cast.DEMO_ACTOR
        )
    return tokens


@transaction.atomic
def demo_policy_publish() -> bool:
    """Make the demo policy the active one, unless someone else published the active policy
    (an admin's edit wins over the demo). True when a version was published."""
    active = PolicyVersion.objects.filter(is_active=True).first()
    if active is not None and active.author_label != cast.DEMO_ACTOR:
        return False
    try:
        policy_publish(document=cast.DEMO_POLICY, reason="demo", actor_label=cast.DEMO_ACTOR)
    except Conflict:  # the demo policy is active already
        return False
    return True


def _config_file(data: dict[str, Any]) -> str:
    fd, path = tempfile.mkstemp(prefix="a2a-demo-", suffix=".json")  # mode 0600
    with os.fdopen(fd, "w") as file:
        json.dump(data, file)
    return path


def demo_start(
    *,
    hub_url: str,
    hub_port: int,
    pace: float = 1.0,
    stdout: IO[Any] | int | None = None,
    stderr: IO[Any] | int | None = None,
) -> Demo:
    """Register the cast, publish the demo policy and start the two processes (the hub must
    be up). `pace` scales the pauses between scenarios. Stop them with `Demo.stop()`."""
    ports = pick_ports(hub_port)
    tokens = cast_register(ports=ports, hub_port=hub_port)
    demo_policy_publish()
    demo = Demo(endpoint=[m.slug for m in cast.ENDPOINTS], inbox=[m.slug for m in cast.INBOXES])
    groups = {
        "endpoints": [
            {"slug": m.slug, "port": ports[m.slug], "token": tokens[m.slug]} for m in cast.ENDPOINTS
        ],
        "inboxes": [{"slug": m.slug, "token": tokens[m.slug]} for m in cast.INBOXES],
    }
    try:
        for process, agents in groups.items():
            path = _config_file({"hubUrl": hub_url, "pace": pace, "agents": agents})
            demo.files.append(path)
            demo.processes.append(
                subprocess.Popen(
                    [sys.executable, "-m", "a2a_core.demo", process],
                    env={**os.environ, CONFIG_ENV: path, "PYTHONUNBUFFERED": "1"},
                    cwd=settings.BASE_DIR,
                    stdout=stdout,
                    stderr=stderr,
                )
            )
    except BaseException:
        demo.stop()
        raise
    return demo
