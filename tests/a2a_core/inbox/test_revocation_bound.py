"""Rotation and suspension reach every worker by the time the command returns: the old token
(or the suspended agent) is refused on JSON-RPC, REST and gRPC, and a websocket or long-poll
opened with it is sent no delivery — in the embedded hub, where the `a2a` command is another
process that shares no channel layer with it, and in `a2a serve --workers 2` on PostgreSQL +
Redis, at each worker.

Two agents are changed in each test: `alpha`, a calling agent whose token the probes use on
each binding (an agent with no inbox session, whose presence changes nothing meanwhile), and
`duc`, an inbox agent holding a websocket and a long-poll."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import httpx
import pytest
import websockets
from a2a.types import a2a_pb2_grpc
from a2a.types.a2a_pb2 import ListTasksRequest
from django.db import connection

from a2a_core.asyncdb import db
from a2a_core.models import AgentStatus
from a2a_core.services.agents import agent_set_presence
from tests.a2a_core.cli.helpers import MANAGE, cli_environment, run_cli
from tests.a2a_core.cli.test_serve_supervisor import Scaled
from tests.a2a_core.cli.test_serve_workers import ESTABLISHED, owner_counts
from tests.a2a_core.inbox.test_inbox_agents import inbox_agent
from tests.conftest import _close_database_connections
from tests.factories import register
from tests.process_state import forget_cached_agents

pytestmark = pytest.mark.live

V1 = {"A2A-Version": "1.0"}
LIST_TASKS = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}

# What each command makes of the agent's old token: (JSON-RPC code, HTTP status, gRPC code,
# websocket close code).
REFUSED = {
    "rotate": (-32050, 401, grpc.StatusCode.UNAUTHENTICATED, 4401),
    "suspend": (-32051, 403, grpc.StatusCode.PERMISSION_DENIED, 4403),
}
COMMANDS = {"rotate": ("token", "rotate"), "suspend": ("suspend",)}


class Probe:
    """One connection of each binding, held open, calling as `alpha` with its token (ListTasks
    at its own address)."""

    def __init__(self, url: str, grpc_address: str, token: str) -> None:
        self.url = url
        self.token = token
        auth = {"Authorization": f"Bearer {token}", **V1}
        self.http = httpx.AsyncClient(
            headers=auth, timeout=30, limits=httpx.Limits(max_connections=1)
        )
        # A connection of its own (channels share one by default).
        self.channel = grpc.aio.insecure_channel(
            grpc_address, options=[("grpc.use_local_subchannel_pool", 1)]
        )
        self.stub = a2a_pb2_grpc.A2AServiceStub(self.channel)

    async def answers(self) -> tuple[Any, int, Any]:
        """(the JSON-RPC error code or "ok", the REST status, the gRPC code) of ListTasks."""
        rpc = (await self.http.post(f"{self.url}/a2a/alpha/", json=LIST_TASKS)).json()
        rest = await self.http.get(f"{self.url}/a2a/alpha/rest/tasks")
        try:
            await self.stub.ListTasks(
                ListTasksRequest(tenant="alpha"),
                metadata=(("authorization", f"Bearer {self.token}"), ("a2a-version", "1.0")),
            )
            code: Any = grpc.StatusCode.OK
        except grpc.aio.AioRpcError as exc:
            code = exc.code()
        return rpc["error"]["code"] if "error" in rpc else "ok", rest.status_code, code

    async def close(self) -> None:
        await self.http.aclose()
        await self.channel.close()


async def run_command(command: str, slug: str, probes: Sequence[Probe] = ()) -> None:
    """Run the `a2a` command on `slug` in its own process while the probes keep calling with
    their token, as an agent's traffic goes on while an operator acts: the workers' caches
    hold the agent as it was until the change."""
    done = asyncio.ensure_future(asyncio.to_thread(run_cli, *COMMANDS[command], slug))
    while not done.done():
        await asyncio.gather(*(probe.answers() for probe in probes))
        await asyncio.sleep(0.1)
    ran = await done
    assert ran.returncode == 0, ran.stderr


async def open_inbox(url: str, token: str) -> Any:
    ws = await websockets.connect(
        url.replace("http://", "ws://") + "/ws/agents/duc/",
        additional_headers={"Authorization": f"Bearer {token}"},
    )
    hello = json.loads(await ws.recv())
    assert hello["type"] == "hello", hello
    return ws


async def frames_until_closed(ws: Any, within: float = 10.0) -> tuple[list[str], int | None]:
    """The types of the frames the hub sends until it closes the connection, and its code."""
    kinds: list[str] = []
    with contextlib.suppress(websockets.ConnectionClosed):
        async with asyncio.timeout(within):
            while True:
                kinds.append(json.loads(await ws.recv())["type"])
    return kinds, ws.close_code


async def queue_work(url: str, caller: str, command: str) -> None:
    """Another caller sends duc a message: a delivery for its inbox (for a suspended duc, the
    policy refuses it instead)."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {"messageId": "after", "role": "ROLE_USER", "parts": [{"text": "hi"}]},
            "configuration": {"returnImmediately": True},
        },
    }
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {caller}", **V1}) as http:
        answer = (await http.post(f"{url}/a2a/duc/", json=body)).json()
    if command == "suspend":
        refused = ((answer.get("error") or {}).get("data") or [{}])[0].get("metadata", {})
        assert refused.get("reason") == "target_suspended", answer
    else:
        assert "result" in answer, answer


