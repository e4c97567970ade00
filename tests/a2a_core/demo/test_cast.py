"""The demo cast against the live hub: its real processes play every scenario kind."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from a2a_core.asyncdb import db
from a2a_core.demo import cast
from a2a_core.demo.launch import cast_register, demo_policy_publish, demo_start, pick_ports
from a2a_core.models import Agent, Artifact, Escalation, Message, PolicyVersion, Task
from a2a_core.services.policy import policy_publish

pytestmark = pytest.mark.live

# The first round of scenarios plays every kind; this is how long the test lets it take. The
# breaker's scenario is the slowest (an outage, a 20 s cool-down, up to three trial calls), and
# on a loaded two-core machine it can need a second round: the window leaves room for one
# while staying under the suite's 180 s per test.
PLAY_SECONDS = 140


def _chain() -> bool:
    """Seed 003 UC-7: director -> pm -> architect -> tester, each a child of the one before."""
    return Task.objects.filter(
        target__slug="tester",
        depth=2,
        parent__target__slug="architect",
        parent__parent__target__slug="pm",
        parent__parent__caller__slug="director",
    ).exists()


def _review_cycle() -> bool:
    """Seed 002: under one implementation task, a review that asked for changes, then one
    that approved."""
    verdicts: dict[str, list[str]] = {}
    rows = Artifact.objects.filter(
        task__target__slug="reviewer", task__caller__slug="implementer"
    ).order_by("task__created_at")
    for parent_id, parts in rows.values_list("task__parent_id", "parts"):
        for part in parts:
            data = part.get("data") or {}
            if data.get("kind") == "review_response":
                verdicts.setdefault(parent_id, []).append(data["payload"]["verdict"])
    return any(v[:2] == ["changes_requested", "approved"] for v in verdicts.values())


def _fanned_out(kind: str) -> bool:
    return any(
        message.deliveries.count() >= 2
        for message in Message.objects.filter(kind=kind, sender__slug="scribe")
    )


def _refused(reason: str, **filters: Any) -> bool:
    return Message.objects.filter(decision="reject", decision_reason=reason, **filters).exists()


def _breaker_recovered() -> bool:
    """flaky's breaker opened (a circuit_open refusal), and a later call to flaky succeeded."""
    opened = (
        Message.objects.filter(decision_reason="circuit_open", target__slug="flaky")
        .order_by("created_at")
        .first()
    )
    return opened is not None and (
        Message.objects.filter(
            target__slug="flaky",
            decision="deliver",
            created_at__gt=opened.created_at,
            task__state="completed",
        ).exists()
    )


def scenario_kinds_seen() -> dict[str, bool]:
    return {
        "chain of depth 3": _chain(),
        "review: changes_requested, then approved": _review_cycle(),
        "knowledge share fanned out": _fanned_out("knowledge_share"),
        "broadcast fanned out": _fanned_out("broadcast"),
        "request answered or timed out": Message.objects.filter(
            kind="request",
            sender__slug="director",
            target__slug="ledger",
            task__state__in=["completed", "failed"],
        ).exists(),
        "loop stopped": _refused("loop_detected", sender__slug="pong", target__slug="ping"),
        "burst rate limited": _refused("rate_limit_minute", sender__slug="monitor"),
        "denied pair": _refused("denied_by_matrix", sender__slug="monitor"),
        "breaker opened, then flaky answered again": _breaker_recovered(),
        "an agent's question waits for a human": Escalation.objects.filter(
            status="pending", kind="input_required", agent__slug="ops"
        ).exists(),
        "an escalation is held for a human": Escalation.objects.filter(
            status="pending", kind="approval", message__kind="escalation"
        ).exists(),
    }


async def test_the_cast_plays_every_scenario_kind_through_the_hub(hub, tmp_path: Path):
    port = int(hub.url.rsplit(":", 1)[1])
    with (
        (tmp_path / "stdout.txt").open("wb") as stdout,
        (tmp_path / "stderr.txt").open("wb") as stderr,
    ):
        demo = await db(
            demo_start, hub_url=hub.url, hub_port=port, pace=0.5, stdout=stdout, stderr=stderr
        )
        try:
            deadline = time.monotonic() + PLAY_SECONDS
            seen = await db(scenario_kinds_seen)
            while not all(seen.values()) and time.monotonic() < deadline:
                await asyncio.sleep(1)
                seen = await db(scenario_kinds_seen)
            still_running = [proc.poll() is None for proc in demo.processes]
        finally:
            await asyncio.to_thread(demo.stop)

    assert [kind for kind, happened in seen.items() if not happened] == []
    assert still_running == [True, True]
    assert [p.returncode for p in demo.processes] == [0, 0]
    assert_quiet_and_tidy(tmp_path, demo.files)


def assert_quiet_and_tidy(logs: Path, files: list[str]) -> None:
    """A line for each scene on stdout, no traceback on stderr, no token file left behind."""
    out = (logs / "stdout.txt").read_text()
    for scene in ("chain", "review", "knowledge", "request", "loop", "burst", "breaker"):
        assert f"  {scene} " in out
    assert "Traceback" not in (logs / "stderr.txt").read_text()
    assert not any(Path(f).exists() for f in files)


def test_registering_the_cast_again_keeps_the_cards_and_gives_new_tokens(db):
    ports = pick_ports(8000)
    first = cast_register(ports=ports, hub_port=8000)
    second = cast_register(ports=ports, hub_port=8000)

    assert set(first) == {m.slug for m in cast.CAST}
    assert all(first[slug] != second[slug] for slug in first)
    agents = {a.slug: a for a in Agent.objects.all()}
    assert {slug: agents[slug].delivery_mode for slug in ("pm", "reviewer")} == {
        "pm": "endpoint",
        "reviewer": "inbox",
    }
    assert agents["pm"].endpoint_url == f"http://127.0.0.1:{ports['pm']}/"
    assert agents["reviewer"].role == "engineering"
    assert all(a.card_versions.count() == 1 for a in agents.values())


def test_the_demo_policy_does_not_replace_a_policy_an_admin_published(db):
    assert demo_policy_publish() is True
    assert demo_policy_publish() is False  # already active
    policy_publish(document={"maxHops": 3}, reason="tighter chains", actor_label="admin")

    assert demo_policy_publish() is False
    active = PolicyVersion.objects.get(is_active=True)
    assert active.document["maxHops"] == 3
