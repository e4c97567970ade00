"""The per-agent slot count behind `incomingConcurrent`, on its own."""

from __future__ import annotations

import asyncio

import pytest

from a2a_core.delivery.slots import Dequeued, Slots


async def test_waiting_calls_get_slots_in_the_order_they_came():
    slots = Slots(share_of=1)
    await slots.acquire(1, "a", 1, "t0", 5)
    order: list[str] = []

    async def call(task_id: str) -> None:
        await slots.acquire(1, "a", 1, task_id, 5)
        order.append(task_id)
        slots.release(1)

    waiters = [asyncio.create_task(call(f"t{i}")) for i in range(1, 4)]
    await asyncio.sleep(0)
    assert slots.waiting(1) == 3
    slots.release(1)
    await asyncio.gather(*waiters)
    assert order == ["t1", "t2", "t3"]
    assert (slots.busy(1), slots.waiting(1)) == (0, 0)


async def test_a_wait_that_times_out_leaves_nothing_behind():
    slots = Slots(share_of=1)
    await slots.acquire(1, "a", 1, "t0", 5)
    with pytest.raises(TimeoutError):
        await slots.acquire(1, "a", 1, "t1", 0.05)
    assert (slots.busy(1), slots.waiting(1)) == (1, 0)
    slots.release(1)
    await slots.acquire(1, "a", 1, "t2", 0.05)
    assert slots.busy(1) == 1


async def test_a_withdrawn_call_raises_dequeued_and_gives_its_place_up():
    slots = Slots(share_of=1)
    await slots.acquire(1, "a", 1, "t0", 5)
    waiting = asyncio.create_task(slots.acquire(1, "a", 1, "t1", 5))
    await asyncio.sleep(0)
    assert slots.withdraw("t1")
    with pytest.raises(Dequeued):
        await waiting
    assert not slots.withdraw("t1")
    assert (slots.busy(1), slots.waiting(1)) == (1, 0)


async def test_a_raised_limit_lets_the_next_call_go_without_waiting():
    slots = Slots(share_of=1)
    await slots.acquire(1, "a", 1, "t0", 5)
    await slots.acquire(1, "a", 2, "t1", 0.05)
    assert slots.busy(1) == 2


async def test_several_workers_each_keep_their_share_rounded_up():
    slots = Slots(share_of=2)
    await slots.acquire(1, "a", 3, "t0", 5)
    await slots.acquire(1, "a", 3, "t1", 5)
    with pytest.raises(TimeoutError):
        await slots.acquire(1, "a", 3, "t2", 0.05)


async def test_no_limit_never_waits():
    slots = Slots(share_of=1)
    for i in range(100):
        await slots.acquire(1, "a", None, f"t{i}", 0.01)
    assert slots.busy(1) == 100
