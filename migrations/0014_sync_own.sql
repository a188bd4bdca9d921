-- localmem schema, version 14: the segments this device wrote, so a key change or a forget
-- rewrites exactly the ones that must change (localmem/sync/rewrite.py, docs/sync.md).

-- One row per segment in this device's folder: the journal rows it holds (made here,
-- changes.seq seq_lo..seq_hi; row s is stamped hlc_lo + s - seq_lo, so a rewrite keeps
-- every stamp), the key epoch and sealing it was written under, and a digest of the rows
-- it holds: when what it would hold now (forgotten turns, their cues, sessions left
-- without turns taken out) has another digest, it is rewritten in place.
CREATE TABLE sync_own (
    segment   INTEGER PRIMARY KEY,
    seq_lo    INTEGER NOT NULL,
    seq_hi    INTEGER NOT NULL,
    hlc_lo    INTEGER NOT NULL,
    key_epoch INTEGER NOT NULL,
    sealed    TEXT NOT NULL CHECK (sealed IN ('plain', 'age')),
    digest    TEXT NOT NULL,
    sha256    TEXT NOT NULL,                  -- of the file as written
    written   REAL NOT NULL
) STRICT;

-- key_epoch / key_check: the keys segments are written under now (a new epoch when they
-- change; key_check tells, without keeping the key, whether a keyring is the same);
-- forget_mark: the size of the forget set when this device last looked for forgotten
-- content in its segments; legacy_through: segments numbered up to it were written before
-- this table (their rows unknown): rewritten once, as new segments, then removed.
ALTER TABLE sync_device ADD COLUMN key_epoch INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sync_device ADD COLUMN key_check BLOB;
ALTER TABLE sync_device ADD COLUMN forget_mark INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sync_device ADD COLUMN legacy_through INTEGER NOT NULL DEFAULT 0;

UPDATE sync_device SET legacy_through = coalesce(
    (SELECT max(segment) FROM sync_folded f WHERE f.device = sync_device.device), 0
);