@pytest.mark.parametrize("command", ["rotate", "suspend"])
async def test_once_the_command_returns_the_embedded_hub_refuses_and_delivers_nothing(
    grpc_hub,
    hub_grpc_port,
    command,
):
    _, duc = await inbox_agent("duc")
    _, alpha = await grpc_hub.caller("alpha")
    _, bravo = await grpc_hub.caller("bravo")
    probe = Probe(grpc_hub.url, f"127.0.0.1:{hub_grpc_port}", alpha)
    try:
        assert await probe.answers() == ("ok", 200, grpc.StatusCode.OK)
        inbox = await open_inbox(grpc_hub.url, duc)
        async with httpx.AsyncClient(
            base_url=grpc_hub.url, headers={"Authorization": f"Bearer {duc}"}, timeout=30
        ) as poller:
            await poller.get("/inbox/duc/", params={"wait": 0})
            poll = asyncio.ensure_future(poller.get("/inbox/duc/", params={"wait": 20}))
            # Other processes, sharing no channel layer with the hub when it is embedded.
            await run_command(command, "duc")
            await queue_work(grpc_hub.url, bravo, command)
            polled = await poll
        kinds, closed = await frames_until_closed(inbox)
        await run_command(command, "alpha", [probe])
        answers = await probe.answers()
    finally:
        await probe.close()
    rpc, rest, grpc_code, ws_code = REFUSED[command]
    assert answers == (rpc, rest, grpc_code)
    assert "delivery" not in kinds and closed == ws_code, (kinds, closed)
    assert polled.status_code == rest, polled.text


# The bound at the worker, whoever commits the change: an agent read just before a change
# another process commits is read again within it.
BOUND_SECONDS = 1.0
CHANGE = """
import os, sys
from a2a_core.models import Agent
from a2a_core.services import agents
print("ready", flush=True)
sys.stdin.readline()
for agent in Agent.objects.filter(slug__in=["alpha", "duc"]):
    if os.environ["CHANGE"] == "rotate":
        agents.agent_token_rotate(agent=agent)
    else:
        agents.agent_suspend(agent=agent)
print("committed", flush=True)
"""


async def change_process(command: str, **env: str) -> asyncio.subprocess.Process:
    """Another process, started and ready to commit the change to alpha and duc."""
    other = await asyncio.create_subprocess_exec(
        *MANAGE,
        "shell",
        "--verbosity",
        "0",
        "-c",
        CHANGE,
        env={**cli_environment(), "CHANGE": command, **env},
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert other.stdout is not None
    assert await asyncio.wait_for(other.stdout.readline(), 60) == b"ready\n"
    return other


async def commit_change(other: asyncio.subprocess.Process) -> None:
    """Tell the process to commit the change; return once it has."""
    assert other.stdin is not None and other.stdout is not None
    other.stdin.write(b"go\n")
    await other.stdin.drain()
    assert await asyncio.wait_for(other.stdout.readline(), 60) == b"committed\n"


async def stop(other: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError):
        other.kill()
    await other.wait()


@pytest.mark.parametrize("command", ["rotate", "suspend"])
async def test_a_change_another_process_commits_reaches_the_embedded_hub_within_the_bound(
    grpc_hub,
    hub_grpc_port,
    command,
):
    _, duc = await inbox_agent("duc")
    _, alpha = await grpc_hub.caller("alpha")
    _, bravo = await grpc_hub.caller("bravo")
    other = await change_process(command)
    probe = Probe(grpc_hub.url, f"127.0.0.1:{hub_grpc_port}", alpha)
    try:
        inbox = await open_inbox(grpc_hub.url, duc)
        forget_cached_agents()  # the hub reads the agents just before the change: the worst case
        assert await probe.answers() == ("ok", 200, grpc.StatusCode.OK)
        await commit_change(other)
        await queue_work(grpc_hub.url, bravo, command)
        await asyncio.sleep(BOUND_SECONDS)
        answers = await probe.answers()
        kinds, closed = await frames_until_closed(inbox)
    finally:
        await probe.close()
        await stop(other)
    rpc, rest, grpc_code, ws_code = REFUSED[command]
    assert answers == (rpc, rest, grpc_code)
    assert "delivery" not in kinds and closed == ws_code, (kinds, closed)


# --- a2a serve --workers 2, PostgreSQL + Redis -----------------------------------------------

scaled_only = pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="scaled mode (PostgreSQL + Redis): covered by the suite's second run",
)


