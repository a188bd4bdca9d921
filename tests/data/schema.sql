-- index cue_tags_tag on cue_tags
CREATE INDEX cue_tags_tag ON cue_tags (tag_id);

-- index cue_tags_turn on cue_tags
CREATE INDEX cue_tags_turn ON cue_tags (turn_id);

-- index cues_turn on cues
CREATE INDEX cues_turn ON cues (turn_id);

-- index edges_dst on edges
CREATE INDEX edges_dst ON edges (dst, kind);

-- index ingest_files_fingerprint on ingest_files
CREATE INDEX ingest_files_fingerprint ON ingest_files (fingerprint);

-- index jobs_state on jobs
CREATE INDEX jobs_state ON jobs (state, kind);

-- index recall_turns_turn on recall_turns
CREATE INDEX recall_turns_turn ON recall_turns (turn_id);

-- index sessions_cwd on sessions
CREATE INDEX sessions_cwd ON sessions (cwd) WHERE cwd != '';

-- index sessions_repository on sessions
CREATE INDEX sessions_repository ON sessions (repository) WHERE repository != '';

-- index sqlite_autoindex_cues_1 on cues
-- (made by SQLite, no sql)

-- index sqlite_autoindex_ingest_files_1 on ingest_files
-- (made by SQLite, no sql)

-- index sqlite_autoindex_jobs_1 on jobs
-- (made by SQLite, no sql)

-- index sqlite_autoindex_meta_1 on meta
-- (made by SQLite, no sql)

-- index sqlite_autoindex_mirror_snapshots_1 on mirror_snapshots
-- (made by SQLite, no sql)

-- index sqlite_autoindex_sessions_1 on sessions
-- (made by SQLite, no sql)

-- index sqlite_autoindex_sync_folded_1 on sync_folded
-- (made by SQLite, no sql)

-- index sqlite_autoindex_sync_pending_1 on sync_pending
-- (made by SQLite, no sql)

-- index sqlite_autoindex_sync_refused_1 on sync_refused
-- (made by SQLite, no sql)

-- index sqlite_autoindex_tags_1 on tags
-- (made by SQLite, no sql)

-- index sqlite_autoindex_theme_topics_1 on theme_topics
-- (made by SQLite, no sql)

-- index sqlite_autoindex_turns_1 on turns
-- (made by SQLite, no sql)

-- index sqlite_autoindex_turns_2 on turns
-- (made by SQLite, no sql)

-- index sync_pending_turn on sync_pending
CREATE INDEX sync_pending_turn ON sync_pending (turn);

-- index topic_turns_turn on topic_turns
CREATE INDEX topic_turns_turn ON topic_turns (turn_id);

-- index topics_key on topics
CREATE UNIQUE INDEX topics_key ON topics (key);

-- index topics_kind on topics
CREATE INDEX topics_kind ON topics (kind, themed);

-- index turn_enrichment_type on turn_enrichment
CREATE INDEX turn_enrichment_type ON turn_enrichment (memory_type);

-- index turns_source_id on turns
CREATE INDEX turns_source_id ON turns (source_id);

-- index turns_speaker_role on turns
CREATE INDEX turns_speaker_role ON turns (speaker, role);

-- index turns_ts on turns
CREATE INDEX turns_ts ON turns (ts);

-- table antecedent_runs on antecedent_runs
CREATE TABLE antecedent_runs (
    turn_id          INTEGER PRIMARY KEY REFERENCES turns (id) ON DELETE CASCADE,
    memory_type      TEXT,
    skipped          TEXT NOT NULL DEFAULT '',   -- why no search was made, '' when one was
    queries          TEXT NOT NULL DEFAULT '[]', -- JSON list of the antecedent queries
    direct           INTEGER NOT NULL DEFAULT 0, -- |B|: direct neighbours of the new turn
    retrieved        INTEGER NOT NULL DEFAULT 0, -- |H|: union of the per-query results
    candidates       INTEGER NOT NULL DEFAULT 0, -- |C| = |H \ B| (|H| without subtraction)
    accepted         INTEGER NOT NULL DEFAULT 0, -- antecedent edges stored
    calls            INTEGER NOT NULL DEFAULT 0, -- model calls (queries + verification)
    prompt_tokens    INTEGER NOT NULL DEFAULT 0,
    generated_tokens INTEGER NOT NULL DEFAULT 0,
    variant          TEXT NOT NULL DEFAULT '',   -- construction switches in force
    model            TEXT NOT NULL DEFAULT '',
    created_at       TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%S', 'now'))
) STRICT;

