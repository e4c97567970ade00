"""Two hubs, two processes, two databases: hub B registers an agent of hub A by the URL of
its card at A (signed by A, verified by B against A's published keys) with the token A issued
to B as its credential. A caller on B then reaches the agent through both hubs, blocking and
streaming, and both hubs record the call under one trace id."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
from typing import Any

import pytest

from a2a_core.asyncdb import db
from a2a_core.models import Task
from tests.a2a_core.cli.helpers import MANAGE, a2a, cli_environment, run_cli
from tests.a2a_core.credentials.helpers import outcome
from tests.conftest import Hub, Worker

pytestmark = pytest.mark.live

CALLER_CARD = {
    "name": "planner",
    "description": "Calls agents of another team's hub.",
    "version": "1.0.0",
    "capabilities": {},
    "defaultInputModes": ["text/plain"],
    "defaultOutputModes": ["text/plain"],
    "skills": [{"id": "plan", "name": "Plan", "description": "Plans.", "tags": ["plan"]}],
}


async def test_a_caller_on_hub_b_reaches_an_agent_on_hub_a(hub, tmp_path):
    await hub.endpoint_agent("echo")
    _, token_for_b = await hub.caller("hub-b")

    b_env = {
        "DATABASE_URL": f"sqlite:///{tmp_path / 'b.sqlite3'}",
        "REDIS_URL": "",
        "HUB_DATA_DIR": str(tmp_path / "b"),
        "HUB_CARD_SIGNER_JWKS": f"{hub.url}/.well-known/jwks.json",
    }
    await asyncio.to_thread(
        subprocess.run,
        [*MANAGE, "migrate", "--verbosity", "0"],
        env={**cli_environment(), **b_env},
        check=True,
        timeout=120,
    )
    registered = await asyncio.to_thread(
        run_cli,
        "register",
        "--url",
        f"{hub.url}/a2a/echo",
        "--slug",
        "echo-at-a",
        "--credential-from-env",
        "A_TOKEN",
        env={**b_env, "A_TOKEN": token_for_b},
    )
    assert registered.returncode == 0, registered.stderr
    assert "card signature: its signature verifies" in registered.stdout
    assert "set the credential echo-at-a is called with (scheme hubBearer)" in registered.stdout
    assert token_for_b not in registered.stdout + registered.stderr
    card = tmp_path / "planner.json"
    card.write_text(json.dumps(CALLER_CARD))
    caller = await asyncio.to_thread(run_cli, "register", str(card), env=b_env)
    assert caller.returncode == 0, caller.stderr
    token = next(
        line.removeprefix("token: ")
        for line in caller.stdout.splitlines()
        if line.startswith("token: ")
    )

    hub_b = Worker(**b_env).wait()
    b = Hub(url=hub_b.url)
    try:
        for streaming in (False, True):
            client = await b.client("echo-at-a", token, streaming=streaming)
            assert await outcome(client, "echo across") == (
                "TASK_STATE_COMPLETED",
                ["echo: across"],
            )
    finally:
        await b.close()
        hub_b.stop()

    with sqlite3.connect(tmp_path / "b.sqlite3") as b_db:
        b_traces = {row[0] for row in b_db.execute("SELECT trace_id FROM a2a_core_task")}
    a_tasks: list[Any] = await db(
        lambda: list(
            Task.objects.filter(target__slug="echo").values_list("trace_id", "caller__slug")
        )
    )
    assert len(b_traces) == 2
    assert {trace for trace, _ in a_tasks} == b_traces
    # Hub B is an agent that calls with a credential, like any other (not a trusted peer).
    assert {caller for _, caller in a_tasks} == {"hub-b"}


def _token(registered: subprocess.CompletedProcess[str]) -> str:
    assert registered.returncode == 0, registered.stderr
    return next(
        line.removeprefix("token: ")
        for line in registered.stdout.splitlines()
        if line.startswith("token: ")
    )


async def test_peer_hubs_pass_on_who_asked_and_a_loop_across_them_is_refused(
    hub, sdk, tmp_path, settings, monkeypatch
):
    """Hub A trusts hub B as a peer and B trusts A. A caller on B reaches A's `echo`; A records
    B's original caller at the head of the chain. When `echo` delegates to `relay` (B's
    `echo-at-a` again, seen from A), B refuses the loop the chain shows. The same header from
    an agent nobody trusts is ignored."""
    settings.HUB_ID = "hub-a"
    await hub.endpoint_agent("echo")
    _, token_for_b = await hub.caller("hub-b")
    await db(a2a, "agent", "peer", "trust", "hub-b")

    b_env = {
        "DATABASE_URL": f"sqlite:///{tmp_path / 'b.sqlite3'}",
        "REDIS_URL": "",
        "HUB_DATA_DIR": str(tmp_path / "b"),
        "HUB_ID": "hub-b",
        "HUB_CARD_SIGNER_JWKS": f"{hub.url}/.well-known/jwks.json",
    }

    async def on_b(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return await asyncio.to_thread(run_cli, *args, env={**b_env, **env})

    await asyncio.to_thread(
        subprocess.run,
        [*MANAGE, "migrate", "--verbosity", "0"],
        env={**cli_environment(), **b_env},
        check=True,
        timeout=120,
    )
    registered = await on_b(
        "register", "--url", f"{hub.url}/a2a/echo", "--slug", "echo-at-a",
        "--credential-from-env", "A_TOKEN", A_TOKEN=token_for_b,
    )  # fmt: skip
    assert registered.returncode == 0, registered.stderr
    card = tmp_path / "planner.json"
    card.write_text(json.dumps(CALLER_CARD))
    planner = _token(await on_b("register", str(card)))
    card.write_text(json.dumps({**CALLER_CARD, "name": "hub-a"}))
    token_for_a = _token(await on_b("register", str(card)))
    trusted = await on_b("agent", "peer", "trust", "hub-a")
    assert trusted.stdout.strip() == "hub-a is trusted as a peer hub", trusted.stderr

    hub_b = Worker(**b_env).wait()
    b = Hub(url=hub_b.url)
    try:
        # Hub A calls B's `echo-at-a` as its agent `relay`.
        settings.HUB_CARD_SIGNER_JWKS = [f"{hub_b.url}/.well-known/jwks.json"]
        monkeypatch.setenv("B_TOKEN", token_for_a)
        await db(
            a2a, "register", "--url", f"{hub_b.url}/a2a/echo-at-a", "--slug", "relay",
            "--credential-from-env", "B_TOKEN",
        )  # fmt: skip

        client = await b.client("echo-at-a", planner)
        assert await outcome(client, "echo across") == ("TASK_STATE_COMPLETED", ["echo: across"])
        path = await db(lambda: Task.objects.get(target__slug="echo").path)
        assert path == ["hub-b/planner", "hub-b/echo-at-a", "echo"]

        state, texts = await outcome(client, "delegate relay echo round")
        assert state == "TASK_STATE_COMPLETED"
        assert "relay said: error:" in texts[0]
        assert (
            "-32053: refused by the hub's policy: echo-at-a is already on this chain: "
            "planner -> echo-at-a -> hub-a/echo -> hub-a/relay -> echo-at-a"
        ) in texts[0]
    finally:
        await b.close()
        hub_b.stop()
    relayed = await db(lambda: Task.objects.get(target__slug="relay").path)
    assert relayed == ["hub-b/planner", "hub-b/echo-at-a", "echo", "relay"]

    # From an agent nobody trusts, the same header changes nothing.
    _, mallory = await hub.caller("mallory")
    forged = await sdk("echo", mallory, headers={"A2A-Hub-Chain": "hub-b/boss,hub-b/echo-at-a"})
    assert await outcome(forged, "echo forged") == ("TASK_STATE_COMPLETED", ["echo: forged"])
    path = await db(lambda: Task.objects.get(caller__slug="mallory").path)
    assert path == ["mallory", "echo"]
