"""Sync devices in tests: ``a_dev`` is the device id a store syncs as."""

from __future__ import annotations

from localmem.storage.write.store import Store


def a_dev(store: Store) -> str:
    return str(store.conn.one("SELECT device FROM sync_device")[0])