-- table changes on changes
CREATE TABLE changes (
    seq    INTEGER PRIMARY KEY AUTOINCREMENT,
    kind   TEXT NOT NULL,
    key    TEXT NOT NULL,
    model  TEXT,
    origin TEXT,
    data   TEXT,
    at     REAL NOT NULL
) STRICT;

-- table cue_codes on cue_codes
CREATE TABLE cue_codes (
    cue_id    INTEGER PRIMARY KEY,
    turn_id   INTEGER NOT NULL,
    statement INTEGER NOT NULL,               -- 1 for a statement cue (model-free)
    code      BLOB NOT NULL
) STRICT;

-- table cue_tags on cue_tags
CREATE TABLE cue_tags (
    cue_id  INTEGER NOT NULL REFERENCES cues (id) ON DELETE CASCADE,
    tag_id  INTEGER NOT NULL REFERENCES tags (id) ON DELETE CASCADE,
    turn_id INTEGER NOT NULL REFERENCES turns (id) ON DELETE CASCADE,
    PRIMARY KEY (cue_id, tag_id, turn_id)
) STRICT, WITHOUT ROWID;

-- table cue_vec on cue_vec
CREATE TABLE cue_vec (
    cue_id    INTEGER PRIMARY KEY,
    embedding BLOB NOT NULL CHECK (length(embedding) = 256)
) STRICT;

-- table cues on cues
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

-- table cues_fts on cues_fts
CREATE VIRTUAL TABLE cues_fts USING fts5 (
    doc, content = '', contentless_delete = 1, tokenize = 'porter unicode61 remove_diacritics 2'
);

-- table cues_fts_config on cues_fts_config
CREATE TABLE 'cues_fts_config'(k PRIMARY KEY, v) WITHOUT ROWID;

-- table cues_fts_data on cues_fts_data
CREATE TABLE 'cues_fts_data'(id INTEGER PRIMARY KEY, block BLOB);

-- table cues_fts_docsize on cues_fts_docsize
CREATE TABLE 'cues_fts_docsize'(id INTEGER PRIMARY KEY, sz BLOB, origin INTEGER);

-- table cues_fts_idx on cues_fts_idx
CREATE TABLE 'cues_fts_idx'(segid, term, pgno, PRIMARY KEY(segid, term)) WITHOUT ROWID;

-- table edges on edges
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

-- table extracted_cues_fts on extracted_cues_fts
CREATE VIRTUAL TABLE extracted_cues_fts USING fts5 (
    doc, content = '', contentless_delete = 1, tokenize = 'porter unicode61 remove_diacritics 2'
);

-- table extracted_cues_fts_config on extracted_cues_fts_config
CREATE TABLE 'extracted_cues_fts_config'(k PRIMARY KEY, v) WITHOUT ROWID;

-- table extracted_cues_fts_data on extracted_cues_fts_data
CREATE TABLE 'extracted_cues_fts_data'(id INTEGER PRIMARY KEY, block BLOB);

-- table extracted_cues_fts_docsize on extracted_cues_fts_docsize
CREATE TABLE 'extracted_cues_fts_docsize'(id INTEGER PRIMARY KEY, sz BLOB, origin INTEGER);

-- table extracted_cues_fts_idx on extracted_cues_fts_idx
CREATE TABLE 'extracted_cues_fts_idx'(segid, term, pgno, PRIMARY KEY(segid, term)) WITHOUT ROWID;

-- table forgotten on forgotten
CREATE TABLE forgotten (
    hash TEXT PRIMARY KEY,
    at   REAL NOT NULL
) STRICT, WITHOUT ROWID;

-- table ingest_files on ingest_files
CREATE TABLE ingest_files (
    id            INTEGER PRIMARY KEY,
    path          TEXT NOT NULL,              -- absolute path where the file was last seen
    format        TEXT NOT NULL,
    options       TEXT NOT NULL DEFAULT '',   -- e.g. 'sample=conv-26'
    size          INTEGER NOT NULL,           -- bytes when last read
    mtime_ns      INTEGER NOT NULL,
    fingerprint   TEXT NOT NULL,              -- sha256 of size + first and last 64 KiB
    resume_offset INTEGER NOT NULL DEFAULT 0, -- byte offset just after the last stored unit
    resume_unit   INTEGER NOT NULL DEFAULT 0, -- units before that offset
    resume_line   INTEGER NOT NULL DEFAULT 1, -- line number at that offset
    prefix_hash   TEXT NOT NULL DEFAULT '',   -- sha256 of the 64 KiB at the start and before the offset
    complete      INTEGER NOT NULL DEFAULT 0, -- 1 once the file was read to its end
    updated_at    TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%S', 'now')),
    UNIQUE (path, format, options)
) STRICT;

