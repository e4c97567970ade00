"""The demo's project team: the chain pm -> architect -> tester (seed 003 UC-7), and the
implementer's review cycle (seed 002).
"""

from __future__ import annotations

import random
from typing import Any

from a2a.types.a2a_pb2 import Message, Task

from a2a_core.demo.common import (
    CastClient,
    artifact_envelopes,
    artifact_texts,
    describe,
    say,
    state_of,
)
from a2a_core.demo.turn import Turn, pause, task_request

# --- the chain: pm -> architect -> tester (seed 003 UC-7) ---------------------------------------


def _feature(turn: Turn, prefix: str) -> str:
    title = str(turn.payload.get("title") or turn.text or "the feature")
    return title.removeprefix(prefix).strip()


def _passed_on(turn: Turn) -> dict[str, Any]:
    """What a delegated task keeps of the task it came from: criteria and files."""
    payload: dict[str, Any] = {}
    if criteria := turn.payload.get("acceptanceCriteria"):
        payload["acceptanceCriteria"] = criteria
    if files := (turn.payload.get("context") or {}).get("files"):
        payload["context"] = {"files": files}
    return payload


async def pm(turn: Turn) -> None:
    if turn.kind != "task_request":
        await turn.reply("noted")
        return
    feature = _feature(turn, "Spec:")
    await turn.start(f"drafting the spec of {feature}")
    say("chain", f"pm -> architect: design review of {feature!r}")
    envelope = task_request(
        turn.hub,
        f"Design review: {feature}",
        {
            "description": f"Review the design of {feature} before the spec is final.",
            "taskType": "design",
            "complexity": "high",
            **_passed_on(turn),
        },
    )
    try:
        result = await turn.hub.call("architect", envelope=envelope, parent=turn.task_id)
        review = " / ".join(artifact_texts(result)) or f"the design review {state_of(result)}"
    except Exception as exc:
        review = f"no design review: {describe(exc)}"
    await pause(0.2, 0.6)
    criteria = turn.payload.get("acceptanceCriteria") or []
    spec = "\n".join(
        [
            f"# {feature}",
            "",
            "## Acceptance criteria",
            *(f"- {c}" for c in criteria),
            "",
            "## Design review",
            review,
        ]
    )
    await turn.artifact("spec", text=spec)
    await turn.complete(f"the spec of {feature} is ready")


async def architect(turn: Turn) -> None:
    if turn.kind == "escalation":
        await sign_off(turn)
        return
    if turn.kind != "task_request":
        await turn.reply("noted")
        return
    feature = _feature(turn, "Design review:")
    await turn.start(f"reviewing the design of {feature}")
    say("chain", f"architect -> tester: test strategy for {feature!r}")
    envelope = task_request(
        turn.hub,
        f"Test strategy: {feature}",
        {"taskType": "analysis", "complexity": "medium", **_passed_on(turn)},
    )
    try:
        result = await turn.hub.call("tester", envelope=envelope, parent=turn.task_id)
        plan = " / ".join(artifact_texts(result)) or f"the test strategy {state_of(result)}"
    except Exception as exc:
        plan = f"no test strategy: {describe(exc)}"
    await pause(0.2, 0.6)
    notes = random.choice(
        [
            "one new table, indexed on (account_id, created_at); no change to existing APIs",
            "a background job with retries; idempotent by request id",
            "read path cached for 60 s; invalidated on write",
        ]
    )
    await turn.artifact("design-review", text=f"{feature}: {notes}. Tests: {plan}")
    await turn.complete(f"design of {feature} approved with notes")


async def sign_off(turn: Turn) -> None:
    """An escalation a human let through: the architect signs the change off."""
    files = turn.payload.get("files") or []
    what = files[0] if files else str(turn.payload.get("summary") or "the change")
    await turn.start(f"reading {what}")
    await pause(0.5, 1.0)
    await turn.artifact("sign-off", text=f"signed off {what}: run it in the 03:00 window")
    await turn.complete(f"signed off {what}")
    say("sign-off", f"architect signs off {what} (a human approved the escalation)")


