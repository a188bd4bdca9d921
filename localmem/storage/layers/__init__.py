"""storage.layers: the tables of the model-derived layers and of the work that builds
them: extracted cues and tags (``cues``), antecedent edges and runs (``edges``, and the
model-free verifier's ``pairlinks``), topics and themes (``topics``), the durable job queue
(``queue``), the model-call log (``calls``) and the recall log (``recalls``: what each
reconstruct handed a client).

Each enrichment step hands its results to ONE ``commit_*`` function here, which owns the
transaction and passes facts through the door (``write.changes``). Imports ``write``,
``vectors``, ``reads`` and ``engine``; used by ``localmem.enrichment``, the CLI's and the web view's
counts, and the benches.
"""