-- table injected on injected
CREATE TABLE injected (
    hash    TEXT PRIMARY KEY,  -- content_hash('injected', the line with whitespace collapsed)
    turn_id INTEGER NOT NULL,  -- the recalled turn the line quoted
    at      REAL NOT NULL      -- unix seconds of the last injection
) STRICT, WITHOUT ROWID;

-- table jobs on jobs
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
    updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%S', 'now')), locked_by TEXT, locked_until TEXT,
    UNIQUE (kind, turn_id)
) STRICT;

-- table meta on meta
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) STRICT;

-- table mirror_epochs on mirror_epochs
CREATE TABLE mirror_epochs (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    turns INTEGER NOT NULL DEFAULT 0,
    cues  INTEGER NOT NULL DEFAULT 0
) STRICT;

-- table mirror_snapshots on mirror_snapshots
CREATE TABLE mirror_snapshots (
    mirror TEXT PRIMARY KEY CHECK (mirror IN ('turns', 'cues')),
    epoch  INTEGER NOT NULL,  -- mirror_epochs.turns or .cues when it was written
    newest INTEGER NOT NULL,  -- the newest row id it holds
    header TEXT NOT NULL,     -- JSON: format, dim, rows, each array's name, dtype, shape, offset; speaker names
    data   BLOB NOT NULL      -- the arrays' bytes, at the header's offsets
) STRICT;

-- table model_call_totals on model_call_totals
CREATE TABLE model_call_totals (
    purpose          TEXT PRIMARY KEY,
    parsed           INTEGER NOT NULL DEFAULT 0,
    unparsed         INTEGER NOT NULL DEFAULT 0,
    prompt_tokens    INTEGER NOT NULL DEFAULT 0,
    generated_tokens INTEGER NOT NULL DEFAULT 0
) STRICT, WITHOUT ROWID;

-- table model_calls on model_calls
CREATE TABLE model_calls (
    id               INTEGER PRIMARY KEY,
    at               TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%S', 'now')),
    purpose          TEXT NOT NULL,
    model            TEXT NOT NULL,
    prompt_hash      TEXT NOT NULL,      -- sha256 of the messages, canonical JSON
    reply            TEXT NOT NULL,      -- the reply's first 4,000 characters
    reply_chars      INTEGER NOT NULL,   -- its full length
    status           TEXT NOT NULL,      -- 'ok' or the parse failure
    prompt_tokens    INTEGER NOT NULL DEFAULT 0,
    generated_tokens INTEGER NOT NULL DEFAULT 0
) STRICT;

-- table recall_calls on recall_calls
CREATE TABLE recall_calls (
    id      INTEGER PRIMARY KEY,
    at      TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%S', 'now')),  -- UTC
    client  TEXT NOT NULL,     -- 'mcp:<client name>', 'cli', 'hook:<agent>'
    tool    TEXT NOT NULL,     -- reconstruct / answer / query / the hook's event
    session TEXT,              -- the client's own session id, when it gives one
    project TEXT,              -- the client's project (a working directory), when it gives one
    query   TEXT NOT NULL,     -- secrets replaced by placeholders (util/secrets.py)
    budget  INTEGER NOT NULL,
    as_of   TEXT,
    scope   TEXT,
    tokens  INTEGER NOT NULL,
    turns   INTEGER NOT NULL   -- turns handed, counted when written
) STRICT;

-- table recall_turns on recall_turns
CREATE TABLE recall_turns (
    call_id INTEGER NOT NULL REFERENCES recall_calls (id) ON DELETE CASCADE,
    turn_id INTEGER NOT NULL REFERENCES turns (id) ON DELETE CASCADE,
    place   INTEGER NOT NULL,  -- 1-based, in the order of the context handed
    reason  TEXT NOT NULL,     -- anchor / temporal / semantic / extracted / antecedent
    score   REAL NOT NULL,
    why     TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (call_id, turn_id)
) STRICT, WITHOUT ROWID;

