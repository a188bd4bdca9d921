"""Secrets and private spans that older versions stored, found and taken out
(``localmem redact --scan``; today's write path never stores them: ``prepare``).

Where they can be, and what becomes of each place:

- a turn's text: the turn is rewritten in place, at the same session and position, by
  ``rewrite.rewrite_turns`` (the web view's span redaction uses it too): the redacted text
  written as a new turn (journal: ``turn``; statement cues, FTS rows and vectors derived
  again, temporal edges to both neighbours restored, semantic edges from it, an extraction
  job queued) and the old turn forgotten through the door (journal: ``forget`` of the old
  hash; its statement cues, FTS rows, vectors, extracted cues, edges and topic memberships
  go by cascade). A turn left with no text (all of it private) is forgotten. Its old hash
  joins the forget set (a hash, no text);
- session titles, working directories, repositories and branches; antecedent edges'
  reasons; topic and theme labels and summaries; model replies in the call log: redacted
  in place;
- the change journal: every row's data redacted in place (what a later sync exports);
- afterwards the FTS indexes are merged (``optimize``: deleted rows' tokens leave their
  segments), the file is rebuilt (``VACUUM``: freed pages held old text) and the WAL
  truncated, so no copy of the old text is left in the store's files.

Out of reach (said by the CLI): sync segments already written (immutable; ``localmem sync``
later carries the forgets and the rewritten turns), replicas and backups, exports, and
other devices' stores until they fold those forgets. Semantic edges other turns had to a
rewritten turn are not made again, and a folding device places the rewritten turn at the
end of its session.

Invariant: a scan only reads; ``apply`` writes each chunk of turns in one transaction
(embedding before it, never inside), so an interrupted run leaves whole rewrites and
can simply be run again.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from localmem.storage.engine import compact, db
from localmem.storage.engine.db import Conn
from localmem.storage.engine.inlist import rows_in
from localmem.storage.write.rewrite import Rewrite, rewrite_turns
from localmem.storage.write.store import Store
from localmem.util import secrets

CHUNK = 200  # turns rewritten per transaction
# (place, table, key column, text columns) redacted in place
IN_PLACE: tuple[tuple[str, str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("session fields", "sessions", ("id",), ("title", "cwd", "repository", "branch")),
    ("edge reasons", "edges", ("src", "dst", "kind"), ("reason",)),
    ("topic labels", "topics", ("id",), ("label", "summary")),
    ("antecedent queries", "antecedent_runs", ("turn_id",), ("queries",)),
    ("model replies", "model_calls", ("id",), ("reply",)),
)


def _kinds(text: str) -> list[str]:
    found = secrets.kinds(text)
    return [*found, "private span"] if "<private>" in text.lower() else found


@dataclass
class Scan:
    """What a scan found: items to redact by place, secrets by kind, the turns to rewrite."""

    places: Counter[str] = field(default_factory=Counter)
    kinds: Counter[str] = field(default_factory=Counter)
    turns: list[int] = field(default_factory=list)
    scanned: Counter[str] = field(default_factory=Counter)

    def note(self, place: str, text: str) -> bool:
        found = _kinds(text)
        if not found:
            return False
        self.places[place] += 1
        self.kinds.update(found)
        return True

    def to_dict(self) -> dict[str, Any]:
        return {"places": dict(self.places), "kinds": dict(self.kinds), "scanned": dict(self.scanned)}


def _walk(value: Any, fn: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, list):
        return [_walk(v, fn) for v in value]
    if isinstance(value, dict):
        return {k: _walk(v, fn) for k, v in value.items()}
    return value


def _turn_texts(conn: Conn) -> Iterator[tuple[int, str]]:
    last = 0
    while rows := conn.execute("SELECT id, text FROM turns WHERE id > ? ORDER BY id LIMIT 2000", (last,)).fetchall():
        yield from ((int(i), str(t)) for i, t in rows)
        last = int(rows[-1][0])


def scan(conn: Conn, progress: Callable[[int], None] | None = None) -> Scan:
    """Every place of the module docstring read once; nothing written."""
    out = Scan()
    for tid, text in _turn_texts(conn):
        out.scanned["turns"] += 1
        if out.note("turns", text):
            out.turns.append(tid)
        if progress is not None:
            progress(1)
    for place, table, _key, cols in IN_PLACE:
        for row in conn.execute(f"SELECT {', '.join(cols)} FROM {table}"):
            out.scanned[place] += 1
            out.note(place, "\n".join(str(v) for v in row if v))
    for (data,) in conn.execute("SELECT data FROM changes WHERE data IS NOT NULL"):
        out.scanned["journal rows"] += 1
        out.note("journal rows", str(data))
    return out


@dataclass
class Applied:
    turns_rewritten: int = 0
    turns_forgotten: int = 0
    in_place: Counter[str] = field(default_factory=Counter)
    journal_rows: int = 0
    vacuumed: bool = False
    not_vacuumed: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "turns_rewritten": self.turns_rewritten,
            "turns_forgotten": self.turns_forgotten,
            "in_place": dict(self.in_place),
            "journal_rows": self.journal_rows,
            "vacuumed": self.vacuumed,
            "not_vacuumed": self.not_vacuumed,
        }


def apply(store: Store, found: Scan, progress: Callable[[int], None] | None = None) -> Applied:
    """Redact what ``found`` names (module docstring)."""
    out = Applied()
    for at in range(0, len(found.turns), CHUNK):
        chunk = found.turns[at : at + CHUNK]
        _rewrite(store, chunk, out)
        if progress is not None:
            progress(len(chunk))
    store.retrying(lambda: _in_place(store.conn, out))
    _compact(store.conn, out)
    return out


def _rewrite(store: Store, ids: list[int], out: Applied) -> None:
    """The turns of ``ids`` rewritten with their secrets taken out (``rewrite.rewrite_turns``,
    one transaction; a turn left with no text is forgotten)."""
    rows = rows_in(store.conn, "SELECT id, hash, text FROM turns WHERE id IN ({marks})", ids)
    items = [Rewrite(int(tid), str(h), secrets.redact(str(text))) for tid, h, text in rows]
    done = rewrite_turns(store, items, redact=False)
    out.turns_rewritten += len(done.new_ids)
    out.turns_forgotten += len(done.forgotten)


def _in_place(conn: Conn, out: Applied) -> None:
    with db.transaction(conn):
        for place, table, key, cols in IN_PLACE:
            n = len(key)
            rows = conn.execute(f"SELECT {', '.join(key)}, {', '.join(cols)} FROM {table}").fetchall()
            where = " AND ".join(f"{k} = ?" for k in key)
            sets = ", ".join(f"{c} = ?" for c in cols)
            for row in rows:
                clean = [secrets.redact(str(v)) if v else v for v in row[n:]]
                if clean != list(row[n:]):
                    conn.execute(f"UPDATE {table} SET {sets} WHERE {where}", (*clean, *row[:n]))
                    out.in_place[place] += 1
        for seq, data in conn.execute("SELECT seq, data FROM changes WHERE data IS NOT NULL").fetchall():
            value = json.loads(data)
            redacted = _walk(value, secrets.redact)
            if redacted != value:
                payload = json.dumps(redacted, ensure_ascii=False, sort_keys=True)
                conn.execute("UPDATE changes SET data = ? WHERE seq = ?", (payload, seq))
                out.journal_rows += 1


def _compact(conn: Conn, out: Applied) -> None:
    """Leave no copy of the old text in the files: FTS segments merged, free pages dropped,
    the WAL emptied. A store another process holds open may refuse the rebuild: said, not raised."""
    with db.transaction(conn):
        for table in ("turns_fts", "cues_fts", "extracted_cues_fts"):
            conn.execute(f"INSERT INTO {table}({table}) VALUES ('optimize')")
    out.not_vacuumed = compact.rebuild(conn)  # refused (another process holds the store): the redaction stands
    out.vacuumed = not out.not_vacuumed
