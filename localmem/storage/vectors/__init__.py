"""storage.vectors: the stored vectors (``stored``: exact vectors by id, sign codes), the
in-memory mirrors of their codes per table (``table_mirror``) and per connection, both
refreshed in one snapshot (``mirrors``), and Hamming shortlists (``hamming``).

Imports only ``storage.engine``. Used by the write path (semantic edges), the read path
(``localmem.retrieval``), the toolkit, enrichment and the benches.
"""
