"""``storage.write.redact.redact_span``: a span of a stored turn replaced by
``[secret: manual]`` in ONE transaction that writes the redacted turn and forgets the
original through the door; the result is what writing the redacted text would have
stored, in the original's place."""

from __future__ import annotations

from pathlib import Path

import pytest

from localmem.config import IngestParams, Settings
from localmem.errors import InputError, NotFound
from localmem.records import SessionIn, TurnIn
from localmem.storage.write import redaction
from localmem.storage.write.redact import MANUAL, Conflict, redact_span
from localmem.storage.write.store import Store
from tests.helpers.fakes import HashEmbedder

SECRET = "hunter2-horse-battery"
TEXTS = (
    "We met at the harbour cafe on Monday.",
    f"The wifi password there is {SECRET}, and it never changes.",
    "Next time we should try the bakery next door.",
    "They open at seven.",
)


def _session(texts: tuple[str, ...] = TEXTS, key: str = "cafe") -> SessionIn:
    turns = tuple(
        TurnIn(t, "Ana" if i % 2 == 0 else "Ben", timestamp=f"2024-03-01T10:0{i}:00", source_id=f"{key}:{i}")
        for i, t in enumerate(texts)
    )
    return SessionIn(key=key, turns=turns, source="chat")


def _open(path: Path) -> Store:
    return Store(path, embedder=HashEmbedder(), settings=Settings(db=path))


def _rows(s: Store, sql: str, *args: object) -> list[tuple[object, ...]]:
    return [tuple(r) for r in s.conn.execute(sql, args)]


def _derived(s: Store, tid: int) -> dict[str, object]:
    """Everything the write path derives for a turn, by content (ids left out)."""
    return {
        "cues": sorted(_rows(s, "SELECT kind, text, span_start, span_end FROM cues WHERE turn_id = ?", tid)),
        "vec": len(_rows(s, "SELECT turn_id FROM turn_vec WHERE turn_id = ?", tid)),
        "cue_vecs": len(
            _rows(s, "SELECT v.cue_id FROM cue_vec v JOIN cues c ON c.id = v.cue_id WHERE c.turn_id = ?", tid)
        ),
        "temporal": sorted(
            _rows(
                s,
                "SELECT a.ord, b.ord, round(e.weight, 6) FROM edges e JOIN turns a ON a.id = e.src "
                "JOIN turns b ON b.id = e.dst WHERE e.kind = 'temporal' AND (e.src = ? OR e.dst = ?)",
                tid,
                tid,
            )
        ),
        "job": _rows(s, "SELECT kind, state FROM jobs WHERE turn_id = ?", tid),
    }


def test_redact_replaces_the_span_and_rebuilds_everything_in_place(tmp_path: Path) -> None:
    with _open(tmp_path / "a.db") as s:
        ids = s.write(_session()).turn_ids
        old = ids[1]
        old_hash = str(s.conn.one("SELECT hash FROM turns WHERE id = ?", (old,))[0])
        start = TEXTS[1].index(SECRET)
        seq = int(s.conn.one("SELECT coalesce(max(seq), 0) FROM changes")[0])
        r = redact_span(s, old, start, start + len(SECRET), expect_hash=old_hash)
        assert r.old_id == old and r.new_id != old and r.text == TEXTS[1].replace(SECRET, MANUAL)
        assert _rows(s, "SELECT id FROM turns WHERE id = ?", old) == []
        assert _rows(s, "SELECT text, ord FROM turns WHERE id = ?", r.new_id) == [(r.text, 1)]
        assert [x[0] for x in _rows(s, "SELECT id FROM turns ORDER BY ord")] == [ids[0], r.new_id, ids[2], ids[3]]
        # the door: the redacted turn written and the original forgotten, in one transaction
        assert _rows(s, "SELECT kind, key FROM changes WHERE seq > ? ORDER BY seq", seq) == [
            ("turn", r.new_hash),
            ("forget", old_hash),
        ]
        assert _rows(s, "SELECT hash FROM forgotten") == [(old_hash,)]
        # nothing anywhere still holds the secret: text, statement cues, full-text index
        assert not _rows(s, "SELECT id FROM turns WHERE text LIKE ?", f"%{SECRET}%")
        assert not _rows(s, "SELECT id FROM cues WHERE text LIKE ?", f"%{SECRET}%")
        assert not _rows(s, "SELECT rowid FROM turns_fts WHERE turns_fts MATCH ?", '"hunter2"')
        assert not _rows(s, "SELECT rowid FROM cues_fts WHERE cues_fts MATCH ?", '"hunter2"')
        assert _rows(s, "SELECT rowid FROM turns_fts WHERE turns_fts MATCH ?", '"wifi"') == [(r.new_id,)]
        redacted = _derived(s, r.new_id)

    # the same rows as writing the redacted text in the first place
    with _open(tmp_path / "b.db") as fresh:
        texts = (TEXTS[0], TEXTS[1].replace(SECRET, MANUAL), TEXTS[2], TEXTS[3])
        written = fresh.write(_session(texts)).turn_ids
        assert _derived(fresh, written[1]) == redacted
        assert str(fresh.conn.one("SELECT hash FROM turns WHERE id = ?", (written[1],))[0]) == r.new_hash


