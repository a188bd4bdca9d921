"""storage.write: the write path and the one door for changes to the facts.

``store`` (the Store: write, forget, reindex, the embedder binding), ``prepare`` (a turn
checked, hashed, split into statement cues), ``vectorize`` (what is embedded for a turn),
``pipeline`` (batch k+1 embedded while batch k commits), ``changes`` (the door: every change
to the facts and its journal row, in the caller's transaction), ``graph`` (temporal and
semantic edges, derived in the same transaction), ``forgets`` (the forget set),
``jobs`` (``enqueue``: the one insert into the job queue, here so that the write path can
queue a turn's extraction in its own transaction; ``layers.queue`` runs the queue),
``rows`` (a new turn's rows), ``rewrite`` (a turn's text rewritten in place: the new turn
written, the old forgotten, one transaction), used by ``redact`` (a span, from the web
view) and ``redaction`` (``localmem redact --scan``), ``sessions`` (a session as the door
journals it) and ``injections`` (what the hooks injected).

Imports ``storage.engine`` and ``storage.vectors``; never ``layers``, ``reads``, ``sync``,
``copies`` or ``bench``.
"""
