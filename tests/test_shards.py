"""./hub test's shards: together they run every test of the suite, each exactly once."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.shards import assign, backend

# A few files, the embedded hub's among them, stand for the suite: collecting it all takes seconds.
FILES = ["tests/a2a_core/ledger", "tests/a2a_core/demo", "tests/e2e/test_demo.py"]


def collected(backend: str, *args: str) -> list[str]:
    env = {**os.environ, "HUB_TEST_BACKEND": backend}
    if backend == "sqlite":
        env.pop("DATABASE_URL", None)
    else:
        env.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/a2a_hub")
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", *FILES, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    return [line for line in run.stdout.splitlines() if "::" in line]


def test_the_shards_of_a_run_hold_every_test_of_it_once():
    whole = collected(backend())
    shards = [collected(backend(), "--shard", f"{k}/3") for k in (1, 2, 3)]

    assert sorted(test for shard in shards for test in shard) == sorted(whole)
    assert all(shards)
    for shard in shards:  # a file is never cut: its module fixtures are set up once
        files = {test.split("::")[0] for test in shard}
        assert not files & {
            test.split("::")[0] for other in shards if other is not shard for test in other
        }


def test_the_postgresql_run_leaves_out_only_the_tests_of_the_embedded_hub():
    left_out = set(collected("sqlite")) - set(collected("postgres"))

    assert (
        "tests/a2a_core/demo/test_serve.py::test_serve_without_the_demo_starts_the_hub_alone"
        in left_out
    )
    assert set(collected("sqlite", "-m", "embedded")) == left_out


def test_files_go_longest_first_to_the_shard_with_the_least_time():
    seconds = {"a.py": 50.0, "b.py": 40.0, "c.py": 30.0, "d.py": 20.0, "e.py": 10.0}

    shard_of = assign(seconds, [*seconds, "new.py"], 2)

    totals = [
        sum(seconds.get(name, 30.0) for name, shard in shard_of.items() if shard == k)
        for k in (0, 1)
    ]
    assert totals == [90.0, 90.0]  # a file not recorded yet counts as the median, 30 s
    assert shard_of["a.py"] != shard_of["b.py"]


def test_a_shard_that_is_not_k_of_n_is_refused_with_what_is_wanted():
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "--shard",
            "3/2",
            "tests/test_shards.py",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert run.returncode != 0
    assert "--shard 3/2: K must be between 1 and N" in run.stderr
