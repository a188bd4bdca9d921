"""Search the store as a person browses it: the read path's own ranked lists, fused.

No second search engine: ``search`` takes the four ranked lists that ``reconstruct``'s
pool starts from (``pool.ranked_lists``: turn bm25 and cue bm25 over FTS5 for the words,
turn cosine and statement-cue cosine over the vector mirrors for the meaning), ``depth``
deep and restricted to the turns a filter allows, and fuses them by reciprocal rank
(``packing.rrf``, the pool's own fusion). Each hit says which lists hold it, so a page can
say whether it matched the words, the meaning or both. ``match`` keeps only the lexical
lists (``words``) or the dense ones (``meaning``).

Invariants: read-only, one snapshot (the caller's when it holds one); deterministic (ties
by turn id); a deeper search keeps a shallower one's best hits ahead of the new ones only
as far as rrf does, so a pager asks for the depth of its last page.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from localmem.errors import InputError
from localmem.retrieval.packing import rrf
from localmem.retrieval.pool import LIST_NAMES, ranked_lists
from localmem.storage.reads.queries import Filter
from localmem.storage.write.store import Store

MATCHES = {"all": (0, 1, 2, 3), "words": (0, 3), "meaning": (1, 2)}
LEXICAL = frozenset({"turn bm25", "cue bm25"})


@dataclass(frozen=True)
class Hit:
    turn_id: int
    score: float  # the reciprocal-rank fusion of the lists that hold it
    lists: tuple[str, ...]  # which of ``LIST_NAMES`` hold it

    @property
    def words(self) -> bool:
        return any(x in LEXICAL for x in self.lists)

    @property
    def meaning(self) -> bool:
        return any(x not in LEXICAL for x in self.lists)


def search(store: Store, query: str, depth: int, allowed: np.ndarray | None = None, match: str = "all") -> list[Hit]:
    """Turns for ``query`` best first: the fused ranked lists, each ``depth`` deep, over the
    turns of ``allowed`` (None: every turn)."""
    if not query.strip():
        raise InputError("the search needs words")
    if match not in MATCHES:
        raise InputError(f"match must be one of {', '.join(MATCHES)}, got {match!r}")
    if depth <= 0:
        raise InputError("depth must be positive")
    if allowed is not None and len(allowed) == 0:
        return []
    lists = ranked_lists(store, query, Filter(), depth, allowed)
    used = [(LIST_NAMES[i], lists[i]) for i in MATCHES[match]]
    fused = rrf([[(t, 0.0) for t in lst] for _, lst in used], store.params.rrf_k)
    holders: dict[int, list[str]] = {}
    for name, lst in used:
        for t in lst:
            holders.setdefault(t, []).append(name)
    order = sorted(fused, key=lambda t: (-fused[t], t))
    return [Hit(t, fused[t], tuple(holders[t])) for t in order]
