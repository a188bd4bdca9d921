-- localmem schema, version 15: the recall log (localmem/storage/layers/recalls.py), and an
-- index for the web view's speaker and role filters and their counts.
-- What each reconstruct made for a client handed it, and why: a row per call (when, which
-- client and tool, the client's own session and project when it gives them, the query as
-- asked with its secrets taken out, budget, as_of, scope, tokens, turns handed) and a row
-- per turn handed (its place in the context, the reason it is there, its score and the
-- reason's detail). Private and bounded: never journaled, exported or synced; the
-- transaction that writes a call deletes the calls older than the newest N (the
-- `recall_log` setting; 0: nothing is written). A forgotten turn's rows go with it (ON
-- DELETE CASCADE); its call keeps the count of turns it was handed.

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

CREATE TABLE recall_turns (
    call_id INTEGER NOT NULL REFERENCES recall_calls (id) ON DELETE CASCADE,
    turn_id INTEGER NOT NULL REFERENCES turns (id) ON DELETE CASCADE,
    place   INTEGER NOT NULL,  -- 1-based, in the order of the context handed
    reason  TEXT NOT NULL,     -- anchor / temporal / semantic / extracted / antecedent
    score   REAL NOT NULL,
    why     TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (call_id, turn_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX recall_turns_turn ON recall_turns (turn_id);

-- The web view's filters by speaker and role, and the counts of each (storage/reads/browse.py),
-- read this index instead of every turn's row.
CREATE INDEX turns_speaker_role ON turns (speaker, role);
