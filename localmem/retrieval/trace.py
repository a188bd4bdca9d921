"""Why a context holds what it holds: the read path of ``reconstruct`` with every
candidate kept and explained. No LLM, no writes.

``trace`` is ``reconstruct`` itself, given a :class:`~localmem.retrieval.reconstruct.Recorder`
that keeps the scored pool and the selection (packing and CABLE's expansion), so its
context is exactly the one a client gets and there is no second copy of the read path;
beside it,
each candidate turn with the reason it entered the pool (anchor / temporal / semantic /
extracted, or antecedent for a turn CABLE brought in), its probability of being
evidence, its value per word (the packing order), its features, and what became of it:

- ``packed``: in the context;
- ``evicted``: the packer placed it, then CABLE replaced it with an antecedent turn;
- ``antecedent``: added by CABLE's expansion (a pool turn the packer left out keeps its
  place in the order; a turn from outside the pool comes after the candidates, rank 0);
- ``not packed``: did not fit in the budget left when its turn in the order came.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from localmem.records import Context
from localmem.retrieval.packing import context_words, line_words
from localmem.retrieval.reconstruct import Recorder, reconstruct
from localmem.retrieval.scorer import FEATURES, Weights
from localmem.storage.reads.queries import TurnRow
from localmem.storage.write.store import Store
from localmem.util.text import words_for_tokens

STATUSES = ("packed", "evicted", "antecedent", "not packed")


@dataclass(frozen=True)
class TraceTurn:
    """One candidate turn of a read and what became of it."""

    turn_id: int
    rank: int  # 1-based place in the packing order; 0 for a turn CABLE added from outside the pool
    status: str  # one of STATUSES
    reason: str  # anchor / temporal / semantic / extracted / antecedent
    why: str
    score: float  # probability of being evidence (for a turn from outside the pool: CABLE's link score)
    value: float  # score per word of the turn's line: the packing order
    words: int  # words of the turn's line
    features: dict[str, float]  # the scorer's inputs; empty for a turn from outside the pool
    session: str
    timestamp: str | None
    speaker: str
    text: str


@dataclass(frozen=True)
class Trace:
    """A reconstructed context and how it was chosen."""

    context: Context
    turns: tuple[TraceTurn, ...]  # candidates in packing order, then CABLE's additions from outside the pool
    anchors: int
    cap_words: int  # the budget in words
    used_words: int  # words of the rendered context

    def to_dict(self) -> dict[str, Any]:
        return {
            "context": self.context.to_dict(),
            "turns": [asdict(t) for t in self.turns],
            "anchors": self.anchors,
            "cap_words": self.cap_words,
            "used_words": self.used_words,
            "counts": {s: sum(1 for t in self.turns if t.status == s) for s in STATUSES},
        }


def trace(
    store: Store,
    query: str,
    budget_tokens: int | None = None,
    as_of: str | None = None,
    scope: str | None = None,
    *,
    weights: Weights | None = None,
) -> Trace:
    """``reconstruct(store, query, budget_tokens, as_of, scope)`` with every candidate
    turn, its reason, score, features and fate (see the module docstring)."""
    rec = Recorder()
    ctx = reconstruct(store, query, budget_tokens, as_of, scope, weights=weights, recorder=rec)
    cap = words_for_tokens(ctx.budget_tokens)
    pool, sel = rec.pool, rec.selection
    if pool is None or sel is None:
        return Trace(ctx, (), 0, cap, 0)
    row_of = {int(t): j for j, t in enumerate(pool.turn_ids)}
    packed = {c.turn_id for c in sel.packed}
    final = {c.turn_id for c in sel.chosen}
    added = {c.turn_id: c for c in sel.chosen if c.reason == "antecedent"}
    out: list[TraceTurn] = []
    for rank, c in enumerate(sel.ranked, start=1):
        j = row_of[c.turn_id]
        feats = {name: round(float(v), 4) for name, v in zip(FEATURES, pool.feats[j], strict=True)}
        reason, why = c.reason, c.why
        if c.turn_id in added:  # the packer left it out; CABLE brought it in over a link
            link = added.pop(c.turn_id)
            status, reason, why = "antecedent", "antecedent", f"{link.why} (in the pool as {c.reason})"
        elif c.turn_id in packed:
            status = "packed" if c.turn_id in final else "evicted"
        else:
            status = "not packed"
        out.append(_turn(sel.rows, c.turn_id, rank, status, reason, why, c.score, feats))
    for c in added.values():  # linked turns from outside the pool
        out.append(_turn(sel.rows, c.turn_id, 0, "antecedent", c.reason, c.why, c.score, {}))
    used = context_words([c.turn_id for c in sel.chosen], sel.rows) if sel.chosen else 0
    return Trace(ctx, tuple(out), pool.anchors, cap, used)


def _turn(
    rows: dict[int, TurnRow],
    turn_id: int,
    rank: int,
    status: str,
    reason: str,
    why: str,
    score: float,
    feats: dict[str, float],
) -> TraceTurn:
    row = rows[turn_id]
    words = line_words(row)
    return TraceTurn(
        turn_id=turn_id,
        rank=rank,
        status=status,
        reason=reason,
        why=why,
        score=round(score, 6),
        value=round(score / max(words, 1), 8),
        words=words,
        features=feats,
        session=row.session_key,
        timestamp=row.ts,
        speaker=row.speaker,
        text=row.text,
    )
