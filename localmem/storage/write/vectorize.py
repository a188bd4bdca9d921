"""What the write path embeds for a turn, and how: the one place that decides it, so
write and reindex agree.

Invariants:
- a turn is embedded as ``turn_doc`` (who and when travel with what);
- with ``cue_vectors = "span"`` a turn costs one forward pass: each statement cue's
  vector pools the turn's in-context token vectors over the cue's span; with
  ``"separate"`` every cue is embedded on its own, as ``turn_doc`` of its sentence;
- no SQL here: this runs outside any transaction (and, during ingest, beside one on
  another thread).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from localmem.models.embedding import Embedder
from localmem.util.text import display_time

TurnSpec = tuple[str, str, str | None, Sequence[tuple[int, int]]]  # speaker, text, ts, cue spans


def turn_doc(speaker: str, text: str, ts: str | None) -> str:
    """What is embedded and indexed for a turn: who and when travel with what."""
    who = f"{speaker}: " if speaker else ""
    return f"[{display_time(ts)}] {who}{text}"


def turn_vectors(embedder: Embedder, mode: str, turns: Sequence[TurnSpec]) -> tuple[np.ndarray, list[np.ndarray]]:
    """Vectors of turns (speaker, text, ts, statement-cue spans) and of their statement
    cues (one matrix per turn, rows in span order)."""
    docs = [turn_doc(sp, text, ts) for sp, text, ts, _ in turns]
    span_embed = getattr(embedder, "embed_with_spans", None)
    if mode == "span" and span_embed is not None:
        # The doc adds a prefix before the text: shift the spans by its length.
        shifted = [
            [(a + len(d) - len(text), b + len(d) - len(text)) for a, b in spans]
            for d, (_sp, text, _ts, spans) in zip(docs, turns, strict=True)
        ]
        tvecs, cvecs = span_embed(docs, shifted)
        return tvecs, list(cvecs)
    cue_docs = [turn_doc(sp, text[a:b], ts) for sp, text, ts, spans in turns for a, b in spans]
    vecs = embedder.embed(docs + cue_docs)
    out: list[np.ndarray] = []
    at = len(docs)
    for *_rest, spans in turns:
        out.append(vecs[at : at + len(spans)])
        at += len(spans)
    return vecs[: len(docs)], out
