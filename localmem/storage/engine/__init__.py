"""storage.engine: connections and migrations (``db``), SQLite's errors as named localmem
errors (``faults``), waiting out another process's lock (``retry``), the store's
encryption key and every key file (``keys``), whether Litestream checkpoints the WAL
(``checkpoints``), IN lists of bound values (``inlist``) and the copy an encrypt or decrypt
builds beside a store (``partials``: removed by the next open when its conversion died) and
giving free pages back to the disk (``compact``).

The bottom room: imports nothing else of storage. Anything in localmem at or above the
storage layer may import it.
"""
