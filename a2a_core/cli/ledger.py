"""`a2a audit ...`: the tamper-evident record (`a2a_core.services.ledger`).

- `verify`: recompute the record and compare the database with it; or, with `--export FILE
  --jwks KEYS`, check an export offline with the hub's public keys alone (no database);
- `checkpoint`: seal and sign a checkpoint now;
- `baseline`: take in the rows that have no entry (from before the record, or written while
  HUB_LEDGER was off), as they are, marked as such;
- `export --ledger FILE`: the record as JSONL (checkpoints, then entries);
- `receipt MESSAGE`: a signed receipt of a message's decision (MESSAGE: the hub's message
  number, or its messageId);
- `verify-receipt FILE --jwks KEYS`: check a receipt with the public keys alone.

Exit status: 0 when what was checked holds (one line says so), 1 when it does not (the line
names the first bad entry and what is wrong), 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from django.core.management.base import CommandError

from a2a_core.cli.output import fail

# The most an export line, a receipt or a JWKS file may take: a bigger one is refused.
MAX_LINE = 16 * 1024 * 1024
MAX_DOCUMENT = 1024 * 1024


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("audit", help="verify, checkpoint and export the tamper-evident record")
    inner = p.add_subparsers(dest="audit_command", required=True, metavar="ACTION")
    v = inner.add_parser("verify", help="recompute the record and compare the database with it")
    v.add_argument("--export", metavar="FILE", help="check this export offline instead")
    v.add_argument("--jwks", metavar="FILE_OR_URL", help="the hub's public keys (with --export)")
    v.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    v.set_defaults(handler=verify)
    c = inner.add_parser("checkpoint", help="seal and sign a checkpoint now")
    c.set_defaults(handler=checkpoint)
    b = inner.add_parser(
        "baseline", help="take in the rows from before the record (an upgraded database)"
    )
    b.set_defaults(handler=baseline)
    e = inner.add_parser("export", help="the record as JSONL, to verify offline")
    e.add_argument("--ledger", metavar="FILE", required=True, help="where to write ('-': stdout)")
    e.set_defaults(handler=export)
    r = inner.add_parser("receipt", help="a signed receipt of a message's decision")
    r.add_argument("message", help="the hub's message number, or the message's messageId")
    r.set_defaults(handler=receipt)
    vr = inner.add_parser("verify-receipt", help="check a receipt with the hub's public keys")
    vr.add_argument("file", help="the receipt (the compact JWS; '-': stdin)")
    vr.add_argument("--jwks", metavar="FILE_OR_URL", required=True, help="the hub's public keys")
    vr.set_defaults(handler=verify_receipt)


def _bad(line: str) -> CommandError:
    return CommandError(line, returncode=1)


def _read(name: str, limit: int) -> str:
    if name == "-":
        text = sys.stdin.read(limit + 1)
    else:
        try:
            with Path(name).open(encoding="utf-8", errors="strict") as f:
                text = f.read(limit + 1)
        except (OSError, UnicodeDecodeError) as exc:
            raise fail(f"cannot read {name}: {exc}") from None
    if len(text) > limit:
        raise fail(f"{name} is larger than {limit} bytes")
    return text


def _jwks(source: str | None) -> dict[str, Any]:
    if not source:
        raise fail("--jwks is required: the hub's public keys, a file or its /.well-known URL")
    if source.startswith(("https://", "http://")):
        import httpx

        try:
            response = httpx.get(source, timeout=10, follow_redirects=True)
            response.raise_for_status()
            data = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise fail(f"cannot fetch the JWKS at {source}: {exc}") from None
    else:
        try:
            data = json.loads(_read(source, MAX_DOCUMENT))
        except ValueError as exc:
            raise fail(f"{source} is not JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("keys"), list):
        raise fail(f'{source} is not a JWK Set (no "keys" list)')
    return data


def verify(args: argparse.Namespace, out: IO[str]) -> None:
    if args.export:
        _verify_export(args.export, _jwks(args.jwks), out)
        return
    if args.jwks:
        raise fail("--jwks goes with --export (the database is checked with the hub's own keys)")
    from a2a_core.services.ledger_audit import ledger_verify

    def progress(line: str) -> None:
        if not args.quiet:
            sys.stderr.write(f"{line}\n")

    problem, summary = ledger_verify(progress)
    if problem is not None:
        raise _bad(f"tampered: {problem}")
    out.write(f"{summary}\n")


def baseline(args: argparse.Namespace, out: IO[str]) -> None:
    from a2a_core.services.ledger_audit import ledger_baseline

    taken = ledger_baseline()
    if taken:
        out.write(
            f"took {taken} rows into the record as they are now (marked baseline: the record "
            "proves nothing of them before this); `a2a audit verify` checks them from here on\n"
        )
    else:
        out.write("every governed row has its entry already: nothing to take in\n")


def _lines(name: str) -> Iterator[str]:
    if name == "-":
        yield from sys.stdin
        return
    try:
        with Path(name).open(encoding="utf-8") as f:
            yield from f
    except OSError as exc:
        raise fail(f"cannot read {name}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise fail(f"{name} is not UTF-8 text ({exc})") from None


def _verify_export(name: str, keys: dict[str, Any], out: IO[str]) -> None:
    from a2a_core.ledger.check import Checkpoint, LogCheck

    marks: list[Checkpoint] = []
    entries: list[tuple[int | None, str, str, str, str, str]] = []
    for number, line in enumerate(_lines(name), start=1):
        if len(line) > MAX_LINE:
            raise fail(f"{name}, line {number}: longer than {MAX_LINE} bytes")
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            if item["type"] == "checkpoint":
                marks.append(Checkpoint(int(item["size"]), str(item["root"]), str(item["jws"])))
            elif item["type"] == "entry":
                index = item["index"]
                entries.append(
                    (
                        index if isinstance(index, int) else None,
                        str(item["body"]),
                        str(item["leafHash"]),
                        str(item["chainHash"]),
                        str(item["kind"]),
                        str(item["object"]),
                    )
                )
            else:
                raise ValueError(f"unknown type {item['type']!r}")
        except (ValueError, KeyError, TypeError) as exc:
            raise fail(f"{name}, line {number}: not a record line ({exc})") from None
    check = LogCheck(marks, keys)
    for entry in entries:
        check.entry(*entry)
    problem = check.finish()
    if problem is not None:
        raise _bad(f"tampered: {problem}")
    if not check.checked:
        raise _bad("unproven: no checkpoint in the export covers its entries")
    out.write(
        f"intact: {check.size} entries, {check.checked} checkpoints signed by the given keys\n"
    )


def checkpoint(args: argparse.Namespace, out: IO[str]) -> None:
    from a2a_core.services.ledger import ledger_checkpoint

    cp = ledger_checkpoint()
    if cp is None:
        out.write("the record is empty: nothing to sign\n")
        return
    out.write(f"checkpoint: {cp.size} entries, root {cp.root}\n")


def export(args: argparse.Namespace, out: IO[str]) -> None:
    from a2a_core.services.ledger_audit import ledger_export_lines

    if args.ledger == "-":
        for line in ledger_export_lines():
            out.write(line + "\n")
        return
    try:
        with Path(args.ledger).open("w", encoding="utf-8") as f:
            count = 0
            for line in ledger_export_lines():
                f.write(line + "\n")
                count += 1
    except OSError as exc:
        raise fail(f"cannot write {args.ledger}: {exc.strerror}") from None
    sys.stderr.write(f"{count} lines written to {args.ledger}\n")


def receipt(args: argparse.Namespace, out: IO[str]) -> None:
    from a2a_core.models import Direction, Message
    from a2a_core.services.ledger_audit import ledger_receipt

    text = args.message.strip()
    found = Message.objects.filter(direction=Direction.REQUEST)
    row = (
        found.filter(pk=int(text)).first()
        if text.isdigit() and len(text) < 19
        else found.filter(message_id=text[:128]).order_by("-pk").first()
    )
    if row is None:
        raise fail(f"no message {text!r}: give the hub's message number or its messageId")
    token = ledger_receipt(row.pk)
    if token is None:
        raise fail(f"message {row.pk} has no entry in the record (written with HUB_LEDGER=off)")
    out.write(token + "\n")


def verify_receipt(args: argparse.Namespace, out: IO[str]) -> None:
    from a2a_core.ledger.proofs import ProofError, check_receipt

    keys = _jwks(args.jwks)
    token = _read(args.file, MAX_DOCUMENT).strip()
    try:
        payload = check_receipt(token, keys)
    except ProofError as exc:
        raise _bad(f"invalid receipt: {exc}") from None
    body = json.loads(payload["entry"])
    out.write(
        f"valid: entry {payload['index']} ({body.get('kind')} {body.get('type')}:"
        f"{body.get('id')}) is in the log of {payload['checkpoint']['size']} entries "
        f"the hub signed at {payload['checkpoint']['issuedAt']}\n"
    )
