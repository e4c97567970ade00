"""Group commit for the A2A hot path: accepted messages and agents' answers, together.

Each call through the hub writes twice: its message before delivery, the agent's answer
after. Concurrent calls' writes of both kinds share one transaction, so under load a commit
carries dozens of them (`a2a_core.storage.batching`). The entry points the call path awaits
are at the end: `accept_inbound`, `record`, `record_failure`, `record_outcome`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError

from a2a_core import tracing
from a2a_core.errors import Conflict
from a2a_core.models import Agent, TaskState
from a2a_core.policy import clock
from a2a_core.services.accepted import Accepted
from a2a_core.services.messages import Inbound, accept_batch
from a2a_core.services.policy import current_policy
from a2a_core.services.tasks import Failure, Record, record_batch
from a2a_core.storage.batching import Batcher
from a2a_core.storage.drivers import batch_transaction
from a2a_core.storage.policy_state import policy_state


@dataclass(frozen=True)
class Outcome:
    """How a call to `target` went, for its circuit breaker (True: it answered)."""

    target: str
    ok: bool


Write = Inbound | Record | Outcome


def _run(ops: Sequence[Write], *, find_duplicates: bool) -> list[Any]:
    results: list[Any] = [None] * len(ops)
    inbound = [(i, op) for i, op in enumerate(ops) if isinstance(op, Inbound)]
    answers = [(i, op) for i, op in enumerate(ops) if not isinstance(op, Inbound | Outcome)]
    outcomes = [(i, op) for i, op in enumerate(ops) if isinstance(op, Outcome)]
    if outcomes:
        breaker = current_policy().policy.breaker
        state, now = policy_state(), clock.now()
        for i, op in outcomes:
            results[i] = state.record(op.target, op.ok, breaker, now)
    if inbound:
        accepted = accept_batch([op for _, op in inbound], find_duplicates=find_duplicates)
        for (i, _), result in zip(inbound, accepted, strict=True):
            results[i] = result
    if answers:
        recorded = record_batch([op for _, op in answers])
        for (i, _), result in zip(answers, recorded, strict=True):
            results[i] = result
    return results


def writes_commit(ops: Sequence[Write]) -> list[Any]:
    """Write the ops in one transaction; one result (or `HubError`) per op, in order.

    An accept and the recording of its answer are never in the same batch: the answer comes
    after the accept's commit. Retried messageIds are rare, so the batch first relies on the
    unique constraint; if it trips, the ops are replayed one at a time, each looking for an
    earlier copy of its message, and the retry gets the first attempt's task.
    """
    try:
        with batch_transaction():
            return _run(ops, find_duplicates=False)
    except IntegrityError:
        results: list[Any] = []
        for op in ops:
            try:
                with batch_transaction():
                    results.extend(_run([op], find_duplicates=True))
            except IntegrityError as exc:
                results.append(Conflict(f"could not record this message: {exc}"))
        return results


# The entry points: each awaits its op's turn in the next batch and returns its result.
_writes: Batcher[Write, Any] = Batcher(writes_commit)


async def accept_inbound(inbound: Inbound) -> Accepted:
    """Commit a message's acceptance (the policy's decision on it)."""
    accepted: Accepted = await _writes.submit(inbound)
    return accepted


async def record(op: Record) -> Any:
    """Record what an agent answered, streamed or reported on a task."""
    return await _writes.submit(op)


async def record_failure(
    task_id: str, reason: str, state: str = TaskState.FAILED
) -> dict[str, Any]:
    """End a task the hub could not see through (its forward span ends failed)."""
    tracing.forwarded(task_id, ok=False, why=reason)
    result: dict[str, Any] = await _writes.submit(Failure(task_id, reason, state))
    return result


async def record_outcome(agent: Agent, accepted: Accepted, ok: bool) -> None:
    """Tell the agent's breaker how the call went (failures always; successes only when the
    breaker had something to forget)."""
    tracing.forwarded(accepted.task_id, ok=ok)
    if not ok or accepted.watch_breaker:
        await _writes.submit(Outcome(agent.slug, ok))
