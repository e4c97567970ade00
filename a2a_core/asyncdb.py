"""Running the hub's (synchronous, transactional) reads and one-off writes from async code.

They run on one dedicated thread, so they use one connection and never block the loop. A
plain executor is enough here: the services need none of asgiref's thread-sensitive
bookkeeping, and skipping it is measurably cheaper on the A2A hot path. The group commits of
the hot path have writer threads of their own (`a2a_core.storage.writers`).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

from django.db import close_old_connections

P = ParamSpec("P")
R = TypeVar("R")

_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hub-db")


def _fresh[R](fn: Callable[[], R]) -> R:
    # Outside Django's request cycle nobody recycles connections: drop broken or expired
    # ones before each call (with PostgreSQL's pool this returns the connection to the pool).
    close_old_connections()
    return fn()


async def db[**P, R](fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """Call a sync service on the hub's database thread and await its result."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_executor, _fresh, functools.partial(fn, *args, **kwargs))


def run_on_db_thread[R](fn: Callable[[], R]) -> R:
    """Run `fn` on the database thread from sync code and wait (shutdown, tests)."""
    return _executor.submit(fn).result()
