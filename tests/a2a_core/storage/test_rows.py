"""The group-commit paths' rows: built without `Model.__init__`, written on the driver's own
cursor, and yet the same rows the ORM would build, write and read back."""

from __future__ import annotations

import zoneinfo
from datetime import UTC, datetime, timedelta

import pytest
from django.db import DatabaseError, IntegrityError, transaction

from a2a_core.models import Message, Task, TaskEvent
from a2a_core.storage.rows import (
    insert_returning_pks,
    insert_values,
    new_row,
    update_values,
    written_together,
)
from tests.factories import make_task, register

pytestmark = pytest.mark.django_db(transaction=True)


def _fields(obj: Message) -> dict[str, object]:
    return {f.attname: getattr(obj, f.attname) for f in Message._meta.concrete_fields}


def _message(**values: object) -> dict[str, object]:
    return {"message_id": "m-1", "role": "user", "summary": "hello", **values}


def test_a_new_row_is_the_instance_the_model_itself_would_make():
    sender, target = register().agent, register().agent
    task = make_task(target=target, caller=sender)

    values = _message(sender=sender, target_id=target.pk, task=task, parts=[{"text": "hi"}])
    ours, django = new_row(Message, **values), Message(**values)

    assert _fields(ours) == _fields(django)
    assert ours._state.adding and ours._state.db is None
    # Mutable defaults are each row's own, as the model's callables make them.
    other = new_row(Message, **_message())
    assert ours.metadata == other.metadata == {}
    assert ours.metadata is not other.metadata
    # A relation given by object is at hand without reading it again.
    assert ours.sender is sender and ours.task is task


def test_a_new_row_refuses_a_field_the_model_does_not_have():
    with pytest.raises(TypeError, match="unexpected fields: colour"):
        new_row(Message, **_message(colour="blue"))


def test_rows_written_on_the_drivers_cursor_read_back_as_the_orm_writes_them():
    sender, target = register().agent, register().agent
    task = make_task(target=target, caller=sender)
    utc_time = datetime(2026, 11, 22, 9, 30, 15, 123456, tzinfo=UTC)
    paris_time = utc_time.astimezone(zoneinfo.ZoneInfo("Europe/Paris"))

    with transaction.atomic():
        rows = [
            new_row(Message, **_message(message_id=f"m-{i}", sender=sender, task=task))
            for i in range(3)
        ]
        insert_returning_pks(rows)
        insert_values(
            TaskEvent,
            ["task", "seq", "kind", "state", "payload", "created_at"],
            [
                (task.pk, 1, "status", "working", {"n": 1}, utc_time),
                (task.pk, 2, "status", "completed", {"n": 2}, paris_time),
            ],
        )
        later = utc_time + timedelta(minutes=5)
        update_values(Task, ["state", "status_timestamp"], [(task.pk, ["completed", later])])

    assert [m.pk for m in rows] == sorted(m.pk for m in rows)
    stored = Message.objects.in_bulk([m.pk for m in rows])
    assert [stored[m.pk].message_id for m in rows] == ["m-0", "m-1", "m-2"]
    assert all(stored[m.pk].created_at == m.created_at for m in rows)
    events = list(TaskEvent.objects.filter(task=task).order_by("seq"))
    # Both are the same instant, however they were given.
    assert [e.created_at for e in events] == [utc_time, utc_time]
    assert [e.payload for e in events] == [{"n": 1}, {"n": 2}]
    task.refresh_from_db()
    assert (task.state, task.status_timestamp) == ("completed", later)
    # Ordered against rows the ORM wrote, as time orders them.
    assert Task.objects.filter(status_timestamp__gt=utc_time).get() == task


def test_a_write_that_breaks_a_constraint_is_djangos_error_and_leaves_nothing():
    sender, target = register().agent, register().agent
    task = make_task(target=target, caller=sender)
    first = new_row(Message, **_message(sender=sender, task=task, direction="request"))
    with transaction.atomic():
        insert_returning_pks([first])

    again = new_row(Message, **_message(message_id="m-2", sender=sender, task=task))
    repeated = new_row(Message, **_message(sender=sender, task=task, direction="request"))
    with pytest.raises(IntegrityError), transaction.atomic():
        insert_returning_pks([again, repeated])

    assert list(Message.objects.values_list("message_id", flat=True)) == ["m-1"]


def test_writes_sent_together_land_together_or_fail_as_djangos_error_with_nothing_kept():
    sender, target = register().agent, register().agent
    task = make_task(target=target, caller=sender)
    first = new_row(Message, **_message(sender=sender, task=task, direction="request"))
    with transaction.atomic(), written_together():
        insert_values(
            TaskEvent,
            ["task", "seq", "kind", "state", "payload", "created_at"],
            [[task.pk, 1, "status", "working", {}, datetime.now(UTC)]],
        )
        update_values(Task, ["state"], [(task.pk, ["working"])])
        insert_returning_pks([first])
        # The keys are read back within the block.
        assert first.pk is not None
    task.refresh_from_db()
    assert task.state == "working"
    assert TaskEvent.objects.filter(task=task).count() == 1

    # A row without its required parts is refused by the database; the error comes with
    # the round trip at the end of the block, and what was sent before it is rolled back.
    def change_then_break() -> None:
        with transaction.atomic(), written_together():
            update_values(Task, ["state"], [(task.pk, ["completed"])])
            insert_values(
                TaskEvent,
                ["task", "seq", "kind", "state", "payload", "created_at"],
                [[task.pk, 2, "status", "completed", {}, datetime.now(UTC)]],
            )
            insert_values(Message, ["message_id", "role", "task"], [["m-2", "user", task.pk]])

    with pytest.raises(IntegrityError):
        change_then_break()
    task.refresh_from_db()
    assert task.state == "working"
    assert TaskEvent.objects.filter(task=task).count() == 1
    assert Message.objects.filter(task=task).count() == 1
    # The connection is fit for the next transaction.
    with transaction.atomic(), written_together():
        insert_returning_pks([new_row(Message, **_message(message_id="m-3", task=task))])
    assert Message.objects.filter(task=task).count() == 2


def _stored_or_refused(write) -> str:
    """What a write of an over-long value leaves: the value stored, or "refused"."""
    try:
        with transaction.atomic():
            write()
    except DatabaseError:
        return "refused"
    return Message.objects.get(message_id="m-long").role


def test_an_over_long_value_fares_as_it_does_through_the_orm_never_cut_short():
    sender, target = register().agent, register().agent
    task = make_task(target=target, caller=sender)
    too_long = "agent-of-the-year"  # `role` holds 8 characters

    def through_the_orm() -> None:
        Message.objects.create(**_message(message_id="m-long", role=too_long, task=task))

    def through_the_rows() -> None:
        insert_returning_pks(
            [new_row(Message, **_message(message_id="m-long", role=too_long, task=task))]
        )

    by_orm = _stored_or_refused(through_the_orm)
    Message.objects.filter(message_id="m-long").delete()
    by_rows = _stored_or_refused(through_the_rows)

    assert by_rows == by_orm
    assert by_rows in ("refused", too_long)
