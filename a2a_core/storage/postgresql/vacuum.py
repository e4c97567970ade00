"""PostgreSQL: the dead rows of the tables every call updates, cleared within seconds.

Every call inserts a task and its request message and updates both when the answer comes
(state, answer time): each update leaves the old row version and its index entries behind,
dead, until VACUUM. PostgreSQL's autovacuum looks at a database once a minute by default
and vacuums a table only when a fifth of its rows are dead, so under steady load the hub's
hot tables carry minutes of dead rows, and the statements of every group commit walk
through them: the calls-in-flight count, the tasks locked for an answer, the updates
themselves (they also go to the end of the table, where no space was freed).

Measured with `bench/throughput.py --backend postgres --concurrency 16 --rounds 4 --seconds
10` (one worker; HUB_PG_VACUUM_SECONDS=0 against the default): without it calls/s fell from
run to run as dead rows piled up (365, 296, 239, 183 req/s, 0.21x direct; later, on a
slower hour, 324, 234, 227, 201, 0.18x) and PostgreSQL spent 1.91 (2.34) ms of CPU per
call; with it 436, 415, 403, 447 (0.30x; later 382, 350, 318, 315 and 338, 306, 338, 282,
0.25-0.26x) and 0.67 (0.89-0.91) ms. Per batch (`pg_stat_statements` over three six-second
runs), the in-flight count took 1.09 ms without and 0.04 ms with, the locking read of the
answered tasks 0.61 and 0.05 ms, the message update 1.67 and 0.34 ms; the vacuums
themselves, about one every three seconds, 25 ms each.

So each hub process keeps a `Vacuumer`: every HUB_PG_VACUUM_SECONDS (default 2; 0 turns it
off, for a deployment whose autovacuum is tuned for this) it looks up the hot tables in
PostgreSQL's statistics and vacuums those with DEAD_ROWS dead rows, on a thread and
connection of its own. `SKIP_LOCKED`: a table another process is vacuuming is left to it.
VACUUM needs the tables' owner (the role that migrated them); without it PostgreSQL skips
them with a warning and autovacuum stays in charge.
"""

from __future__ import annotations

import contextlib
import threading

from django.db import DEFAULT_DB_ALIAS, connections

from a2a_core.logging import get_logger
from a2a_core.storage.drivers import close_if_hung_up

log = get_logger("postgresql")

# The tables whose rows the calls update: tasks, messages, inbox deliveries, the policy's
# counters when they are kept in the database.
HOT_TABLES = ("a2a_core_task", "a2a_core_message", "a2a_core_delivery", "a2a_core_policycounter")
DEAD_ROWS = 1000
WAIT_SECONDS = 30.0


def table_changes() -> list[tuple[str, int, int, int]]:
    """Per hot table, from PostgreSQL's statistics (which each connection reports at most
    once a second): the row versions its updates and deletes have left dead in its indexes
    since the statistics began (a HOT update leaves none there), the dead rows it estimates
    the table holds now, and the vacuums it has had."""
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute(
            "SELECT relname, n_tup_upd - n_tup_hot_upd + n_tup_del, n_dead_tup, "
            "vacuum_count + autovacuum_count FROM pg_stat_user_tables "
            "WHERE schemaname = current_schema() AND relname = ANY(%s) ORDER BY relname",
            [list(HOT_TABLES)],
        )
        return [(name, changed, dead, vacuums) for name, changed, dead, vacuums in cursor]


def vacuum(tables: list[str]) -> None:
    """VACUUM the tables, skipping any another session is vacuuming."""
    if not tables:
        return
    db = connections[DEFAULT_DB_ALIAS]
    with db.cursor() as cursor:
        cursor.execute(f"VACUUM (SKIP_LOCKED) {', '.join(map(db.ops.quote_name, tables))}")


class Vacuumer:
    """Vacuums the hot tables with `minimum` dead rows every `every` seconds, on a thread
    (and so a connection) of its own.

    A table is due when PostgreSQL estimates it holds `minimum` dead rows, or when its
    updates and deletes have left `minimum` dead index entries since its last vacuum (by
    anyone) that this process saw. The estimate alone misses them: a read that prunes a
    page frees its dead rows but not their index entries, and an ANALYZE resets the estimate
    from a sample (seen in the suite: 7 dead rows estimated after 1,200 updates)."""

    def __init__(self, every: float, minimum: int = DEAD_ROWS) -> None:
        self.every = every
        self.minimum = minimum
        # Per table: its changes when this process last saw it vacuumed (or first saw it),
        # and its vacuums then.
        self._since: dict[str, tuple[int, int]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="hub-vacuum", daemon=True)

    def start(self) -> Vacuumer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=WAIT_SECONDS)

    def due(self) -> list[str]:
        """The hot tables to vacuum now."""
        due = []
        for table, changed, dead, vacuums in table_changes():
            since = self._since.get(table)
            if since is None or since[1] != vacuums:
                since = self._since[table] = (changed, vacuums)
            if dead >= self.minimum or changed - since[0] >= self.minimum:
                due.append(table)
        return due

    def _run(self) -> None:
        try:
            while True:
                try:
                    close_if_hung_up(connections[DEFAULT_DB_ALIAS])
                    vacuum(self.due())
                except Exception:
                    # A lost connection, a server restarting: the next pass opens another.
                    log.warning("vacuum of the hot tables failed", exc_info=True)
                    with contextlib.suppress(Exception):
                        connections[DEFAULT_DB_ALIAS].close()
                if self._stop.wait(self.every):
                    return
        finally:
            connections.close_all()
