"""Ids the hub makes up (tasks, contexts, messages it writes itself) are UUIDv7: they sort in
the order they were made."""

from __future__ import annotations

import time
import uuid

from a2a_core.models.task import new_id


def test_ids_are_version_7_uuids_that_sort_by_when_they_were_made():
    earlier = [new_id() for _ in range(50)]
    time.sleep(0.002)
    later = [new_id() for _ in range(50)]

    parsed = [uuid.UUID(i) for i in earlier + later]
    assert {(u.version, u.variant) for u in parsed} == {(7, uuid.RFC_4122)}
    assert max(earlier) < min(later)
    made_at_ms = parsed[-1].int >> 80
    assert abs(made_at_ms - time.time() * 1000) < 1000
    assert len(set(earlier + later)) == 100
