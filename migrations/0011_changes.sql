-- localmem schema, version 11: the journal of changes to the facts (localmem/storage/changes.py).
-- Every mutation of the facts passes one door in storage and appends one row here, in
-- the same transaction: a session or turn written, a turn forgotten, a model-derived
-- cue (triple / keyword / fact, with its span and tags), a turn's extraction record
-- (memory type), an antecedent edge (with the verifier's reason), a topic or theme
-- (label, summary, membership) added, changed or removed. Derived rows (vectors, FTS,
-- statement cues, temporal and semantic edges, mirrors, jobs) are not journaled.
--   kind    what changed ('session', 'turn', 'forget', 'enrichment', 'cue', 'antecedent',
--           'topic', 'topic_removed')
--   key     its content identity, the same on every device (a turn's content hash, never
--           a local rowid)
--   model   the model id that derived it; NULL for facts (sessions, turns, forgets)
--   origin  NULL when made on this device, else the device id it was folded from
--   data    JSON that replays the change without local rowids; NULL when the kind's own
--           row holds everything (a turn, read back by its hash)
--   at      unix seconds
-- AUTOINCREMENT: a seq is never given out twice, even after the newest rows are pruned.

CREATE TABLE changes (
    seq    INTEGER PRIMARY KEY AUTOINCREMENT,
    kind   TEXT NOT NULL,
    key    TEXT NOT NULL,
    model  TEXT,
    origin TEXT,
    data   TEXT,
    at     REAL NOT NULL
) STRICT;

-- Topics and themes get a content identity: ids are local, and a topic's turns change
-- as it grows, so each topic carries a random key given when it is made (kept when it is
-- folded on another device). Topics made before this version get theirs here.
ALTER TABLE topics ADD COLUMN key TEXT;
UPDATE topics SET key = lower(hex(randomblob(16))) WHERE key IS NULL;
CREATE UNIQUE INDEX topics_key ON topics (key);
-- A topic inserted without a key (an older build, a test's own row) gets one at once.
CREATE TRIGGER topics_key_insert AFTER INSERT ON topics WHEN new.key IS NULL BEGIN
    UPDATE topics SET key = lower(hex(randomblob(16))) WHERE id = new.id;
END;
