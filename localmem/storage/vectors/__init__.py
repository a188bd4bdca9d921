"""storage.vectors: the stored vectors (``stored``: exact vectors by id, sign codes), the
in-memory mirrors of their codes per table (``table_mirror``) and per connection, both
refreshed in one snapshot (``mirrors``), a mirror saved inside the store for the next
process to start from (``snapshots``), Hamming shortlists (``hamming``), and the embedder
record with a second set of vector tables built beside the live one and switched to
(``rebuild``, for ``localmem reembed``).

Imports only ``storage.engine``. Used by the write path (semantic edges), the read path
(``localmem.retrieval``), the toolkit, enrichment and the benches.
"""
