"""storage.write: the write path and the one door for changes to the facts.

``store`` (the Store: write, forget, reindex, the embedder binding), ``prepare`` (a turn
checked, hashed, split into statement cues), ``vectorize`` (what is embedded for a turn),
``pipeline`` (batch k+1 embedded while batch k commits), ``changes`` (the door: every change
to the facts and its journal row, in the caller's transaction), ``graph`` (temporal and
semantic edges, derived in the same transaction), ``forgets`` (the forget set) and
``jobs`` (``enqueue``: the one insert into the job queue, here so that the write path can
queue a turn's extraction in its own transaction; ``layers.queue`` runs the queue).

Imports ``storage.engine`` and ``storage.vectors``; never ``layers``, ``reads``, ``sync``,
``copies`` or ``bench``.
"""
