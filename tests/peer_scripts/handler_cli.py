"""The `handler` command of `a2a-handler` (its CLI), run with this script's arguments.

    handler_cli.py ARG [ARG ...]

The same as running `handler ARG ...` from the peer's environment."""

from __future__ import annotations

import sys

from a2a_handler.cli import main

if __name__ == "__main__":
    sys.argv[0] = "handler"
    sys.exit(main())
