"""Group commit: what many concurrent requests write, written in one transaction.

A `Batcher` takes items from any number of coroutines and hands whatever is waiting — one item
when the hub is quiet, dozens under load — to a sync batch function, one transaction run by
the deployment's writer (`a2a_core.storage.writers`). The batch function returns one result
(or exception) per item, in order; each submitter gets its own. Nothing waits for a batch to
fill: a lone request waits one turn of the event loop at most. While a batch is being
written, what arrives waits for it, and goes in the next batch: batches grow with the load
and shrink with it.

One batch is written at a time, though PostgreSQL has several writer threads: a batch that
has run for `SPILL_AFTER` without finishing (waiting for a row lock a long transaction
elsewhere holds) lets the next go to another writer, so one lock stalls the other calls for
a tenth of a second at most. Batches written side by side were smaller and cost more. On two
cores, `bench/throughput.py` with hubs of both kinds side by side, two workers each, five
rounds: at concurrency 16, 104.5 calls/s against 94.0 and 8.5 against 9.8 ms of the hub's
CPU per call (PostgreSQL's 3.6 against 4.0 ms); at concurrency 64, 107.0 against 99.5 and
8.2 against 8.9 ms (PostgreSQL's 2.5 against 3.3), ahead in 9 of the 10 rounds. A single
writer (no second one at all) did as well, within the spread (114.5 and 118.0 calls/s).

A batch's events (`a2a_core.events`) go out once its members have their results: the
callers go on first.

Members are isolated: when the batch function raises instead of answering (one member's input
broke the shared transaction, which rolled back), each member is written again alone, in a
transaction of its own, and only the one that raises fails.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from a2a_core import events, timeline
from a2a_core.logging import get_logger
from a2a_core.storage.writers import Writer, writer

log = get_logger("batching")

In = TypeVar("In")
Out = TypeVar("Out")

# How long a batch runs before the next may go to another writer beside it (see above).
SPILL_AFTER = 0.1

BatchFn = Callable[[Sequence[In]], list["Out | Exception"]]
# An item, its submitter's future, and the submitter's timeline (see `a2a_core.timeline`).
type _Entry[I, O] = tuple[I, asyncio.Future[O], timeline.Marks | None]
# The events a batch's commits published, kept back until its members have their results.
type _Kept = list[list[tuple[str, events.Event]]]


async def _until_done_or_overdue(running: dict[asyncio.Task[None], float]) -> None:
    """Until no batch is being written, or the oldest of those being written is overdue."""
    while running:
        wait = min(running.values()) + SPILL_AFTER - time.monotonic()
        if wait <= 0:
            return
        await asyncio.wait(list(running), timeout=wait, return_when=asyncio.FIRST_COMPLETED)


class Batcher[In, Out]:
    def __init__(
        self, process: Callable[[Sequence[In]], list[Out | Exception]], *, max_batch: int = 64
    ) -> None:
        self.process = process
        self.max_batch = max_batch
        self._queues: dict[asyncio.AbstractEventLoop, asyncio.Queue[_Entry[In, Out]]] = {}
        self._workers: dict[asyncio.AbstractEventLoop, asyncio.Task[None]] = {}

    async def submit(self, item: In) -> Out:
        """Queue `item`; return its result or raise its exception once its batch commits."""
        loop = asyncio.get_running_loop()
        queue = self._queues.get(loop)
        worker = self._workers.get(loop)
        if queue is None or worker is None or worker.done():
            for old in [lp for lp in self._queues if lp.is_closed()]:
                self._queues.pop(old, None)
                self._workers.pop(old, None)
            queue = self._queues[loop] = asyncio.Queue()
            self._workers[loop] = loop.create_task(self._work(queue), name="hub-batcher")
        future: asyncio.Future[Out] = loop.create_future()
        queue.put_nowait((item, future, timeline.current() if timeline.ON else None))
        return await future

    async def _work(self, queue: asyncio.Queue[_Entry[In, Out]]) -> None:
        into = writer()
        free = asyncio.Semaphore(into.capacity)
        running: dict[asyncio.Task[None], float] = {}  # batches being written, and since when
        while True:
            first = await queue.get()
            # One more turn of the loop first: requests already due add their items, so a
            # busy hub commits fewer, larger batches (a tenth less CPU per call at
            # concurrency 16); a lone request waits for nothing but that turn. Then the batch
            # being written, unless it is overdue, and a free writer: meanwhile more items
            # arrive for this batch.
            await asyncio.sleep(0)
            await _until_done_or_overdue(running)
            await free.acquire()
            batch = [first]
            while len(batch) < self.max_batch and not queue.empty():
                batch.append(queue.get_nowait())
            task = asyncio.create_task(self._answer(into, batch))
            running[task] = time.monotonic()
            task.add_done_callback(running.pop)
            task.add_done_callback(lambda _: free.release())

    async def _answer(self, into: Writer, batch: list[_Entry[In, Out]]) -> None:
        if timeline.ON:
            timeline.batch([marks for _, _, marks in batch])
        kept: _Kept = []
        results = await self._commit(into, [item for item, _, _ in batch], kept)
        for (_, future, _), result in zip(batch, results, strict=True):
            if future.done():
                continue
            if isinstance(result, Exception):
                future.set_exception(result)
            else:
                future.set_result(result)
        events.publish_held(kept)

    async def _commit(self, into: Writer, items: list[In], kept: _Kept) -> list[Out | Exception]:
        try:
            return await into.run(timeline.carried(self._holding(items, kept)))
        except Exception as exc:
            if len(items) == 1:
                return [exc]
            log.warning(
                "a group commit failed; its %d members are written one by one",
                len(items),
                exc_info=True,
            )
        results: list[Out | Exception] = []
        for item in items:
            try:
                results.extend(await into.run(self._holding([item], kept)))
            except Exception as exc:
                results.append(exc)
        return results

    def _holding(self, items: list[In], kept: _Kept) -> Callable[[], list[Out | Exception]]:
        """The batch function on `items`, keeping what its commits publish in `kept`."""

        def run() -> list[Out | Exception]:
            with events.held() as held:
                try:
                    return self.process(items)
                finally:
                    kept.extend(held)

        return run
