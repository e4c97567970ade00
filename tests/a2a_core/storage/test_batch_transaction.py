"""A group commit's transaction (`storage.drivers.batch_transaction`): on PostgreSQL one
pipeline from its BEGIN to its COMMIT. What it writes lands together or not at all, the ORM
inside works as it does anywhere, and what runs on commit sees the rows committed."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import pytest
from django.db import IntegrityError, connection, connections, transaction

from a2a_core.models import Message, Task, TaskEvent
from a2a_core.storage.drivers import batch_transaction
from a2a_core.storage.rows import insert_returning_pks, insert_values, new_row, update_values
from tests.factories import make_task, register

pytestmark = pytest.mark.django_db(transaction=True)

_EVENT = ["task", "seq", "kind", "state", "payload", "created_at"]


def _seen_elsewhere(task_pk: str) -> tuple[str, int]:
    """The task's state and its messages, as another connection reads them."""
    found: list[tuple[str, int]] = []

    def read() -> None:
        try:
            found.append(
                (
                    Task.objects.get(pk=task_pk).state,
                    Message.objects.filter(task_id=task_pk).count(),
                )
            )
        finally:
            connections.close_all()

    reader = threading.Thread(target=read)
    reader.start()
    reader.join()
    return found[0]


def test_its_writes_and_the_orms_are_committed_together_before_what_runs_on_commit():
    sender, target = register().agent, register().agent
    task = make_task(target=target, caller=sender)
    on_commit: list[tuple[str, int]] = []

    with batch_transaction():
        # The ORM reads, and saves a row that exists: an UPDATE whose row count it checks
        # (had it read none, it would have tried an INSERT of the same key).
        orm_task = Task.objects.get(pk=task.pk)
        orm_task.reason = "read and saved by the ORM"
        orm_task.save(update_fields=["reason"])
        insert_values(TaskEvent, _EVENT, [[task.pk, 1, "status", "working", {}, datetime.now(UTC)]])
        update_values(Task, ["state"], [(task.pk, ["working"])])
        row = new_row(Message, message_id="m-1", role="user", sender=sender, task=task)
        insert_returning_pks([row])
        # A `RETURNING`'s keys are there within the transaction.
        assert row.pk is not None
        # Nothing is visible elsewhere before the commit.
        assert _seen_elsewhere(task.pk) == ("submitted", 0)
        transaction.on_commit(lambda: on_commit.append(_seen_elsewhere(task.pk)))

    assert on_commit == [("working", 1)]
    task.refresh_from_db()
    assert task.reason == "read and saved by the ORM"
    assert TaskEvent.objects.filter(task=task).count() == 1


def test_a_database_error_inside_is_djangos_and_keeps_nothing_and_the_next_one_works():
    sender, target = register().agent, register().agent
    task = make_task(target=target, caller=sender)
    ran: list[str] = []

    def repeat_an_event() -> None:
        # The second insert repeats the first's (task, seq): refused by the database, at the
        # round trip that ends the transaction.
        with batch_transaction():
            update_values(Task, ["state"], [(task.pk, ["working"])])
            for _ in range(2):
                insert_values(
                    TaskEvent, _EVENT, [[task.pk, 1, "status", "working", {}, datetime.now(UTC)]]
                )
            transaction.on_commit(lambda: ran.append("committed"))

    with pytest.raises(IntegrityError):
        repeat_an_event()

    assert ran == []
    assert _seen_elsewhere(task.pk) == ("submitted", 0)
    assert TaskEvent.objects.filter(task=task).count() == 0
    assert not connection.in_atomic_block

    with batch_transaction():
        update_values(Task, ["state"], [(task.pk, ["completed"])])
    assert _seen_elsewhere(task.pk) == ("completed", 0)


def test_an_exception_of_the_hubs_own_inside_rolls_back_what_was_sent():
    sender, target = register().agent, register().agent
    task = make_task(target=target, caller=sender)

    def change_its_mind() -> None:
        with batch_transaction():
            update_values(Task, ["state"], [(task.pk, ["working"])])
            insert_returning_pks([new_row(Message, message_id="m-1", role="user", task=task)])
            raise RuntimeError("changed its mind")

    with pytest.raises(RuntimeError, match="changed its mind"):
        change_its_mind()

    assert _seen_elsewhere(task.pk) == ("submitted", 0)
    # The ORM's own transactions are as they were.
    with transaction.atomic():
        Task.objects.filter(pk=task.pk).update(state="canceled")
    assert _seen_elsewhere(task.pk) == ("canceled", 0)


def test_an_orm_error_inside_comes_where_the_orm_ran_it_and_a_savepoint_contains_it():
    sender, target = register().agent, register().agent
    task = make_task(target=target, caller=sender)

    with batch_transaction():
        update_values(Task, ["state"], [(task.pk, ["working"])])
        # A second task with the first one's key: refused at once, as the ORM expects, and
        # rolled back to the savepoint, not further.
        with pytest.raises(IntegrityError), transaction.atomic():
            make_task(target=target, caller=sender, id=task.pk)
        update_values(Task, ["reason"], [(task.pk, ["kept"])])

    task.refresh_from_db()
    assert (task.state, task.reason) == ("working", "kept")
    assert Task.objects.count() == 1
