"""Fixtures shared by the whole suite."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.client.client import Client

from a2a_core import events
from a2a_core.asyncdb import db
from a2a_core.services.agents import agent_register
from tests.agents import ScriptedAgent
from tests.factories import register
from tests.servers import ServerThread


@pytest.fixture
def agent_pair(db):
    """Two registered endpoint agents, with their tokens."""
    return register("alpha"), register("beta")


@pytest.fixture(scope="session")
def django_db_modify_db_settings(
    django_db_modify_db_settings_parallel_suffix: None, request: pytest.FixtureRequest
) -> None:
    """A shard's own test databases (tests/shards.py)."""
    from tests.shards import name_test_databases

    name_test_databases(request.config)


@pytest.fixture(scope="session")
def hub_server(django_db_setup, django_db_blocker) -> Iterator[ServerThread]:
    """The hub's own ASGI app (config.asgi) served by uvicorn for the whole session."""
    from config.asgi import application

    server = ServerThread(application).start()
    yield server
    server.stop()
    _close_database_connections()


def _close_database_connections() -> None:
    """Release what the hub's database thread holds, so the test database can be dropped."""
    from django.db import connections

    from a2a_core.asyncdb import run_on_db_thread
    from a2a_core.storage.writers import writer

    run_on_db_thread(connections.close_all)
    writer().close_connections()
    for connection in connections.all():
        if hasattr(connection, "close_pool"):
            connection.close_pool()


def _drain_background_work(timeout: float = 10.0) -> None:
    """Wait for deliveries still running in the hub; cancel them after `timeout`."""
    from a2a_core.delivery import pump

    deadline = time.monotonic() + timeout
    while pump._pumps and time.monotonic() < deadline:
        time.sleep(0.02)
    loop = events._loop
    if pump._pumps and loop is not None and not loop.is_closed():
        asyncio.run_coroutine_threadsafe(pump.stop_pumps(), loop).result(5)


@dataclass
class Hub:
    """The running hub, seen from a test: register agents, get SDK clients for them."""

    url: str
    agents: list[ScriptedAgent] = field(default_factory=list)
    http_clients: list[httpx.AsyncClient] = field(default_factory=list)

    async def register_card(self, card: dict[str, Any], **kwargs: Any) -> tuple[Any, str]:
        result = await db(agent_register, card=card, **kwargs)
        assert result.token
        return result.agent, result.token

    async def caller(self, slug: str = "caller", **kwargs: Any) -> tuple[Any, str]:
        """A registered agent that only calls (its card points nowhere it serves)."""
        registration = await db(register, slug, **kwargs)
        assert registration.token
        return registration.agent, registration.token

    async def endpoint_agent(self, name: str, **kwargs: Any) -> tuple[ScriptedAgent, Any, str]:
        """A real a2a-sdk agent server, registered at the hub as an endpoint agent."""
        scripted = ScriptedAgent(name, **kwargs)
        agent, token = await self.register_card(scripted.card_json)
        scripted.start(hub_url=self.url, token=token)
        self.agents.append(scripted)
        return scripted, agent, token

    async def client(
        self,
        slug: str,
        token: str,
        *,
        binding: str = "JSONRPC",
        streaming: bool = False,
        **http: Any,
    ) -> Client:
        """The official a2a-sdk client, unchanged, for the agent `slug` through the hub."""
        headers = {"Authorization": f"Bearer {token}", **http.pop("headers", {})}
        http_client = httpx.AsyncClient(headers=headers, timeout=http.pop("timeout", 30))
        self.http_clients.append(http_client)
        factory = ClientFactory(
            ClientConfig(
                streaming=streaming, httpx_client=http_client, supported_protocol_bindings=[binding]
            )
        )
        return await factory.create_from_url(f"{self.url}/a2a/{slug}")

    async def close(self) -> None:
        for http_client in self.http_clients:
            await http_client.aclose()