async def tester(turn: Turn) -> None:
    if turn.kind != "task_request":
        await turn.reply("noted")
        return
    feature = _feature(turn, "Test strategy:")
    await turn.start(f"listing the cases of {feature}")
    await pause(0.5, 1.2)
    criteria = turn.payload.get("acceptanceCriteria") or []
    cases = [f"{c} (integration)" for c in criteria] + [
        "permission denied for another account's data (unit)",
        "the happy path in the browser (end to end)",
    ]
    plan = f"{len(cases)} cases for {feature}: " + "; ".join(cases)
    await turn.artifact("test-plan", text=plan)
    await turn.complete(f"{len(cases)} test cases")


# --- the review cycle (seed 002) -------------------------------------------------------------


async def implementer(turn: Turn) -> None:
    if turn.kind != "task_request":
        await turn.reply("noted")
        return
    feature = _feature(turn, "Implement:")
    files = list((turn.payload.get("context") or {}).get("files") or [f"{feature.lower()}.py"])
    branch = "feat/" + "-".join(feature.lower().split())[:40]
    await turn.start(f"implementing {feature} on {branch}")
    await pause(0.6, 1.4)
    await turn.artifact("branch", text=f"{branch}: {len(files)} files changed")
    reviewer = await _find(turn.hub, "code-review", default="reviewer")
    notes: str | None = None
    fixed = 0
    verdict = "none"
    for round_ in range(1, 4):
        payload: dict[str, Any] = {
            "title": f"Review: {feature}",
            "files": files,
            "branch": branch,
            "authorAgent": "implementer",
            "reviewLevel": "T2+",
        }
        if notes:
            payload["priorReviewNotes"] = notes
        again = f" again ({fixed} concerns fixed)" if fixed else ""
        say("review", f"implementer -> {reviewer}: review {feature!r}{again}")
        envelope = turn.hub.envelope("review_request", payload)
        try:
            result = await turn.hub.call(reviewer, envelope=envelope, parent=turn.task_id)
        except Exception as exc:
            say("review", f"implementer: the review of {feature!r} failed: {describe(exc)}")
            break
        verdicts = _review_responses(result)
        if not verdicts:
            say("review", f"{reviewer} -> implementer: no verdict ({state_of(result)})")
            break
        verdict = str(verdicts[-1].get("verdict"))
        concerns = verdicts[-1].get("concerns") or []
        say("review", f"{reviewer} -> implementer: {verdict} ({len(concerns)} concerns)")
        if verdict != "changes_requested" or round_ == 3:
            break
        notes = "; ".join(str(c.get("description")) for c in concerns)[:300]
        fixed = len(concerns)
        await pause(0.8, 1.6)  # fixing
    done = verdict == "approved"
    response = turn.hub.envelope(
        "task_response",
        {
            "taskId": turn.task_id or branch,
            "action": "completed" if done else "blocked",
            **({} if done else {"reason": f"the review ended {verdict}"}),
            "result": {
                "summary": f"{feature} on {branch}, review {verdict}",
                "branch": branch,
                "filesChanged": files,
                "nextSteps": ["merge after CI"] if done else ["ask a senior reviewer"],
            },
        },
    )
    await turn.artifact("result", envelope=response)
    await turn.complete(f"{feature}: review {verdict}")


def _review_responses(result: Task | Message) -> list[dict[str, Any]]:
    return [dict(e.get("payload") or {}) for e in artifact_envelopes(result, "review_response")]


_found: dict[str, str] = {}


async def _find(hub: CastClient, skill: str, *, default: str) -> str:
    """A peer with `skill`, found once through the hub's discovery."""
    if skill not in _found:
        try:
            peers = await hub.discover(skill=skill)
            _found[skill] = str(peers[0]["slug"]) if peers else default
        except Exception:
            return default
    return _found[skill]
