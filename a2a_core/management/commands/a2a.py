"""`manage.py a2a ...`: the hub's command line for operators and auditors."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from a2a_core.cli import agents, audit, identity, notify, policy, replay, serve, work
from a2a_core.cli.output import add_as_option


class Command(BaseCommand):
    help = "Operate the A2A hub: agents, tokens, policy, traffic log and exports."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(
            dest="command", required=True, metavar="COMMAND", parser_class=type(parser)
        )
        for module in (agents, work, audit, policy, identity, serve, notify, replay):
            module.add_parsers(sub)
        work.add_user_parsers(sub)
        add_as_option(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        import argparse

        namespace = argparse.Namespace(**options)
        options["handler"](namespace, self.stdout)
