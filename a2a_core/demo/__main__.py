"""`python -m a2a_core.demo endpoints|inboxes`: run one of the demo's two processes."""

from __future__ import annotations

import sys

# First, before the a2a-sdk client is imported: the SDK maps JSON-RPC error codes to error
# classes when its client loads, and the hub's own codes (a policy refusal, a rate limit...)
# must be among them for a refusal to arrive with its reason.
import a2a_core.protocol.errors  # noqa: F401


def main() -> None:
    from a2a_core.demo import endpoints, inboxes

    processes = {"endpoints": endpoints.main, "inboxes": inboxes.main}
    if len(sys.argv) != 2 or sys.argv[1] not in processes:
        sys.exit(f"usage: python -m a2a_core.demo {'|'.join(processes)}")
    processes[sys.argv[1]]()


if __name__ == "__main__":
    main()
