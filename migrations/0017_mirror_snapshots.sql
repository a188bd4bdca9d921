-- localmem schema, version 17: the in-memory vector mirrors saved inside the store (issue 41).
-- A process that opens a store loads its mirrors of turn_codes / cue_codes (the sign codes
-- and the few columns a query ranks by; localmem/storage/vectors/table_mirror.py). Read row
-- by row that is ~1.7 us a row: 280 ms of a `localmem query` at 100k turns. A snapshot
-- holds one table's mirror arrays as one blob, tagged with the table's mirror_epochs
-- counter (migration 0009) and the newest row id it covers. A process whose counter
-- matches takes the snapshot and loads only the rows newer than it, which gives the same
-- arrays as a full load (localmem/storage/vectors/snapshots.py): the counter moves with
-- every delete or update of a mirrored row and every embedder change, and otherwise new
-- rows only ever get ids above the newest.
-- A snapshot is derived data: never journaled, not synced, rebuilt by any reader. It lives
-- in the store, so an encrypted store's snapshot is encrypted with it, and the trigger
-- below deletes a table's snapshot in the transaction that moves its counter: no live row
-- keeps the codes of a forgotten turn or cue (their free pages, as the forgotten text's,
-- last until the file is rebuilt: VACUUM).

CREATE TABLE mirror_snapshots (
    mirror TEXT PRIMARY KEY CHECK (mirror IN ('turns', 'cues')),
    epoch  INTEGER NOT NULL,  -- mirror_epochs.turns or .cues when it was written
    newest INTEGER NOT NULL,  -- the newest row id it holds
    header TEXT NOT NULL,     -- JSON: format, dim, rows, each array's name, dtype, shape, offset; speaker names
    data   BLOB NOT NULL      -- the arrays' bytes, at the header's offsets
) STRICT;

CREATE TRIGGER mirror_snapshots_expire AFTER UPDATE OF turns, cues ON mirror_epochs BEGIN
    DELETE FROM mirror_snapshots
    WHERE (mirror = 'turns' AND new.turns IS NOT old.turns)
       OR (mirror = 'cues' AND new.cues IS NOT old.cues);
END;
