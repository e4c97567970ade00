"""`manage.py a2a ...`: the hub's command line for operators and auditors.

Each command's module is imported only when that command runs: `a2a --help` lists them from
the table below, and `a2a agents` loads the agents' module alone. Importing all of them (the
services, the A2A SDK's types, the delivery path) took most of every command's 4 s start;
bench/cli_start.py measures it.
"""

from __future__ import annotations

import importlib
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from a2a_core.cli.output import add_as_option

# command -> (its module in a2a_core.cli, the function adding its parsers, its one-line help)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "agents": ("agents", "add_parsers", "list registered agents"),
    "register": ("agents", "add_parsers", "register (or re-register) an agent from its card"),
    "suspend": ("agents", "add_parsers", "stop routing to and from an agent; end its connections"),
    "resume": ("agents", "add_parsers", "lift a suspension"),
    "token": ("agents", "add_parsers", "manage an agent's bearer token"),
    "tasks": ("work", "add_parsers", "the most recently updated tasks"),
    "escalations": ("work", "add_parsers", "what waits for a human; answer or decide it"),
    "log": ("audit", "add_parsers", "the recorded traffic, oldest first; --follow for live"),
    "export": ("audit", "add_parsers", "save the filtered traffic as JSONL or training data"),
    "audit": (
        "ledger",
        "add_parsers",
        "verify, checkpoint and export the tamper-evident record; receipts",
    ),
    "policy": ("policy", "add_parsers", "show, change, roll back or dry-run the routing policy"),
    "issuer": (
        "identity",
        "add_parsers",
        "trust identity providers whose JWTs agents sign in with",
    ),
    "serve": ("serve", "add_parsers", "run the hub (and its demo agents) until Ctrl-C"),
    "admin-login": ("serve", "add_parsers", "create the admin user or give it a new password"),
    "notify": ("notify", "add_parsers", "who is told when an escalation waits (webhook, email)"),
    "replay": ("replay", "add_parsers", "send recorded tasks again and compare the answers"),
    "agent": (
        "credentials",
        "add_parsers",
        "one agent's settings: the credential the hub calls it with, peer hubs",
    ),
    "user": ("work", "add_user_parsers", "add dashboard users and change their role"),
}


class Command(BaseCommand):
    help = "Operate the A2A hub: agents, tokens, policy, traffic log and exports."
    # The system checks import every view through the URLconf (1.5 s): `a2a serve` runs
    # them before it starts the hub; the other commands serve nothing and skip them.
    requires_system_checks: list[str] = []
    # The command asked for on the command line (None: unknown, so every module is loaded,
    # as `call_command` needs).
    wanted: str | None = None

    def run_from_argv(self, argv: list[str]) -> None:
        rest = [arg for arg in argv[2:] if not arg.startswith("-")]
        # No command: the help lists them all; a word that is no command (an option's value
        # before it, say): every module is loaded, and argparse reads the line as usual.
        self.wanted = "" if not rest else rest[0] if rest[0] in COMMANDS else None
        super().run_from_argv(argv)

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(
            dest="command", required=True, metavar="COMMAND", parser_class=type(parser)
        )
        needed = dict.fromkeys(
            (module, adder)
            for name, (module, adder, _) in COMMANDS.items()
            if self.wanted is None or self.wanted == name
        )
        for module, adder in needed:
            getattr(importlib.import_module(f"a2a_core.cli.{module}"), adder)(sub)
        for name, (_, _, help_text) in COMMANDS.items():
            if name not in sub.choices:
                # Listed in `a2a --help`; its options are read when it is the one run.
                sub.add_parser(name, help=help_text)
        add_as_option(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        import argparse

        if options["command"] == "serve":
            self.check(display_num_errors=False)
        namespace = argparse.Namespace(**options)
        options["handler"](namespace, self.stdout)