def test_the_original_never_comes_back(tmp_path: Path) -> None:
    with _open(tmp_path / "a.db") as s:
        ids = s.write(_session()).turn_ids
        start = TEXTS[1].index(SECRET)
        r = redact_span(s, ids[1], start, start + len(SECRET))
        again = s.write(_session())  # the source file ingested again
        assert again.new_turns == 0
        assert not _rows(s, "SELECT id FROM turns WHERE text LIKE ?", f"%{SECRET}%")
        assert len(_rows(s, "SELECT id FROM turns WHERE session_id = ?", r.session_id)) == 4


def test_a_one_turn_session_keeps_its_session(tmp_path: Path) -> None:
    with _open(tmp_path / "a.db") as s:
        (tid,) = s.write(_session((TEXTS[1],), key="solo")).turn_ids
        sessions = _rows(s, "SELECT id, key FROM sessions")
        start = TEXTS[1].index(SECRET)
        r = redact_span(s, tid, start, start + len(SECRET))
        assert _rows(s, "SELECT id, key FROM sessions") == sessions
        assert _rows(s, "SELECT session_id FROM turns") == [(r.session_id,)]


def test_refusals_change_nothing(tmp_path: Path) -> None:
    with _open(tmp_path / "a.db") as s:
        ids = s.write(_session()).turn_ids
        before = _rows(s, "SELECT id, hash, text FROM turns ORDER BY id")
        with pytest.raises(Conflict, match="changed since"):
            redact_span(s, ids[1], 0, 3, expect_hash="0" * 32)
        for start, end in ((5, 5), (-1, 3), (0, 10_000), (3, 2)):
            with pytest.raises(InputError, match="not a span"):
                redact_span(s, ids[1], start, end)
        with pytest.raises(InputError, match="not a span"):  # only spaces
            redact_span(s, ids[0], 6, 7)
        with pytest.raises(NotFound):
            redact_span(s, 10**9, 0, 3)
        with pytest.raises(InputError, match="not the text selected"):
            redact_span(s, ids[1], 0, 3, expect_text="Thx")
        assert _rows(s, "SELECT id, hash, text FROM turns ORDER BY id") == before
        assert _rows(s, "SELECT count(*) FROM forgotten") == [(0,)]


def test_redact_scan_rewrites_through_the_same_path_and_keeps_a_one_turn_session(tmp_path: Path) -> None:
    """``localmem redact --scan`` rewrites with ``rewrite_turns`` too: a secret stored by an
    older version (the guard off) in a session's only turn leaves the session in place."""
    path = tmp_path / "old.db"
    settings = Settings(db=path, ingest=IngestParams(redact=False))
    key = "sk-ant-api03-" + "Q" * 90
    with Store(path, embedder=HashEmbedder(), settings=settings) as s:
        (tid,) = s.write(_session((f"my key is {key} ok",), key="solo")).turn_ids
        sessions = _rows(s, "SELECT id, key FROM sessions")
        found = redaction.scan(s.conn)
        assert found.turns == [tid]
        done = redaction.apply(s, found)
        assert (done.turns_rewritten, done.turns_forgotten) == (1, 0)
        assert _rows(s, "SELECT id, key FROM sessions") == sessions
        assert _rows(s, "SELECT text FROM turns") == [("my key is [secret: anthropic-key] ok",)]
