-- localmem schema, version 16: a second set of vector tables built beside the live one
-- (`localmem reembed`, issue 39).
-- The live vector tables (turn_vec, cue_vec and their code tables; template
-- migrations/vectors.sql) were written by the embedder that meta records (embedder_id,
-- embedder_dim, and embedder_spec: how to load it again, a registry name or a path).
-- A reembed writes the same tables under the names turn_vec_next, cue_vec_next,
-- turn_codes_next, cue_codes_next (the template, renamed; made at run time since their
-- size is the new embedder's), and this table records which embedder writes them.
-- While a build exists, triggers of its own (named *_next_*) keep the next tables in
-- step with deletes and rewrites of turns and cues, so a forgotten turn's id given out
-- again never carries a stale vector; what the next tables lack is what is left to do,
-- so a killed build resumes where its last batch committed. The switch is one
-- transaction (localmem/storage/vectors/rebuild.py): the live tables are dropped, the
-- next ones renamed into their names, meta records the new embedder, mirror_epochs moves,
-- and this row goes.

CREATE TABLE reembed (
    id          INTEGER PRIMARY KEY CHECK (id = 1),   -- at most one build at a time
    embedder_id TEXT NOT NULL,                        -- the embedder writing the *_next tables
    dim         INTEGER NOT NULL CHECK (dim > 0),
    spec        TEXT,                                 -- how to load it again; NULL: it cannot be named
    started_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%S', 'now'))
) STRICT;
