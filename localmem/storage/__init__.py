"""The SQLite file, and the only package that speaks SQL.

Its rooms, each a sub-package that says what it owns and who may import it (the import
contracts in pyproject.toml keep them true; docs/architecture.md lists every module):

- ``engine``  connections, migrations, SQLite's faults in words, waiting out a busy store,
  the store's key, IN lists; imports nothing of storage.
- ``vectors`` the vector tables and their in-memory code mirrors, Hamming shortlists.
- ``reads``   named read-only queries for the read path, the toolkit, the web view, export
  and ingest state; never imports ``write``.
- ``write``   the write path (turns, statement cues, vectors, FTS, temporal and semantic
  edges), the one door for changes to the facts (``write.changes``) and the forget set.
- ``layers``  the model-derived layers' tables: extracted cues, antecedent edges and pair
  links, topics, the job queue, the model-call log.
- ``sync``    sync's bookkeeping (this device, folded and refused segments); only
  ``localmem.sync`` imports it.
- ``copies``  copies of a store: online backup, encrypt/decrypt in place, age files,
  Litestream replicas and restore.
- ``bench``   bench-only bulk writes and counts; only ``localmem.bench`` imports it.

Knows nothing of how context is reconstructed or how turns are enriched; the layers
above call into it (util <- models <- storage <- retrieval <- ...).
"""
