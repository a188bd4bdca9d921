"""storage.engine: connections and migrations (``db``), SQLite's errors as named localmem
errors (``faults``), waiting out another process's lock (``retry``), the store's
encryption key (``keys``), whether Litestream checkpoints the WAL (``checkpoints``) and
IN lists of bound values (``inlist``).

The bottom room: imports nothing else of storage. Anything in localmem at or above the
storage layer may import it.
"""
