"""storage.reads: named read-only queries, each module for one reader: ``queries`` (the
read path: FTS5 rankings, turn rows, edges), ``traversal`` and ``topic_reads`` (the
traversal toolkit), ``views`` (the web view, doctor and stats), ``export_rows``
(``localmem export``) and ``ingest_files`` (where a file's ingest stopped: the one
writer here, its own small table, outside the journal); ``opencode_db`` reads another
program's database, OpenCode's, read-only (``localmem.ingest.opencode``).

Imports only ``storage.engine``; never ``write`` or ``layers`` (a read does not change
the facts). Returns named records; the caller holds the snapshot.
"""