-- table reembed on reembed
CREATE TABLE reembed (
    id          INTEGER PRIMARY KEY CHECK (id = 1),   -- at most one build at a time
    embedder_id TEXT NOT NULL,                        -- the embedder writing the *_next tables
    dim         INTEGER NOT NULL CHECK (dim > 0),
    spec        TEXT,                                 -- how to load it again; NULL: it cannot be named
    started_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%S', 'now'))
) STRICT;

-- table sessions on sessions
CREATE TABLE sessions (
    id         INTEGER PRIMARY KEY,
    source     TEXT NOT NULL,              -- where it came from: a file name, "mcp", "api"
    key        TEXT NOT NULL,              -- the source's own id for the session
    title      TEXT NOT NULL DEFAULT '',
    started_at TEXT,                       -- naive ISO-8601, the source's clock
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%S', 'now')), client TEXT NOT NULL DEFAULT '', cwd TEXT NOT NULL DEFAULT '', repository TEXT NOT NULL DEFAULT '', branch TEXT NOT NULL DEFAULT '', git_commit TEXT NOT NULL DEFAULT '',
    UNIQUE (source, key)
) STRICT;

-- table sqlite_sequence on sqlite_sequence
CREATE TABLE sqlite_sequence(name,seq);

-- table sync_device on sync_device
CREATE TABLE sync_device (
    id           INTEGER PRIMARY KEY CHECK (id = 1),
    device       TEXT NOT NULL,               -- this store's device id, given on first sync
    next_segment INTEGER NOT NULL DEFAULT 1,  -- number of the next segment it writes
    exported_seq INTEGER NOT NULL DEFAULT 0,  -- changes.seq of the newest change exported
    hlc          INTEGER NOT NULL DEFAULT 0   -- newest hybrid-clock stamp given out or seen
, key_epoch INTEGER NOT NULL DEFAULT 0, key_check BLOB, forget_mark INTEGER NOT NULL DEFAULT 0, legacy_through INTEGER NOT NULL DEFAULT 0) STRICT;

-- table sync_folded on sync_folded
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

-- table sync_own on sync_own
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

-- table sync_pending on sync_pending
CREATE TABLE sync_pending (
    id     INTEGER PRIMARY KEY,
    device TEXT NOT NULL,
    turn   TEXT NOT NULL,                     -- the turn hash it waits for
    change TEXT NOT NULL,                     -- the change as the segment held it (JSON)
    UNIQUE (device, change)
) STRICT;

-- table sync_refused on sync_refused
CREATE TABLE sync_refused (
    device     TEXT NOT NULL,
    name       TEXT NOT NULL,
    reason     TEXT NOT NULL,
    incomplete INTEGER NOT NULL DEFAULT 0,
    at         REAL NOT NULL,
    PRIMARY KEY (device, name)
) STRICT;

