"""The write path's room: how what the services decide to write reaches the database, fast.

Services say *what* is written (rows, in one transaction); this package says how, and it is
the only place in the hub with SQL. Every speed trick lives here, with the figure that
justifies it in the docstring of the function that plays it:

- `batching`: group commits — what concurrent calls write, in one transaction; a member's bad
  input fails that member alone, never its batch.
- `writers`: where group commits run — writer threads with connections they keep, never the
  event loop's thread; one on SQLite, several at once on PostgreSQL.
- `rows`: rows built without `Model.__init__` and written in statements composed once, on
  the driver's own cursor, a batch's writes sent together (one round trip on PostgreSQL);
  `postgres`: a table's rows of a batch in one prepared statement.
- `reads`: the few reads a batch makes (the tasks it changes, locked; calls in flight).
- `drivers`: the connection and cursor those statements run on, and a group commit's
  transaction: on PostgreSQL one pipeline from BEGIN to COMMIT.
- `sqlite`: the SQLite backend — WAL, writers queued on a lock file, checkpoints aside.
- `postgresql`: Django's PostgreSQL backend without the `LIKE 'prefix%'` indexes nothing uses;
  `postgresql.vacuum`: the dead rows every call leaves, vacuumed within seconds.
- `policy_state`, `redis_state`: what the policy counts between calls (rate windows,
  breakers), in the database or in Redis (one round trip per batch).
"""
