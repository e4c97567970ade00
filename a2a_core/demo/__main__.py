"""`python -m a2a_core.demo endpoints|inboxes`: run one of the demo's two processes."""

from __future__ import annotations

import sys


def main() -> None:
    from a2a_core.demo import endpoints, inboxes

    processes = {"endpoints": endpoints.main, "inboxes": inboxes.main}
    if len(sys.argv) != 2 or sys.argv[1] not in processes:
        sys.exit(f"usage: python -m a2a_core.demo {'|'.join(processes)}")
    processes[sys.argv[1]]()


if __name__ == "__main__":
    main()
