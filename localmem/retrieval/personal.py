"""What a person said about themselves elsewhere that bears on a project: the one part of
memory from outside a project that a session start in it may inject.

A session start in a project has no question to answer, so it cannot use the prompt's
bar on a question; it asks with what the project says about itself (``util.projectinfo``:
its name, README head, manifests) and keeps a turn only when all of these hold:
- it is from a session outside the project, spoken by a person (not an agent:
  ``scope.AGENT_SPEAKERS``) about themselves (``scope.about_themselves``: "I prefer pnpm
  on all my machines", not "Which database should we use?");
- its session ran in a project too (a coding agent's session, which has a working folder
  or repository): what a person said while working. Chat exports (personal talk with an
  assistant or a friend, a LoCoMo conversation) have no project and are never injected
  unasked; a prompt that clears its bar still finds them;
- its cosine to the project's words is at least ``bar`` (``STATEMENT_BAR``), the words
  are more than the folder's name, and the turn is among the read's own choice within
  ``budget``.

Invariants: no model call besides the embedder's; reads only (one snapshot per
``reconstruct``, then the rows of the few turns kept); the same store and folder give the
same turns.
"""

from __future__ import annotations

import numpy as np

from localmem.records import EvidenceTurn, ProjectScope
from localmem.retrieval.reconstruct import reconstruct
from localmem.retrieval.scope import AGENT_SPEAKERS, about_themselves
from localmem.storage.reads import queries, views
from localmem.storage.write.store import Store
from localmem.util.projectinfo import About
from localmem.util.text import sentence_spans

# The cosine a statement needs to the project's words (on the default embedder's scale; ``localmem
# bench session-start`` measures what it lets through on 10k unrelated turns).
STATEMENT_BAR = 0.3
SENTENCES = 8  # of a turn, compared on their own (``cosines``)


def bearing(
    store: Store,
    project: ProjectScope,
    about: About,
    budget: int,
    exclude_session: str | None = None,
    bar: float = STATEMENT_BAR,
) -> list[tuple[EvidenceTurn, float]]:
    """The person's statements elsewhere that bear on ``project`` (module docstring), with
    their cosine to its words, in the read's order; [] when the folder says nothing but
    its name."""
    if not about.says_more_than_its_name or budget <= 0:
        return []
    ctx = reconstruct(store, about.words, budget, scope=project, exclude_session=exclude_session)
    inside = set(queries.project_sessions(store.conn, project))
    picked = [
        t
        for t in ctx.turns
        if t.session_id not in inside
        and t.speaker.strip().lower() not in AGENT_SPEAKERS
        and about_themselves(t.text)
        and _worked_in_a_project(store, t.session_id)
    ]
    if not picked:
        return []
    near = cosines(store, about.words, [t.text for t in picked])
    return [(t, c) for t, c in zip(picked, near, strict=True) if c >= bar]


def cosines(store: Store, query: str, texts: list[str]) -> list[float]:
    """The cosine to ``query`` of each of ``texts``, as a read measures its best hit
    (``best_cosine``): of the whole text or of its best sentence (its first
    ``SENTENCES``), with the store's embedder."""
    if not texts:
        return []
    pieces: list[str] = []
    owner: list[int] = []
    for i, text in enumerate(texts):
        parts = [text, *(text[a:b] for a, b in sentence_spans(text)[:SENTENCES])]
        pieces += parts
        owner += [i] * len(parts)
    vecs = store.embedder.embed([query, *pieces])
    sims = np.asarray(vecs[1:] @ vecs[0], dtype=np.float64)
    best = [-1.0] * len(texts)
    for i, c in zip(owner, sims, strict=True):
        best[i] = max(best[i], float(c))
    return best


def _worked_in_a_project(store: Store, session_id: int) -> bool:
    head = views.session_head(store.conn, session_id)
    return head is not None and bool(head.cwd or head.repository)
