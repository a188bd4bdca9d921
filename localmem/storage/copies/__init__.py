"""storage.copies: copies of a store and their keys: the online backup (``backup``),
converting a store between plaintext and encrypted in place (``convert``), age-encrypted
exports and backups (``age``), Litestream replicas and encrypted snapshots (``replica``)
and restoring any of them (``restore``).

Imports only ``storage.engine``. Used by the CLI and the benches.
"""