@pytest.fixture
def scaled(transactional_db: None, tmp_path: Path):
    hub = Scaled(tmp_path)
    yield hub
    with contextlib.suppress(ProcessLookupError):
        os.killpg(hub.process.pid, signal.SIGKILL)
    hub.process.wait(10)
    _close_database_connections()


def _tcp(port: int) -> list[tuple[int, int, str]]:
    """(local port, remote port, inode) of this machine's established loopback TCP sockets
    with `port` at either end."""
    rows = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            fields = row.split()
            local = int(fields[1].rsplit(":", 1)[1], 16)
            remote = int(fields[2].rsplit(":", 1)[1], 16)
            if fields[3] == ESTABLISHED and port in (local, remote):
                rows.append((local, remote, fields[9]))
    return rows


def _workers_serving_me(workers: list[int], port: int) -> set[int]:
    """The workers holding the server end of a connection this process opened to `port`."""
    rows = _tcp(port)
    clients = {inode: local for local, _, inode in rows if local != port}
    my_ports = {local for inode, local in clients.items() if owner_counts([os.getpid()], {inode})}
    served = {inode for local, remote, inode in rows if local == port and remote in my_ports}
    return set(owner_counts(workers, served))


async def _probes_on_both_workers(scaled: Scaled, token: str) -> list[Probe]:
    """Probes whose HTTP connections, and whose gRPC channels, reach both workers; each has
    called once with the token, so that both workers hold the agent in their caches."""
    workers = await asyncio.to_thread(scaled.listening_workers)
    probes: list[Probe] = []
    for _ in range(24):
        probe = Probe(scaled.url, f"127.0.0.1:{scaled.port + 1}", token)
        probes.append(probe)
        assert await probe.answers() == ("ok", 200, grpc.StatusCode.OK)
        http = _workers_serving_me(workers, scaled.port)
        grpc_served = _workers_serving_me(workers, scaled.port + 1)
        if len(probes) >= 4 and http == grpc_served == set(workers):
            return probes
    raise AssertionError(f"connections did not reach both workers: {http}, {grpc_served}")


@scaled_only
@pytest.mark.parametrize("command", ["rotate", "suspend"])
async def test_once_the_command_returns_every_worker_of_a2a_serve_refuses_and_delivers_nothing(
    scaled, command
):
    duc = (await db(register, "duc", inbox=True)).token or ""
    alpha = (await db(register, "alpha")).token or ""
    bravo = (await db(register, "bravo")).token or ""
    probes = await _probes_on_both_workers(scaled, alpha)
    inboxes = [await open_inbox(scaled.url, duc) for _ in range(4)]
    try:
        await run_command(command, "duc")
        await queue_work(scaled.url, bravo, command)
        ended = [await frames_until_closed(inbox) for inbox in inboxes]
        await run_command(command, "alpha", probes)
        answers = [await probe.answers() for probe in probes]
    finally:
        for probe in probes:
            await probe.close()
    rpc, rest, grpc_code, ws_code = REFUSED[command]
    assert answers == [(rpc, rest, grpc_code)] * len(probes)
    assert [(("delivery" in kinds), code) for kinds, code in ended] == [(False, ws_code)] * 4


@scaled_only
@pytest.mark.parametrize("command", ["rotate", "suspend"])
async def test_a_change_no_event_announces_reaches_every_worker_of_a2a_serve_within_the_bound(
    scaled, command
):
    # Made by a process without REDIS_URL (an `a2a` command run without it, say): no event
    # reaches the workers, and each must read the agents again within the bound by itself.
    registered = await db(register, "alpha")
    agent, alpha = registered.agent, registered.token or ""
    await db(register, "duc", inbox=True)
    other = await change_process(command, REDIS_URL="")
    probes = await _probes_on_both_workers(scaled, alpha)
    try:
        # Every worker reads alpha afresh just before the change: the worst case. (An event
        # of this process, through Redis, makes them forget it.)
        await db(agent_set_presence, agent_id=agent.pk, status=AgentStatus.ONLINE)
        await asyncio.sleep(0.5)
        assert [await probe.answers() for probe in probes] == [
            ("ok", 200, grpc.StatusCode.OK)
        ] * len(probes)
        await commit_change(other)
        await asyncio.sleep(BOUND_SECONDS)
        answers = [await probe.answers() for probe in probes]
    finally:
        for probe in probes:
            await probe.close()
        await stop(other)
    rpc, rest, grpc_code, _ = REFUSED[command]
    assert answers == [(rpc, rest, grpc_code)] * len(probes)