-- table sync_topics on sync_topics
CREATE TABLE sync_topics (
    key TEXT PRIMARY KEY,
    hlc INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

-- table tags on tags
CREATE TABLE tags (
    id   INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE
) STRICT;

-- table theme_topics on theme_topics
CREATE TABLE theme_topics (
    theme_id INTEGER NOT NULL REFERENCES topics (id) ON DELETE CASCADE,
    topic_id INTEGER NOT NULL UNIQUE REFERENCES topics (id) ON DELETE CASCADE,
    PRIMARY KEY (theme_id, topic_id)
) STRICT, WITHOUT ROWID;

-- table topic_turns on topic_turns
CREATE TABLE topic_turns (
    topic_id INTEGER NOT NULL REFERENCES topics (id) ON DELETE CASCADE,
    turn_id  INTEGER NOT NULL REFERENCES turns (id) ON DELETE CASCADE,
    PRIMARY KEY (topic_id, turn_id)
) STRICT, WITHOUT ROWID;

-- table topics on topics
CREATE TABLE topics (
    id         INTEGER PRIMARY KEY,
    label      TEXT NOT NULL,
    summary    TEXT NOT NULL DEFAULT '',
    updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%S', 'now'))
, kind TEXT NOT NULL DEFAULT 'session' CHECK (kind IN ('session', 'theme')), themed INTEGER NOT NULL DEFAULT 0, key TEXT) STRICT;

-- table turn_codes on turn_codes
CREATE TABLE turn_codes (
    turn_id    INTEGER PRIMARY KEY,
    session_id INTEGER NOT NULL,
    ord        INTEGER NOT NULL,
    words      INTEGER NOT NULL,
    speaker    TEXT NOT NULL,
    ts         INTEGER,                       -- unixepoch(turns.ts); NULL when undated
    code       BLOB NOT NULL
) STRICT;

-- table turn_enrichment on turn_enrichment
CREATE TABLE turn_enrichment (
    turn_id       INTEGER PRIMARY KEY REFERENCES turns (id) ON DELETE CASCADE,
    memory_type   TEXT CHECK (memory_type IN ('event', 'opinion', 'plan', 'state_change')),
    type_source   TEXT NOT NULL CHECK (type_source IN ('model', 'keyword', 'none')),
    low_info      INTEGER NOT NULL DEFAULT 0,   -- 1: filtered before any model call
    cues_kept     INTEGER NOT NULL DEFAULT 0,
    cues_rejected INTEGER NOT NULL DEFAULT 0,   -- not supported by the turn text
    model         TEXT NOT NULL DEFAULT '',
    created_at    TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%S', 'now'))
) STRICT;

-- table turn_vec on turn_vec
CREATE TABLE turn_vec (
    turn_id   INTEGER PRIMARY KEY,
    embedding BLOB NOT NULL CHECK (length(embedding) = 256)
) STRICT;

-- table turns on turns
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

-- table turns_fts on turns_fts
CREATE VIRTUAL TABLE turns_fts USING fts5 (
    doc, content = '', contentless_delete = 1, tokenize = 'porter unicode61 remove_diacritics 2'
);

-- table turns_fts_config on turns_fts_config
CREATE TABLE 'turns_fts_config'(k PRIMARY KEY, v) WITHOUT ROWID;

-- table turns_fts_data on turns_fts_data
CREATE TABLE 'turns_fts_data'(id INTEGER PRIMARY KEY, block BLOB);

-- table turns_fts_docsize on turns_fts_docsize
CREATE TABLE 'turns_fts_docsize'(id INTEGER PRIMARY KEY, sz BLOB, origin INTEGER);

-- table turns_fts_idx on turns_fts_idx
CREATE TABLE 'turns_fts_idx'(segid, term, pgno, PRIMARY KEY(segid, term)) WITHOUT ROWID;

-- trigger cue_vec_code on cue_vec
CREATE TRIGGER cue_vec_code AFTER INSERT ON cue_vec BEGIN
    INSERT OR REPLACE INTO cue_codes(cue_id, turn_id, statement, code)
    SELECT c.id, c.turn_id, c.kind = 'statement', vec_quantize_binary(new.embedding)
    FROM cues c WHERE c.id = new.cue_id;
END;

-- trigger cue_vec_delete on cues
CREATE TRIGGER cue_vec_delete AFTER DELETE ON cues BEGIN
    DELETE FROM cue_vec WHERE cue_id = old.id;
END;

-- trigger cue_vec_recode on cue_vec
CREATE TRIGGER cue_vec_recode AFTER UPDATE ON cue_vec BEGIN
    INSERT OR REPLACE INTO cue_codes(cue_id, turn_id, statement, code)
    SELECT c.id, c.turn_id, c.kind = 'statement', vec_quantize_binary(new.embedding)
    FROM cues c WHERE c.id = new.cue_id;
END;

-- trigger cue_vec_uncode on cue_vec
CREATE TRIGGER cue_vec_uncode AFTER DELETE ON cue_vec BEGIN
    DELETE FROM cue_codes WHERE cue_id = old.cue_id;
END;

-- trigger cues_codes_update on cues
CREATE TRIGGER cues_codes_update AFTER UPDATE OF turn_id, kind ON cues BEGIN
    UPDATE cue_codes SET turn_id = new.turn_id, statement = new.kind = 'statement' WHERE cue_id = new.id;
END;

-- trigger cues_fts_delete on cues
CREATE TRIGGER cues_fts_delete AFTER DELETE ON cues BEGIN
    DELETE FROM cues_fts WHERE rowid = old.id;
END;

-- trigger cues_mirror_delete on cues
CREATE TRIGGER cues_mirror_delete AFTER DELETE ON cues BEGIN
    UPDATE mirror_epochs SET cues = cues + 1 WHERE id = 1;
END;

-- trigger cues_mirror_update on cues
CREATE TRIGGER cues_mirror_update AFTER UPDATE OF id, turn_id, kind ON cues BEGIN
    UPDATE mirror_epochs SET cues = cues + 1 WHERE id = 1;
END;

-- trigger embedder_mirror_reset on meta
CREATE TRIGGER embedder_mirror_reset AFTER INSERT ON meta WHEN new.key IN ('embedder_id', 'embedder_dim') BEGIN
    UPDATE mirror_epochs SET turns = turns + 1, cues = cues + 1 WHERE id = 1;
END;

-- trigger extracted_cues_fts_delete on cues
CREATE TRIGGER extracted_cues_fts_delete AFTER DELETE ON cues WHEN old.kind != 'statement' BEGIN
    DELETE FROM extracted_cues_fts WHERE rowid = old.id;
END;

-- trigger mirror_snapshots_expire on mirror_epochs
CREATE TRIGGER mirror_snapshots_expire AFTER UPDATE OF turns, cues ON mirror_epochs BEGIN
    DELETE FROM mirror_snapshots
    WHERE (mirror = 'turns' AND new.turns IS NOT old.turns)
       OR (mirror = 'cues' AND new.cues IS NOT old.cues);
END;

-- trigger topic_turns_delete on topic_turns
CREATE TRIGGER topic_turns_delete AFTER DELETE ON topic_turns BEGIN
    UPDATE topics SET themed = 0 WHERE id = old.topic_id;
    DELETE FROM topics WHERE id = old.topic_id
        AND NOT EXISTS (SELECT 1 FROM topic_turns WHERE topic_id = old.topic_id);
END;

-- trigger topics_key_insert on topics
CREATE TRIGGER topics_key_insert AFTER INSERT ON topics WHEN new.key IS NULL BEGIN
    UPDATE topics SET key = lower(hex(randomblob(16))) WHERE id = new.id;
END;

-- trigger turn_vec_code on turn_vec
CREATE TRIGGER turn_vec_code AFTER INSERT ON turn_vec BEGIN
    INSERT OR REPLACE INTO turn_codes(turn_id, session_id, ord, words, speaker, ts, code)
    SELECT t.id, t.session_id, t.ord, t.words, t.speaker, unixepoch(t.ts), vec_quantize_binary(new.embedding)
    FROM turns t WHERE t.id = new.turn_id;
END;

-- trigger turn_vec_delete on turns
CREATE TRIGGER turn_vec_delete AFTER DELETE ON turns BEGIN
    DELETE FROM turn_vec WHERE turn_id = old.id;
END;

-- trigger turn_vec_recode on turn_vec
CREATE TRIGGER turn_vec_recode AFTER UPDATE ON turn_vec BEGIN
    INSERT OR REPLACE INTO turn_codes(turn_id, session_id, ord, words, speaker, ts, code)
    SELECT t.id, t.session_id, t.ord, t.words, t.speaker, unixepoch(t.ts), vec_quantize_binary(new.embedding)
    FROM turns t WHERE t.id = new.turn_id;
END;

-- trigger turn_vec_uncode on turn_vec
CREATE TRIGGER turn_vec_uncode AFTER DELETE ON turn_vec BEGIN
    DELETE FROM turn_codes WHERE turn_id = old.turn_id;
END;

-- trigger turns_codes_update on turns
CREATE TRIGGER turns_codes_update AFTER UPDATE OF session_id, ord, speaker, ts, words ON turns BEGIN
    UPDATE turn_codes SET session_id = new.session_id, ord = new.ord, words = new.words,
        speaker = new.speaker, ts = unixepoch(new.ts)
    WHERE turn_id = new.id;
END;

-- trigger turns_forgotten on turns
CREATE TRIGGER turns_forgotten AFTER DELETE ON turns BEGIN
    INSERT OR IGNORE INTO forgotten(hash, at) VALUES (old.hash, unixepoch('subsec'));
END;

-- trigger turns_fts_delete on turns
CREATE TRIGGER turns_fts_delete AFTER DELETE ON turns BEGIN
    DELETE FROM turns_fts WHERE rowid = old.id;
END;

-- trigger turns_mirror_delete on turns
CREATE TRIGGER turns_mirror_delete AFTER DELETE ON turns BEGIN
    UPDATE mirror_epochs SET turns = turns + 1 WHERE id = 1;
END;

-- trigger turns_mirror_update on turns
CREATE TRIGGER turns_mirror_update AFTER UPDATE OF id, session_id, ord, speaker, ts, words ON turns BEGIN
    UPDATE mirror_epochs SET turns = turns + 1 WHERE id = 1;
END;
