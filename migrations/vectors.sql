-- localmem vector tables: a template, applied at run time, not by migrate().
-- A vector's size is the embedder's dimension, which is recorded in meta (embedder_id,
-- embedder_dim) when a store is first opened with one. So these tables are not made by
-- a numbered migration: localmem.storage.db.create_vector_tables() substitutes {dim}
-- and {bytes} (4 * dim) and runs this file in the transaction that records the embedder,
-- and reindex drops and remakes them with the new embedder's dimension. The delete
-- triggers on turns and cues are static: migrations 0007 and 0010.
-- This file is the only definition of these tables; the schema snapshot test
-- (tests/data/schema.sql) covers them as made for a 64-d embedder.
--
-- turn_vec / cue_vec hold each row's float32 unit vector ({dim} floats), one row per
-- vector in a plain rowid table, so the exact vectors of a query's shortlist are point
-- reads (migration 0010 moved them out of sqlite-vec's vec0 tables, whose chunked
-- storage made a point read walk a 1.5 MB overflow chain: 0.3-2.7 ms each at 100k
-- turns, against ~15 us here).
-- turn_codes / cue_codes hold each vector's sign bits (vec_quantize_binary, bit i of
-- byte i/8 = dimension i > 0) together with exactly what the in-memory mirrors keep
-- per row (localmem/storage/vectors.py), so a process loads its mirrors with one narrow
-- scan of these tables. Triggers on the vector tables keep them in step: a code row
-- exists exactly when its vector does.

CREATE TABLE turn_vec (
    turn_id   INTEGER PRIMARY KEY,
    embedding BLOB NOT NULL CHECK (length(embedding) = {bytes})
) STRICT;

CREATE TABLE cue_vec (
    cue_id    INTEGER PRIMARY KEY,
    embedding BLOB NOT NULL CHECK (length(embedding) = {bytes})
) STRICT;

CREATE TABLE turn_codes (
    turn_id    INTEGER PRIMARY KEY,
    session_id INTEGER NOT NULL,
    ord        INTEGER NOT NULL,
    words      INTEGER NOT NULL,
    speaker    TEXT NOT NULL,
    ts         INTEGER,                       -- unixepoch(turns.ts); NULL when undated
    code       BLOB NOT NULL
) STRICT;

CREATE TABLE cue_codes (
    cue_id    INTEGER PRIMARY KEY,
    turn_id   INTEGER NOT NULL,
    statement INTEGER NOT NULL,               -- 1 for a statement cue (model-free)
    code      BLOB NOT NULL
) STRICT;

CREATE TRIGGER turn_vec_code AFTER INSERT ON turn_vec BEGIN
    INSERT OR REPLACE INTO turn_codes(turn_id, session_id, ord, words, speaker, ts, code)
    SELECT t.id, t.session_id, t.ord, t.words, t.speaker, unixepoch(t.ts), vec_quantize_binary(new.embedding)
    FROM turns t WHERE t.id = new.turn_id;
END;

CREATE TRIGGER turn_vec_recode AFTER UPDATE ON turn_vec BEGIN
    INSERT OR REPLACE INTO turn_codes(turn_id, session_id, ord, words, speaker, ts, code)
    SELECT t.id, t.session_id, t.ord, t.words, t.speaker, unixepoch(t.ts), vec_quantize_binary(new.embedding)
    FROM turns t WHERE t.id = new.turn_id;
END;

CREATE TRIGGER turn_vec_uncode AFTER DELETE ON turn_vec BEGIN
    DELETE FROM turn_codes WHERE turn_id = old.turn_id;
END;

CREATE TRIGGER cue_vec_code AFTER INSERT ON cue_vec BEGIN
    INSERT OR REPLACE INTO cue_codes(cue_id, turn_id, statement, code)
    SELECT c.id, c.turn_id, c.kind = 'statement', vec_quantize_binary(new.embedding)
    FROM cues c WHERE c.id = new.cue_id;
END;

CREATE TRIGGER cue_vec_recode AFTER UPDATE ON cue_vec BEGIN
    INSERT OR REPLACE INTO cue_codes(cue_id, turn_id, statement, code)
    SELECT c.id, c.turn_id, c.kind = 'statement', vec_quantize_binary(new.embedding)
    FROM cues c WHERE c.id = new.cue_id;
END;

CREATE TRIGGER cue_vec_uncode AFTER DELETE ON cue_vec BEGIN
    DELETE FROM cue_codes WHERE cue_id = old.cue_id;
END;
