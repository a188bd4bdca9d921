"""storage.engine: connections and migrations (``db``), SQLite's errors as named localmem
errors (``faults``), waiting out another process's lock (``retry``), the store's
encryption key and every key file (``keys``), whether Litestream checkpoints the WAL
(``checkpoints``), IN lists of bound values (``inlist``) and the copy an encrypt or decrypt
builds beside a store (``partials``: removed by the next open when its conversion died) and
giving free pages back to the disk (``compact``); reading a store's first bytes without
dropping this process's locks (``fileread``), and the check that nothing else does
(``openguard``, installed here when ``$LOCALMEM_OPEN_GUARD`` is set).

The bottom room: imports nothing else of storage. Anything in localmem at or above the
storage layer may import it.
"""

import os as _os

if _os.environ.get("LOCALMEM_OPEN_GUARD"):  # openguard.ENV; off: nothing imported
    from localmem.storage.engine import openguard as _openguard

    _openguard.install()
