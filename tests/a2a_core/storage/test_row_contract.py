"""The row layer's contract (a2a_core/storage/rows.py): the models the hot path writes through
it have no save-time behaviour that writing them there would skip. The day one gains some (a
`save()` override, a `pre_save`/`post_save` receiver, a field with a `pre_save()` of its own),
this fails and names it."""

from __future__ import annotations

from typing import Any

from django.db import models
from django.db.models.signals import pre_save

from a2a_core.models import LedgerEntry, LedgerNode, Message, Task, TaskEvent
from a2a_core.storage.rows import save_time_behaviour

# What the group commits write with insert_rows / insert_values / update_rows / update_values
# (services/messages.py, services/task_recording.py).
HOT_PATH_MODELS = [Task, Message, TaskEvent, LedgerEntry, LedgerNode]


def test_the_models_the_hot_path_writes_have_no_save_time_behaviour_it_would_skip():
    assert {m.__name__: save_time_behaviour(m) for m in HOT_PATH_MODELS} == {
        m.__name__: [] for m in HOT_PATH_MODELS
    }


def test_a_receiver_or_a_field_with_its_own_pre_save_is_named():
    def stamp(sender: Any, **kwargs: Any) -> None:
        pass

    pre_save.connect(stamp, sender=Message)
    try:
        assert save_time_behaviour(Message) == ["pre_save has receivers for Message"]
    finally:
        pre_save.disconnect(stamp, sender=Message)

    class Lowered(models.CharField):
        def pre_save(self, model_instance: Any, add: bool) -> Any:
            return getattr(model_instance, self.attname).lower()

    summary = Message._meta.get_field("summary")
    original = summary.__class__
    summary.__class__ = Lowered
    try:
        assert save_time_behaviour(Message) == ["Message.summary has a pre_save() of its own"]
    finally:
        summary.__class__ = original
    assert save_time_behaviour(Message) == []
