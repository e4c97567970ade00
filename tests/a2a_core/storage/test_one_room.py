"""The write path lives in one room: no SQL outside `a2a_core/storage/` (migrations aside), and
nothing in the code lifts Django's guard against blocking the event loop."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SQL = re.compile(
    r"^\s*(SELECT|INSERT|UPDATE|DELETE|PRAGMA|CREATE|ALTER|DROP|BEGIN|COMMIT|WITH)\b"
    r"|\bFROM\s+[\"'\w]+\s+WHERE\b|\bIN\s*\(%s"
)


def _modules(*packages: str) -> Iterator[Path]:
    for package in packages:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if "/migrations/" not in relative and not relative.startswith("a2a_core/storage/"):
                yield path


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _sql_strings(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    skip = _docstrings(tree)
    return [
        f"{path.relative_to(ROOT)}:{node.lineno}: {node.value[:60]!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in skip
        and SQL.search(node.value)
    ]


def test_no_sql_string_lives_outside_the_storage_package():
    found = [
        hit for path in _modules("a2a_core", "dashboard", "config") for hit in _sql_strings(path)
    ]
    assert found == []


def test_the_check_finds_sql_where_it_is():
    # The same check, pointed at the storage package, finds its statements.
    statements = [
        hit
        for path in sorted((ROOT / "a2a_core/storage").rglob("*.py"))
        for hit in _sql_strings(path)
    ]
    assert any("INSERT INTO" in hit for hit in statements)
    assert any("PRAGMA" in hit for hit in statements)


def test_nothing_lifts_djangos_async_guard():
    for package in ("a2a_core", "config"):
        for path in (ROOT / package).rglob("*.py"):
            assert "DJANGO_ALLOW_ASYNC_UNSAFE" not in path.read_text(), path
