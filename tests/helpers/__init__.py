"""What several test modules share (a test module never imports another; tests/test_layout.py
checks it): ``fakes`` (the model stand-ins and scripts), ``cli`` (the real command in a
subprocess), ``busy`` (another process holding the write lock), ``benchdata`` (small LoCoMo
and LongMemEval documents), ``cable`` (CABLE's fakes and story), ``themes`` (recurring
sessions and a concept embedder), ``replica`` (Litestream), ``servers`` (the MCP server as a
process), ``devices``, ``sync`` and ``sync_worker`` (sync), ``files`` (the filesystem)."""
