"""`manage.py a2a serve` with the demo, as a user runs it: it starts, and Ctrl-C stops it all."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.a2a_core.demo.helpers import Serve, migrate, running
from tests.servers import free_port

pytestmark = [pytest.mark.live, pytest.mark.embedded]


@pytest.fixture(scope="module")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory with a migrated SQLite database, made once for this module."""
    return migrate(tmp_path_factory.mktemp("migrated"))


@pytest.fixture
def data_dir(migrated: Path, tmp_path: Path) -> Path:
    """This test's own copy of the migrated data directory."""
    copy = tmp_path / "data"
    shutil.copytree(migrated, copy)
    return copy


def test_serve_starts_the_hub_with_the_demo_and_ctrl_c_stops_everything(
    data_dir: Path, tmp_path: Path
):
    port = free_port()
    with (
        (tmp_path / "stderr.txt").open("wb") as stderr,
        Serve(data_dir, "--port", str(port), stderr=stderr) as serve,
    ):
        assert serve.wait_for("demo agents:", 90), serve.output
        assert serve.wait_for("director -> ", 30), serve.output
        children = serve.children()
        code = serve.interrupt(terminal=True)

    output = serve.output
    errors = (tmp_path / "stderr.txt").read_text()
    assert f"A2A Hub is running: http://127.0.0.1:{port}/" in output
    assert "Log in as  admin / " in output
    assert "demo agents: pm, architect, tester, implementer, ledger, flaky, ping, pong," in output
    assert "(8 endpoint, 5 inbox)" in output
    assert code == 0, errors
    assert len(children) == 3  # the hub, the endpoint agents, the inbox agents
    assert [pid for pid in children if running(pid)] == []
    assert "Traceback" not in errors, errors


def test_serve_without_the_demo_starts_the_hub_alone(data_dir: Path):
    with Serve(data_dir, "--port", str(free_port()), "--no-demo") as serve:
        assert serve.wait_for("Ctrl-C stops", 90), serve.output
        children = serve.children()
        assert serve.interrupt() == 0

    assert "demo agents" not in serve.output
    assert len(children) == 1


def test_serve_started_in_the_background_still_stops_on_sigint(data_dir: Path):
    """`./hub run &` in a script inherits SIGINT ignored; `kill -INT` must still stop it."""
    with Serve(data_dir, "--port", str(free_port()), "--no-demo", in_background=True) as serve:
        assert serve.wait_for("Ctrl-C stops", 90), serve.output
        children = serve.children()
        assert serve.interrupt() == 0
    assert not any(running(pid) for pid in children)
