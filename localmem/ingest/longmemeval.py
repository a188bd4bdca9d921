"""LongMemEval JSON (a list of questions, each with its own haystack) -> sessions.

Fields relied on: ``question_id``, ``haystack_session_ids``, ``haystack_dates``
("2023/05/30 (Tue) 23:40"), ``haystack_sessions`` (lists of ``{role, content}``).
Each question's haystack is its own source ``longmemeval:<question_id>`` (so
``scope`` selects it); ``question`` picks one. Native turn id =
``<haystack_session_id>:<index in session>`` (0-based). One unit per question; the
file is streamed (the large LongMemEval files are hundreds of MB).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from localmem.errors import InputError
from localmem.ingest._json import Cursor, field
from localmem.ingest._units import Unit, benchmark_units, sessions_of, timestamp
from localmem.records import SessionIn, TurnIn


def units(path: Path, start: Cursor | None = None, question: str | None = None) -> Iterator[Unit]:
    return benchmark_units(
        path, start, question, _haystack, name="LongMemEval", item="question", id_field="question_id"
    )


def _haystack(item: Any, qid: str, path: Path, where: str) -> Iterator[SessionIn]:
    ids = field(item, "haystack_session_ids", list, path, where)
    dates = field(item, "haystack_dates", list, path, where)
    sessions = field(item, "haystack_sessions", list, path, where)
    if not len(ids) == len(dates) == len(sessions):
        raise InputError(
            "haystack_session_ids, haystack_dates and haystack_sessions differ in length", path=str(path), where=where
        )
    for si, (sid, date, turns_raw) in enumerate(zip(ids, dates, sessions, strict=True)):
        swhere = f"{where}.haystack_sessions[{si}]"
        started = timestamp(str(date), path, f"{where}.haystack_dates[{si}]")
        if not isinstance(turns_raw, list):
            raise InputError("a session should be a list of turns", path=str(path), where=swhere)
        turns = []
        for ti, t in enumerate(turns_raw):
            twhere = f"{swhere}[{ti}]"
            role = field(t, "role", str, path, twhere)
            content = field(t, "content", str, path, twhere)
            if not content.strip():
                continue
            turns.append(
                TurnIn(text=content.strip(), speaker=role, role=role, timestamp=started, source_id=f"{sid}:{ti}")
            )
        if turns:
            yield SessionIn(key=str(sid), turns=tuple(turns), started_at=started, source=f"longmemeval:{qid}")


def parse(path: Path, question: str | None = None) -> Iterator[SessionIn]:
    return sessions_of(units(path, question=question))
