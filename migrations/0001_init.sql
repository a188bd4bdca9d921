-- localmem schema, version 1.
-- Turns are the evidence and are never rewritten; everything else points at them and
-- is removed with them (ON DELETE CASCADE, plus triggers for the FTS and vec0 tables,
-- which foreign keys cannot reach). vec0 tables are created when a store first meets
-- its embedder, since their dimension is the embedder's (see localmem/store.py).

CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) STRICT;

CREATE TABLE sessions (
    id         INTEGER PRIMARY KEY,
    source     TEXT NOT NULL,              -- where it came from: a file name, "mcp", "api"
    key        TEXT NOT NULL,              -- the source's own id for the session
    title      TEXT NOT NULL DEFAULT '',
    started_at TEXT,                       -- naive ISO-8601, the source's clock
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%S', 'now')),
    UNIQUE (source, key)
) STRICT;

CREATE TABLE turns (
    id         INTEGER PRIMARY KEY,
    session_id INTEGER NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    ord        INTEGER NOT NULL,           -- order within the session
    speaker    TEXT NOT NULL DEFAULT '',
    role       TEXT NOT NULL DEFAULT 'user',
    text       TEXT NOT NULL,
    ts         TEXT,                       -- naive ISO-8601
    source_id  TEXT,                       -- the source's native turn id, e.g. LoCoMo "D3:5"
    hash       TEXT NOT NULL UNIQUE,       -- sha256 of session identity + speaker + text + native id
    words      INTEGER NOT NULL,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%S', 'now')),
    UNIQUE (session_id, ord)
) STRICT;
CREATE INDEX turns_ts ON turns (ts);
CREATE INDEX turns_source_id ON turns (source_id);

CREATE TABLE cues (
    id         INTEGER PRIMARY KEY,
    turn_id    INTEGER NOT NULL REFERENCES turns (id) ON DELETE CASCADE,
    kind       TEXT NOT NULL CHECK (kind IN ('statement', 'triple', 'keyword', 'fact')),
    text       TEXT NOT NULL,
    subject    TEXT,
    relation   TEXT,
    object     TEXT,
    span_start INTEGER NOT NULL,           -- character span of the source turn it rests on
    span_end   INTEGER NOT NULL,
    extractor  TEXT NOT NULL DEFAULT 'split',
    UNIQUE (turn_id, kind, text)
) STRICT;
CREATE INDEX cues_turn ON cues (turn_id);

CREATE TABLE tags (
    id   INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE
) STRICT;

CREATE TABLE cue_tags (
    cue_id  INTEGER NOT NULL REFERENCES cues (id) ON DELETE CASCADE,
    tag_id  INTEGER NOT NULL REFERENCES tags (id) ON DELETE CASCADE,
    turn_id INTEGER NOT NULL REFERENCES turns (id) ON DELETE CASCADE,
    PRIMARY KEY (cue_id, tag_id, turn_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX cue_tags_tag ON cue_tags (tag_id);
CREATE INDEX cue_tags_turn ON cue_tags (turn_id);

CREATE TABLE topics (
    id         INTEGER PRIMARY KEY,
    label      TEXT NOT NULL,
    summary    TEXT NOT NULL DEFAULT '',
    updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%S', 'now'))
) STRICT;

CREATE TABLE topic_turns (
    topic_id INTEGER NOT NULL REFERENCES topics (id) ON DELETE CASCADE,
    turn_id  INTEGER NOT NULL REFERENCES turns (id) ON DELETE CASCADE,
    PRIMARY KEY (topic_id, turn_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX topic_turns_turn ON topic_turns (turn_id);

CREATE TABLE edges (
    src        INTEGER NOT NULL REFERENCES turns (id) ON DELETE CASCADE,
    dst        INTEGER NOT NULL REFERENCES turns (id) ON DELETE CASCADE,
    kind       TEXT NOT NULL CHECK (kind IN ('temporal', 'semantic', 'antecedent')),
    weight     REAL NOT NULL DEFAULT 1.0,
    reason     TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%S', 'now')),
    PRIMARY KEY (src, dst, kind),
    CHECK (src != dst)
) STRICT, WITHOUT ROWID;
CREATE INDEX edges_dst ON edges (dst, kind);

CREATE TABLE jobs (
    id         INTEGER PRIMARY KEY,
    kind       TEXT NOT NULL,
    turn_id    INTEGER REFERENCES turns (id) ON DELETE CASCADE,
    state      TEXT NOT NULL DEFAULT 'pending'
               CHECK (state IN ('pending', 'running', 'done', 'parked')),
    attempts   INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    not_before TEXT,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%S', 'now')),
    updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%S', 'now')),
    UNIQUE (kind, turn_id)
) STRICT;
CREATE INDEX jobs_state ON jobs (state, kind);

-- Lexical index. Contentless (the text lives in turns/cues); rowid = turns.id / cues.id.
CREATE VIRTUAL TABLE turns_fts USING fts5 (
    doc, content = '', contentless_delete = 1, tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE VIRTUAL TABLE cues_fts USING fts5 (
    doc, content = '', contentless_delete = 1, tokenize = 'porter unicode61 remove_diacritics 2'
);

CREATE TRIGGER turns_fts_delete AFTER DELETE ON turns BEGIN
    DELETE FROM turns_fts WHERE rowid = old.id;
END;
CREATE TRIGGER cues_fts_delete AFTER DELETE ON cues BEGIN
    DELETE FROM cues_fts WHERE rowid = old.id;
END;
