"""`manage.py a2a` from a shell loads only the module of the command it runs: every command
is still listed, and each still runs in its own process (bench/cli_start.py times them)."""

from __future__ import annotations

import pytest

from a2a_core.management.commands.a2a import COMMANDS
from tests.a2a_core.cli.helpers import run_cli
from tests.factories import held_escalation, register

pytestmark = pytest.mark.django_db(transaction=True)


def test_help_lists_every_command_with_its_help():
    done = run_cli("--help")
    assert done.returncode == 0, done.stderr
    for name, (_, _, help_text) in COMMANDS.items():
        assert name in done.stdout and help_text in " ".join(done.stdout.split()), name


def test_each_command_runs_in_its_own_process_with_its_options():
    register("alpha")
    held_escalation("deploy?")
    agents = run_cli("agents", "--limit", "5")
    assert agents.returncode == 0 and "alpha" in agents.stdout, agents.stderr
    # An option's value before the command: every module is loaded, the line read as usual.
    listed = run_cli("--as", "dana", "escalations", "--json")
    assert listed.returncode == 0 and '"question": "deploy?"' in listed.stdout, listed.stderr
    helped = run_cli("escalations", "--help")
    assert "--limit N" in helped.stdout and "--after ID" in helped.stdout
    wrong = run_cli("agents", "--limit", "x")
    assert wrong.returncode == 2 and "--limit: invalid int value: 'x'" in wrong.stderr
    unknown = run_cli("frobnicate")
    assert unknown.returncode == 2 and "invalid choice: 'frobnicate'" in unknown.stderr