@pytest.fixture(autouse=True, scope="session")
def _ctrl_c_reaches_what_tests_start() -> None:
    """A shell that starts a command in the background (`./hub test` runs its two suites side
    by side) starts it with SIGINT ignored, and every process it starts inherits that: a test
    pressing Ctrl-C on a command it runs would wait for nothing. Here, as in a terminal,
    SIGINT interrupts, and the processes tests start get it as a user's would."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True, scope="session")
def _fast_password_hashing() -> Iterator[None]:
    """Users are created in most dashboard tests; the production hasher would take half a
    second each. The login flow is the same with a cheap one."""
    from django.test import override_settings

    with override_settings(PASSWORD_HASHERS=["tests.hashers.QuickPBKDF2PasswordHasher"]):
        yield


@pytest.fixture(autouse=True, scope="session")
def _flush_again_after_a_deadlock() -> Iterator[None]:
    """The database is emptied after each live test with one TRUNCATE of every table. A write
    the hub had under way when the test ended (its last answer recorded, an inbox agent's
    goodbye) can lock those tables in another order; PostgreSQL then ends one of the two as a
    deadlock, and when that is the TRUNCATE the next test would start with rows of this one.
    The write is done by then: the TRUNCATE is run again. A TRUNCATE that waits on a lock for
    a minute (a connection left in a transaction) fails the test that left it, instead of
    stalling the run until CI gives up."""
    from django.db import OperationalError
    from django.db.backends.postgresql.operations import DatabaseOperations
    from psycopg.errors import DeadlockDetected

    flush = DatabaseOperations.execute_sql_flush

    def execute_sql_flush(self: Any, sql_list: Any) -> None:
        for attempt in range(3):
            try:
                return flush(self, ["SET LOCAL lock_timeout = '60s';", *sql_list])
            except OperationalError as exc:
                if not isinstance(exc.__cause__, DeadlockDetected) or attempt == 2:
                    raise
                time.sleep(0.1)

    DatabaseOperations.execute_sql_flush = execute_sql_flush  # type: ignore[method-assign]
    yield
    DatabaseOperations.execute_sql_flush = flush  # type: ignore[method-assign]


@pytest.fixture(autouse=True, scope="session")
def _no_vacuums_in_this_process() -> Iterator[None]:
    """The hub served in this process vacuums nothing on PostgreSQL: the tests of the vacuum
    (tests/a2a_core/storage/test_vacuum.py) start their own, and count the vacuums."""
    from django.test import override_settings

    with override_settings(HUB_PG_VACUUM_SECONDS=0):
        yield


@pytest.fixture(autouse=True)
def _fresh_shared_state() -> None:
    """Each test starts with no cached agents or policy and no rate windows or breakers
    (the database is reset between tests; Redis and process memory are not)."""
    from tests.process_state import forget_process_state

    forget_process_state()


@pytest.fixture
def hub(transactional_db, hub_server) -> Iterator[Hub]:
    """The live hub with a clean database; agents started by a test are stopped after it."""
    running = Hub(url=hub_server.url)
    yield running
    _drain_background_work()
    for agent in running.agents:
        agent.stop()
    _wait_for_inboxes_to_close()


def _wait_for_inboxes_to_close(timeout: float = 10.0) -> None:
    """An inbox agent a test stopped (its websocket closed) is disconnected by the hub a
    moment later, in a write of its own: wait for it, so it never races the flush that empties
    the database."""
    from a2a_core.models import InboxSession

    deadline = time.monotonic() + timeout
    open_sockets = InboxSession.objects.filter(transport="websocket")
    while open_sockets.exists() and time.monotonic() < deadline:
        time.sleep(0.05)


@pytest.fixture(scope="session")
def hub_grpc_port(hub_server: ServerThread) -> Iterator[int]:
    """The hub's gRPC server, on the live hub's event loop (as a worker's lifespan starts it)."""
    from a2a_core.protocol import grpc_binding
    from tests.servers import free_port

    loop = events._loop
    assert loop is not None
    port = free_port()
    started = grpc_binding.start(host="127.0.0.1", port=port)
    asyncio.run_coroutine_threadsafe(started, loop).result(10)
    yield port
    asyncio.run_coroutine_threadsafe(grpc_binding.stop(), loop).result(10)


@pytest.fixture
def grpc_hub(hub: Hub, hub_grpc_port: int, settings: Any) -> Hub:
    """The live hub with its gRPC port on: its own card lists its gRPC interface, and so does
    the card of each agent whose own card lists one (HUB_CARD_GRPC, default "declared")."""
    settings.HUB_GRPC_PORT = hub_grpc_port
    return hub


@pytest.fixture
async def sdk(hub: Hub):
    """`await sdk(slug, token, binding=..., streaming=...)` -> an SDK client through the hub."""
    yield hub.client
    await hub.close()


def database_url() -> str:
    """The test database as a DATABASE_URL, for worker processes started by a test."""
    from django.db import connection

    params = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{params['NAME']}"
    user = params.get("USER") or "postgres"
    return f"postgres://{user}@{params.get('HOST') or '127.0.0.1'}:{params.get('PORT') or 5432}/{params['NAME']}"


class Worker:
    """Another hub worker process on the same database and Redis, like a scaled deployment."""

    def __init__(self, log: Path | None = None, **extra_env: str) -> None:
        """`log`: a file for what the worker prints (by default, the test's own output)."""
        import os
        import subprocess
        import sys

        from django.conf import settings

        from tests.servers import free_port

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {
            **os.environ,
            "DATABASE_URL": database_url(),
            "REDIS_URL": settings.REDIS_URL,
            "HUB_DATA_DIR": str(settings.DATA_DIR),
            "SECRET_KEY": settings.SECRET_KEY,
            "DJANGO_SETTINGS_MODULE": "config.settings",
            # No gRPC port (the HTTP port + 1 by default) unless a test asks for one.
            "HUB_GRPC_PORT": "off",
            **extra_env,
        }
        # What `a2a serve --workers N` runs for each worker.
        output = log.open("ab") if log else None
        self.process = subprocess.Popen(
            [sys.executable, "-m", "a2a_core.cli.worker", "127.0.0.1", str(self.port)],
            env=env,
            stdout=output,
            stderr=output,
        )
        if output:
            output.close()  # the worker has its own copy

    def wait(self, timeout: float = 30) -> Worker:
        import socket

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"worker exited with {self.process.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.1)
        self.stop()  # never left running to hold the test database
        raise RuntimeError(f"worker did not start within {timeout:g} s")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except Exception:
            self.process.kill()


@pytest.fixture
def second_worker(hub: Hub) -> Iterator[Worker]:
    worker = Worker().wait()
    yield worker
    worker.stop()
