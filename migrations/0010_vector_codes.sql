-- localmem schema, version 10: vectors that scale (issue 15).
-- The vector tables (template migrations/vectors.sql, made when a store is bound to an
-- embedder) become plain rowid tables, and each gets a code table: the vector's sign
-- bits plus what the in-memory mirrors keep per row, so each process holds ~50-100
-- bytes per vector instead of a float32 copy (localmem/storage/vectors.py). A store
-- bound before this version has vec0 tables: the same transaction that applies this
-- file copies their vectors into the new tables (localmem.storage.db, after_migration),
-- which fills the code tables by their triggers.
-- These triggers keep a code row's copy of its turn's or cue's columns in step when
-- those change (migration 0009 makes the mirrors reload then). Their bodies name the
-- code tables, which SQLite resolves only when they fire; only a bound store has turns.

CREATE TRIGGER turns_codes_update AFTER UPDATE OF session_id, ord, speaker, ts, words ON turns BEGIN
    UPDATE turn_codes SET session_id = new.session_id, ord = new.ord, words = new.words,
        speaker = new.speaker, ts = unixepoch(new.ts)
    WHERE turn_id = new.id;
END;

CREATE TRIGGER cues_codes_update AFTER UPDATE OF turn_id, kind ON cues BEGIN
    UPDATE cue_codes SET turn_id = new.turn_id, statement = new.kind = 'statement' WHERE cue_id = new.id;
END;
