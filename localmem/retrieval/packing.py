"""Packing a ranked candidate list into a token budget and rendering it as context. Pure.

The one account of what a context costs: each turn's line ("Speaker: text") and each
session's header once (``turn_cost``); the packer and CABLE's expansion both use it,
so the hard token cap means the same thing everywhere. Rendering is chronological,
grouped by session with its date.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from localmem.storage.queries import TurnRow
from localmem.util.text import count_words, display_time, line_word_cost, words_for_tokens


@dataclass
class Candidate:
    turn_id: int
    score: float
    reason: str  # anchor / temporal / semantic / extracted
    why: str = ""


def rrf(lists: Sequence[Sequence[tuple[int, float]]], k: float) -> dict[int, float]:
    """Reciprocal-rank fusion: sum over lists of 1 / (k + rank), rank from 1."""
    out: dict[int, float] = {}
    for ranked in lists:
        for rank, (tid, _score) in enumerate(ranked, start=1):
            out[tid] = out.get(tid, 0.0) + 1.0 / (k + rank)
    return out


def header_line(row: TurnRow) -> str:
    return f"# {display_time(row.session_started or row.ts)} (session {row.session_key})"


def turn_line(row: TurnRow) -> str:
    return f"{row.speaker}: {row.text}" if row.speaker else row.text


def line_words(row: TurnRow) -> int:
    """Words of ``turn_line(row)``: the turn's own and its speaker's."""
    return line_word_cost(row.words, row.speaker)


def turn_cost(row: TurnRow, sessions: set[int]) -> int:
    """Words that placing ``row`` adds to a context already holding ``sessions``: its line,
    and its session's header when that session is not in the context yet."""
    cost = line_words(row)
    if row.session_id not in sessions:
        cost += count_words(header_line(row))
    return cost


def context_words(ids: Sequence[int], rows: dict[int, TurnRow]) -> int:
    """Words of the rendered context of ``ids``: each turn's line, each session's header once."""
    total = 0
    sessions: set[int] = set()
    for tid in ids:
        row = rows[tid]
        total += turn_cost(row, sessions)
        sessions.add(row.session_id)
    return total


def pack(cands: Sequence[Candidate], rows: dict[int, TurnRow], budget_tokens: int) -> list[Candidate]:
    """Fill the word budget in the given order; a turn that does not fit is skipped and
    smaller ones are still tried. A session header is paid once, with its first turn."""
    cap = words_for_tokens(budget_tokens)
    used = 0
    sessions: set[int] = set()
    chosen: list[Candidate] = []
    for c in cands:
        row = rows[c.turn_id]
        cost = turn_cost(row, sessions)
        if used + cost > cap:
            continue
        used += cost
        sessions.add(row.session_id)
        chosen.append(c)
    return chosen


def render(chosen: Sequence[Candidate], rows: dict[int, TurnRow]) -> tuple[str, list[Candidate]]:
    """Chronological text grouped by session; returns the text and candidates in that order."""

    def key(c: Candidate) -> tuple[str, int, int]:
        r = rows[c.turn_id]
        return (r.session_started or r.ts or "", r.session_id, r.ord)

    ordered = sorted(chosen, key=key)
    lines: list[str] = []
    current: int | None = None
    for c in ordered:
        row = rows[c.turn_id]
        if row.session_id != current:
            if lines:
                lines.append("")
            lines.append(header_line(row))
            current = row.session_id
        lines.append(turn_line(row))
    return "\n".join(lines), ordered
