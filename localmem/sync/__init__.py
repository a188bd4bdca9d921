"""Sync through a folder that a sync tool carries (Syncthing, a cloud drive, an rclone
mount): each device appends its changes to ``DIR/<device-id>/`` as immutable, checksummed
segments and folds every other device's (see docs/sync.md).

Modules: ``hlc`` (the hybrid logical clock), ``keys`` (age encryption via pyrage),
``segment`` (the file format: bytes in, bytes out), ``folder`` (the transport: the one
piece that lists, reads and writes the folder), ``export``, ``apply`` (the merge rules),
``fold``, ``run`` (a pass, the watch loop, status). It opens no transaction: each write
is one call into ``storage/sync/folding`` or ``storage/sync/exporting``, which own theirs
(SQL in ``storage/sync/state`` and ``log``); every change to the facts goes through
``storage/write/changes``.
"""
