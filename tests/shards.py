"""Which tests a run takes: split into shards that take about as long, so that ./hub test runs
several at once; and on PostgreSQL, none marked `embedded` (they run on a SQLite database of
their own, so the SQLite run has them).

`--shard K/N` keeps the test files of shard K of N and deselects the rest. Files go whole (their
module fixtures are set up once) to the shard with the least time so far, longest first, by the
seconds `tests/durations.json` records for the backend under test; a file it does not know yet
counts as its median. `--store-durations` writes what this run's files took back into it.

Each shard has test databases of its own (`name_test_databases`, called from conftest.py); ./hub
test gives each a Redis database of its own as well.
"""

from __future__ import annotations

import fcntl
import json
import os
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

DURATIONS = Path(__file__).with_name("durations.json")
_seconds: defaultdict[str, float] = defaultdict(float)  # what each file took in this run
_left_out: list[pytest.Item] = []  # what this plugin deselected


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("shards")
    group.addoption("--shard", metavar="K/N", help="run only shard K of N (files balanced by time)")
    group.addoption(
        "--store-durations",
        action="store_true",
        help=f"record what each test file took into {DURATIONS.name}",
    )


def backend() -> str:
    return os.environ.get("HUB_TEST_BACKEND") or (
        "postgres" if os.environ.get("DATABASE_URL", "").startswith("postgres") else "sqlite"
    )


def parse_shard(text: str) -> tuple[int, int]:
    """'2/4' -> (2, 4); a usage error for anything else."""
    try:
        index, count = (int(part) for part in text.split("/"))
    except ValueError:
        raise pytest.UsageError(f"--shard takes K/N, like 1/2; got {text!r}") from None
    if not 1 <= index <= count:
        raise pytest.UsageError(f"--shard {text}: K must be between 1 and N")
    return index, count


def assign(seconds: dict[str, float], files: list[str], count: int) -> dict[str, int]:
    """Each file's shard (0-based): longest first, each to the shard with the least time."""
    known = [seconds[name] for name in files if name in seconds]
    default = statistics.median(known) if known else 1.0
    totals = [0.0] * count
    shard_of: dict[str, int] = {}
    for name in sorted(files, key=lambda name: (-seconds.get(name, default), name)):
        shard = min(range(count), key=lambda index: (totals[index], index))
        shard_of[name] = shard
        totals[shard] += seconds.get(name, default)
    return shard_of


def recorded() -> dict[str, float]:
    if not DURATIONS.exists():
        return {}
    table: dict[str, dict[str, float]] = json.loads(DURATIONS.read_text())
    return table.get(backend(), {})


def pytest_configure(config: pytest.Config) -> None:
    text = config.getoption("shard")
    if text:
        config._hub_shard = parse_shard(text)  # type: ignore[attr-defined]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if backend() == "postgres":
        # A test on a SQLite database of its own would only do the same again.
        embedded = [item for item in items if item.get_closest_marker("embedded")]
        if embedded:
            _left_out.extend(embedded)
            config.hook.pytest_deselected(items=embedded)
            items[:] = [item for item in items if not item.get_closest_marker("embedded")]
    shard = getattr(config, "_hub_shard", None)
    if shard is None:
        return
    index, count = shard
    files = sorted({item.nodeid.split("::")[0] for item in items})
    shard_of = assign(recorded(), files, count)
    kept, dropped = [], []
    for item in items:
        (kept if shard_of[item.nodeid.split("::")[0]] == index - 1 else dropped).append(item)
    if dropped:
        _left_out.extend(dropped)
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def name_test_databases(config: pytest.Config) -> None:
    """A shard's own test databases (their names end in `_shardK`), so that the shards of one
    backend run side by side. Called before the test databases are created."""
    from django.conf import settings

    shard = getattr(config, "_hub_shard", None)
    if shard is None:
        return
    for database in settings.DATABASES.values():
        test = database.setdefault("TEST", {})
        name = test.get("NAME") or f"test_{database['NAME']}"
        test["NAME"] = f"{name}_shard{shard[0]}"


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _seconds[report.nodeid.split("::")[0]] += report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    if _left_out and session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        session.exitstatus = pytest.ExitCode.OK  # what a narrow selection holds is in another run
    if not session.config.getoption("store_durations"):
        return
    with DURATIONS.open("a+") as table_file:  # the shards of a run each add their files
        fcntl.flock(table_file, fcntl.LOCK_EX)
        table_file.seek(0)
        text = table_file.read()
        table: dict[str, Any] = json.loads(text) if text else {}
        mine = table.setdefault(backend(), {})
        mine.update({name: round(seconds, 1) for name, seconds in _seconds.items()})
        table[backend()] = dict(sorted(mine.items()))
        table_file.seek(0)
        table_file.truncate()
        table_file.write(json.dumps(table, indent=1, sort_keys=True) + "\n")
