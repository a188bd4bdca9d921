-- localmem schema, version 12: sync through a folder (localmem/sync/, storage/sync_state.py).
-- This device's identity and export position, what it folded from each other device,
-- what it refused, derived changes waiting for their turn, and the forget set.

CREATE TABLE sync_device (
    id           INTEGER PRIMARY KEY CHECK (id = 1),
    device       TEXT NOT NULL,               -- this store's device id, given on first sync
    next_segment INTEGER NOT NULL DEFAULT 1,  -- number of the next segment it writes
    exported_seq INTEGER NOT NULL DEFAULT 0,  -- changes.seq of the newest change exported
    hlc          INTEGER NOT NULL DEFAULT 0   -- newest hybrid-clock stamp given out or seen
) STRICT;

-- One row per segment file folded (a sync tool's conflict copy with other bytes is a row
-- of its own): folding it again is skipped, and status reports lag from these.
CREATE TABLE sync_folded (
    device    TEXT NOT NULL,
    segment   INTEGER NOT NULL,
    sha256    TEXT NOT NULL,                  -- of the whole file
    name      TEXT NOT NULL,
    changes   INTEGER NOT NULL,
    bytes     INTEGER NOT NULL,
    hlc_hi    INTEGER NOT NULL,
    folded_at REAL NOT NULL,
    PRIMARY KEY (device, segment, sha256)
) STRICT;

-- Segments not folded, with the reason (refused: checksum, version, key; or incomplete:
-- still arriving). Looked at again on every sync; a row goes once its file folds.
CREATE TABLE sync_refused (
    device     TEXT NOT NULL,
    name       TEXT NOT NULL,
    reason     TEXT NOT NULL,
    incomplete INTEGER NOT NULL DEFAULT 0,
    at         REAL NOT NULL,
    PRIMARY KEY (device, name)
) STRICT;

-- A model-derived change whose turn has not been folded yet (it came from a device other
-- than the turn's): kept here and applied when the turn arrives, dropped if it is forgotten.
CREATE TABLE sync_pending (
    id     INTEGER PRIMARY KEY,
    device TEXT NOT NULL,
    turn   TEXT NOT NULL,                     -- the turn hash it waits for
    change TEXT NOT NULL,                     -- the change as the segment held it (JSON)
    UNIQUE (device, change)
) STRICT;
CREATE INDEX sync_pending_turn ON sync_pending (turn);

-- Topics merge last-writer-wins by hybrid clock: the stamp of the change applied last.
CREATE TABLE sync_topics (
    key TEXT PRIMARY KEY,
    hlc INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

-- The forget set: every turn hash ever forgotten here or on a device folded. Forget wins:
-- the write path does not store a turn whose hash is here, so an old export ingested
-- again or a late segment does not bring a forgotten turn back.
CREATE TABLE forgotten (
    hash TEXT PRIMARY KEY,
    at   REAL NOT NULL
) STRICT, WITHOUT ROWID;

CREATE TRIGGER turns_forgotten AFTER DELETE ON turns BEGIN
    INSERT OR IGNORE INTO forgotten(hash, at) VALUES (old.hash, unixepoch('subsec'));
END;

INSERT OR IGNORE INTO forgotten(hash, at) SELECT key, at FROM changes WHERE kind = 'forget';
