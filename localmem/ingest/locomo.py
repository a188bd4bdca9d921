"""LoCoMo JSON (a list of samples with ``conversation`` and ``qa``) -> sessions.

Fields relied on: ``sample_id``; ``conversation.session_N`` (list of turns with
``speaker``, ``dia_id``, ``text``, optional ``blip_caption``) and
``conversation.session_N_date_time`` ("1:56 pm on 8 May, 2023"). Date keys without a
session are ignored. An image caption is appended to the turn text as
``[image: caption]``. Source = ``locomo:<sample_id>``; native turn id = ``dia_id``.
One unit per sample; the file is streamed.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from localmem.errors import InputError
from localmem.ingest._json import Cursor, field
from localmem.ingest._units import Unit, benchmark_units, sessions_of, timestamp
from localmem.records import SessionIn, TurnIn

_SESSION = re.compile(r"^session_([0-9]{1,9})$")


def turn_text(turn: dict[str, object]) -> str:
    text = str(turn.get("text") or "").strip()
    caption = turn.get("blip_caption")
    if isinstance(caption, str) and caption.strip():
        text = f"{text} [image: {caption.strip()}]".strip()
    return text


def units(path: Path, start: Cursor | None = None, sample: str | None = None) -> Iterator[Unit]:
    return benchmark_units(
        path, start, sample, _sample, name="LoCoMo", item="sample", id_field="sample_id", id_kind=(str, int)
    )


def _sample(item: Any, sample_id: str, path: Path, where: str) -> Iterator[SessionIn]:
    conv = field(item, "conversation", dict, path, where)
    numbers = sorted(int(m.group(1)) for k in conv if (m := _SESSION.match(k)))
    for n in numbers:
        swhere = f"{where}.conversation.session_{n}"
        turns_raw = field(conv, f"session_{n}", list, path, f"{where}.conversation")
        date_raw = field(conv, f"session_{n}_date_time", str, path, f"{where}.conversation")
        started = timestamp(date_raw, path, f"{swhere}_date_time")
        turns = []
        for ti, t in enumerate(turns_raw):
            twhere = f"{swhere}[{ti}]"
            speaker = field(t, "speaker", str, path, twhere)
            dia = field(t, "dia_id", str, path, twhere)
            field(t, "text", str, path, twhere)
            text = turn_text(t)
            if not text:
                raise InputError("turn has no text", path=str(path), where=twhere)
            turns.append(TurnIn(text=text, speaker=speaker, role="user", timestamp=started, source_id=dia))
        if turns:
            yield SessionIn(key=f"session_{n}", turns=tuple(turns), started_at=started, source=f"locomo:{sample_id}")


def parse(path: Path, sample: str | None = None) -> Iterator[SessionIn]:
    return sessions_of(units(path, sample=sample))
