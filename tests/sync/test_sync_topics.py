"""A topic folded in from another device keeps the time it was updated there (issue 36:
it arrived with none, so every synced topic sorted last)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from localmem.storage.engine import db
from localmem.storage.write import changes as door
from localmem.storage.write.store import Store
from tests.helpers.sync import open_device, session, sync


def _topic(store: Store, label: str, updated_at: str) -> str:
    ids = tuple(int(r[0]) for r in store.conn.execute("SELECT id FROM turns ORDER BY id"))
    with db.transaction(store.conn):
        tid = door.put_topic(
            store.conn, door.TopicWrite(None, "session", label, "", updated_at, add_turns=ids), "model-x"
        )
    return str(store.conn.one("SELECT key FROM topics WHERE id = ?", (tid,))[0])


def _updated(store: Store) -> dict[str, str]:
    return {str(r[0]): str(r[1]) for r in store.conn.execute("SELECT label, updated_at FROM topics")}


def test_a_synced_topic_keeps_its_update_time(tmp_path: Path) -> None:
    root = tmp_path / "folder"
    root.mkdir()
    a, b = open_device(tmp_path / "a.db"), open_device(tmp_path / "b.db")
    a.write(session("trip", "We booked the train to Lyon.", "Ana loves the old town."))
    _topic(a, "older trip", "2024-03-01T10:00:00.000")
    _topic(a, "newer trip", "2024-06-01T10:00:00.000")
    sync(a, root)
    sync(b, root)
    assert (
        _updated(b)
        == _updated(a)
        == {
            "older trip": "2024-03-01T10:00:00.000",
            "newer trip": "2024-06-01T10:00:00.000",
        }
    )
    newest = b.conn.one("SELECT label FROM topics ORDER BY updated_at DESC LIMIT 1")[0]
    assert newest == "newer trip"


def test_a_topic_journaled_without_its_time_takes_the_time_of_the_change(tmp_path: Path) -> None:
    """A journal row written before the time was carried: the change's own time."""
    root = tmp_path / "folder"
    root.mkdir()
    a, b = open_device(tmp_path / "a.db"), open_device(tmp_path / "b.db")
    a.write(session("trip", "We booked the train to Lyon."))
    key = _topic(a, "trip", "2024-03-01T10:00:00.000")
    a.conn.execute("UPDATE changes SET data = json_remove(data, '$.updated_at') WHERE kind = 'topic'")
    at = float(a.conn.one("SELECT at FROM changes WHERE kind = 'topic' AND key = ?", (key,))[0])
    sync(a, root)
    sync(b, root)
    want = datetime.fromtimestamp(at, UTC).replace(tzinfo=None).isoformat(timespec="milliseconds")
    assert _updated(b) == {"trip": want}
