"""LoCoMo JSON (a list of samples with ``conversation`` and ``qa``) -> sessions.

Fields relied on: ``sample_id``; ``conversation.session_N`` (list of turns with
``speaker``, ``dia_id``, ``text``, optional ``blip_caption``) and
``conversation.session_N_date_time`` ("1:56 pm on 8 May, 2023"). Date keys without a
session are ignored. An image caption is appended to the turn text as
``[image: caption]``. Source = ``locomo:<sample_id>``; native turn id = ``dia_id``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from localmem.errors import InputError
from localmem.ingest._json import field, read_json
from localmem.records import SessionIn, TurnIn
from localmem.text import parse_time

_SESSION = re.compile(r"^session_(\d+)$")


def turn_text(turn: dict[str, object]) -> str:
    text = str(turn.get("text") or "").strip()
    caption = turn.get("blip_caption")
    if isinstance(caption, str) and caption.strip():
        text = f"{text} [image: {caption.strip()}]".strip()
    return text


def parse(path: Path, sample: str | None = None) -> Iterator[SessionIn]:
    data = read_json(path)
    if not isinstance(data, list):
        raise InputError("expected a JSON list of LoCoMo samples", path=str(path), where="$")
    found = False
    for si, item in enumerate(data):
        where = f"$[{si}]"
        sample_id = str(field(item, "sample_id", (str, int), path, where))
        if sample is not None and sample_id != sample:
            continue
        found = True
        conv = field(item, "conversation", dict, path, where)
        numbers = sorted(int(m.group(1)) for k in conv if (m := _SESSION.match(k)))
        for n in numbers:
            swhere = f"{where}.conversation.session_{n}"
            turns_raw = field(conv, f"session_{n}", list, path, f"{where}.conversation")
            date_raw = field(conv, f"session_{n}_date_time", str, path, f"{where}.conversation")
            try:
                started = parse_time(date_raw)
            except ValueError as exc:
                raise InputError(str(exc), path=str(path), where=f"{swhere}_date_time") from exc
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
                yield SessionIn(
                    key=f"session_{n}", turns=tuple(turns), started_at=started, source=f"locomo:{sample_id}"
                )
    if sample is not None and not found:
        raise InputError(f"no sample with sample_id {sample!r}", path=str(path))
