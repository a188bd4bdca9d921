"""Only ``localmem/storage/`` speaks SQL: no SQL text (statements in string literals,
f-strings included) and no ``.execute`` / ``.executemany`` / ``.one`` call anywhere else
in ``localmem/`` or ``mcp_server/``. The finder is tested on a planted package, so the
check can fail."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("localmem", "mcp_server")
STORAGE = "localmem/storage/"

# Packages whose SQL moves into storage in this same round of work (issue 20) by other
# branches; each entry goes when its branch is merged, and none may be added.
PENDING = ("localmem/enrichment/", "localmem/bench/")

# Statement shapes, upper case as every statement here is written (a lower-case one still
# needs a connection call, which is caught on its own); prose such as "select the best
# from" does not match.
SQL = re.compile(
    r"\bSELECT\b[\s\S]*?\bFROM\b|\bSELECT\s+\w+\("
    r"|\bINSERT\s+(OR\s+[A-Z]+\s+)?INTO\b|\bUPDATE\s+\w+\s+SET\b|\bDELETE\s+FROM\b"
    r"|\b(CREATE|DROP)\s+(VIRTUAL\s+|TEMP\s+)?(TABLE|INDEX|TRIGGER|VIEW)\b|\bALTER\s+TABLE\b"
    r"|\bPRAGMA\s+\w+|\bBEGIN\s+(IMMEDIATE|EXCLUSIVE|DEFERRED)\b|^\s*(COMMIT|ROLLBACK)\s*$"
)
CALLS = ("execute", "executemany", "one")


def _texts(tree: ast.AST) -> list[tuple[int, str]]:
    """Every string literal with its line; an f-string as one text, ``{}`` for its holes."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            out.append((node.lineno, node.value))
        elif isinstance(node, ast.JoinedStr):
            parts = [v.value if isinstance(v, ast.Constant) else "{}" for v in node.values]
            out.append((node.lineno, "".join(str(p) for p in parts)))
    return out


def sql_outside_storage(root: Path, packages: tuple[str, ...], skip: tuple[str, ...] = ()) -> list[str]:
    """``path:line what`` for each SQL text or connection call outside ``STORAGE``."""
    found: dict[str, None] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if rel.startswith((STORAGE, *skip)):
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            for line, text in _texts(tree):
                m = SQL.search(text)
                if m:
                    found[f"{rel}:{line} SQL text {' '.join(m.group(0).split())[:60]!r}"] = None
            for node in ast.walk(tree):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in CALLS:
                    found[f"{rel}:{node.lineno} .{node.func.attr}() call"] = None
    return list(found)


def test_no_sql_outside_storage() -> None:
    found = sql_outside_storage(ROOT, PACKAGES, PENDING)
    assert not found, "SQL outside localmem/storage/ (give storage a named operation instead):\n" + "\n".join(found)


def test_the_finder_catches_planted_sql_and_ignores_prose(tmp_path: Path) -> None:
    files = {
        "pkg/__init__.py": '"""Select the best turns from a list; update the cues."""\n',
        "pkg/storage/ok.py": 'Q = "SELECT id FROM turns"\n',
        "pkg/a.py": 'def f(conn, t):\n    return conn.execute(f"SELECT {t}.id FROM {t} WHERE x = ?", (1,))\n',
        "pkg/b.py": 'Q = ("INSERT OR IGNORE INTO cues(text) "\n     "VALUES (?)")\nP = "PRAGMA user_version"\n',
        "pkg/c.py": "def g(store):\n    return store.conn.one(QUERY)\n",
        "pkg/d.py": 'V = "SELECT vec_version()"\nB = "BEGIN IMMEDIATE"\n',
    }
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    found = sql_outside_storage(tmp_path, ("pkg",), ("pkg/storage/",))
    assert [f.split(" ")[0] for f in found] == [
        "pkg/a.py:2",
        "pkg/a.py:2",
        "pkg/b.py:1",
        "pkg/b.py:3",
        "pkg/c.py:2",
        "pkg/d.py:1",
        "pkg/d.py:2",
    ], found
    assert any(".execute() call" in f for f in found) and any(".one() call" in f for f in found)
