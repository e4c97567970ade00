"""Content rules where the hub records what callers send and agents answer, and where it
delivers a message a content rule held once a human let it through.

`request_masked` is the one place a request meets its findings: what `decide` found is
masked before the message's row is built, so the row, the live feed, the inbox and every
export have the masked form only. A broadcast or knowledge share is one row for all its
recipients: `fan_out_masked` masks what a rule redacts for any of them, so none gets what a
rule redacts for another.

`answer_screened` is the one place an agent's answer meets the policy's content rules: every
answer an endpoint agent returns (a Message, a Task, a streamed event) and every report an
inbox agent makes passes through it before anything is recorded, so that what is stored,
streamed to subscribers and returned to the caller is the same redacted form. The detectors
and the verdict are `a2a_core.policy.content`'s pure functions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from a2a_core import metrics
from a2a_core.errors import HubError
from a2a_core.models import Decision, Message, Task
from a2a_core.policy.content import Path, Verdict, content_scan, content_verdict, redact
from a2a_core.policy.decide import Decision as PolicyDecision
from a2a_core.sealed import seal, unseal
from a2a_core.services.classify import classify
from a2a_core.services.policy import current_policy

if TYPE_CHECKING:
    from a2a_core.services.tasks import Record


def request_masked(
    message: dict[str, Any], decision: PolicyDecision
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The message as the hub stores and shows it (the decision's content findings masked),
    and its row's content fields: the findings (never the text they matched) and, for a
    message a content rule held, its original parts sealed for the human who may approve
    them."""
    content = decision.content
    if not content:
        return message, {}
    masked = redact(message, content)
    action = {"content_held": "hold", "content_rejected": "reject"}.get(decision.reason, "redact")
    metrics.content_found("request", action, (f.kind for f in content))
    fields: dict[str, Any] = {"content_findings": [f.as_record() for f in content]}
    if decision.reason == "content_held":
        fields["sealed_parts"] = seal({"parts": message.get("parts") or []})
    return masked, fields


def fan_out_masked(
    message: dict[str, Any], decisions: list[PolicyDecision]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A fanned-out message as the hub stores and delivers it to every recipient that may
    have it, and its row's content fields (every finding, never its text). Masked: what a
    rule redacts for any recipient it goes to (so none gets what a rule redacts for another);
    when it goes to nobody, everything found, as for a refused request. What a rule refuses
    to one recipient stays as written for those no rule refuses it to."""
    found = list(dict.fromkeys(f for d in decisions for f in d.content))
    if not found:
        return message, {}
    delivered = [d for d in decisions if d.delivers]
    masked = list(dict.fromkeys(f for d in delivered for f in d.content)) if delivered else found
    metrics.content_found("request", "redact", (f.kind for f in masked))
    fields = {"content_findings": [f.as_record() for f in found]}
    return (redact(message, masked) if masked else message), fields


def masked_summary(masked: dict[str, Any], kind: str) -> tuple[dict[str, Any] | None, str]:
    """A masked request's envelope and summary, for its row."""
    try:
        _, envelope, summary = classify(masked, default_kind="request")
    except HubError:
        # The masked envelope no longer fits its schema: keep the masked data, say less.
        return None, f"{kind} (redacted)"
    return envelope, summary


def approved_parts(message: Message) -> list[dict[str, Any]]:
    """The parts a queued message is delivered with: a message a content rule held and a
    human then let through (approved or redirected) goes as the caller wrote it, from its
    sealed original; any other as recorded."""
    if message.sealed_parts and message.decision in (Decision.DELIVER, Decision.REDIRECT):
        parts: list[dict[str, Any]] = unseal(message.sealed_parts)["parts"]
        return parts
    return list(message.parts)


def _lists_in_message(message: Any, at: Path) -> list[Path]:
    if isinstance(message, Mapping) and isinstance(message.get("parts"), list):
        return [(*at, "parts")]
    return []


def _lists_in_task(task: Any, at: Path) -> list[Path]:
    """The parts lists of a Task in dict form: its status message, history and artifacts."""
    if not isinstance(task, Mapping):
        return []
    found = []
    status = task.get("status")
    if isinstance(status, Mapping):
        found += _lists_in_message(status.get("message"), (*at, "status", "message"))
    for key in ("history", "artifacts"):
        items = task.get(key)
        if isinstance(items, list):
            for i, item in enumerate(items):
                found += _lists_in_message(item, (*at, key, i))
    return found


def _lists_in_event(event: Mapping[str, Any]) -> list[Path]:
    found = _lists_in_task(event.get("task"), ("task",))
    update = event.get("statusUpdate")
    if isinstance(update, Mapping) and isinstance(update.get("status"), Mapping):
        found += _lists_in_message(
            update["status"].get("message"), ("statusUpdate", "status", "message")
        )
    update = event.get("artifactUpdate")
    if isinstance(update, Mapping):
        found += _lists_in_message(update.get("artifact"), ("artifactUpdate", "artifact"))
    return found + _lists_in_message(event.get("message"), ("message",))


def _judged(document: Mapping[str, Any], part_lists: list[Path], task: Task) -> Verdict | None:
    if not part_lists:
        return None
    policy = current_policy().content
    if not policy.rules:
        return None
    path = task.path or []
    scope: dict[str, Any] = {
        "direction": "answer",
        "caller": path[-2] if len(path) > 1 else "",
        "target": path[-1] if path else "",
        "kind": "response",
        "skill": task.skill,
    }
    hits = content_scan(document, policy, part_lists=part_lists, **scope)
    if not hits:
        return None
    verdict = content_verdict(hits, policy, **scope)
    return verdict if verdict.action is not None else None


def answer_screened(op: Record, task: Task) -> Record:
    """An agent's answer (`op`) as the hub records it: unchanged when no content rule finds
    anything; with each finding masked (`[redacted: <kind>]`) for a rule that redacts; for a
    rule that rejects, a `Failure` of the task that says which rule found what (never the
    text itself), so the caller gets the failed task instead of the answer."""
    from a2a_core.services.tasks import Failure, Reply, Report, Snapshot, StreamEvent

    if isinstance(op, Snapshot):
        field, document = "remote", op.remote
        lists = _lists_in_task(document, ())
    elif isinstance(op, StreamEvent):
        field, document = "event", op.event
        lists = _lists_in_event(document)
    elif isinstance(op, Reply):
        field, document = "message", op.message
        lists = _lists_in_message(document, ())
    elif isinstance(op, Report):
        document = {"status": op.status or {}, "artifact": op.artifact or {}}
        field = ""
        lists = _lists_in_message(document["status"].get("message"), ("status", "message"))
        lists += _lists_in_message(document["artifact"], ("artifact",))
    else:
        return op
    verdict = _judged(document, lists, task)
    if verdict is None:
        return op
    metrics.content_found("answer", str(verdict.action), (f.kind for f in verdict.findings))
    if verdict.action == "reject":
        said = f": {verdict.reason}" if verdict.reason else ""
        agent = (task.path or ["the agent"])[-1]
        return Failure(
            op.task_id,
            f"refused by the hub's policy (content_rejected): content rule {verdict.rule!r} "
            f"found {verdict.kind} in {agent}'s answer{said}",
        )
    masked = redact(document, verdict.findings)
    if isinstance(op, Report):
        return replace(
            op,
            status=masked["status"] if op.status is not None else None,
            artifact=masked["artifact"] if op.artifact is not None else None,
        )
    changed: dict[str, Any] = {field: masked}
    return replace(op, **changed)
