"""A TCP relay that delays every chunk of bytes, each way: a database on another host.

    python bench/slow_link.py LISTEN_PORT TARGET_PORT [--delay-ms 0.25]

Everything received on 127.0.0.1:LISTEN_PORT goes to 127.0.0.1:TARGET_PORT, and back, each
chunk `--delay-ms` later than it came (a round trip gains twice that), in order; the event
loop's timers round a delay up to the next millisecond or so, and with 0 the relay alone
adds ~0.2 ms a round trip (PostgreSQL's `SELECT 1` here: 0.27 ms direct, 0.50 through it;
2.8 ms with `--delay-ms 0.25`). For
measuring what a write path's round trips cost once the database is not on the same machine:
point a bench's database URL at LISTEN_PORT, e.g.
`HUB_BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:LISTEN_PORT/a2a_bench`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    loop = asyncio.get_running_loop()
    try:
        while data := await reader.read(65536):
            if delay:
                # Later chunks are due later: the order holds.
                loop.call_at(loop.time() + delay, writer.write, data)
            else:
                writer.write(data)
        await asyncio.sleep(delay)
    finally:
        with contextlib.suppress(Exception):
            writer.close()


async def main(listen: int, target: int, delay: float) -> None:
    async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", target)
        await asyncio.gather(
            _pipe(reader, upstream_writer, delay),
            _pipe(upstream_reader, writer, delay),
            return_exceptions=True,
        )

    server = await asyncio.start_server(relay, "127.0.0.1", listen)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("listen", type=int)
    parser.add_argument("target", type=int)
    parser.add_argument("--delay-ms", type=float, default=0.25)
    args = parser.parse_args()
    asyncio.run(main(args.listen, args.target, args.delay_ms / 1000))
