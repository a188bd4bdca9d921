-- localmem schema, version 5: CABLE's construction record (localmem/antecedent.py).
-- One row per turn the antecedent job has processed (turn_id = the new memory m_i):
-- what the job did and what it cost, so cost per turn can be reported. The links
-- themselves are edges of kind 'antecedent': src = the earlier turn m_j, dst = m_i,
-- weight = the verifier's confidence, reason = its one-line reason. Both go with the
-- turns they touch (ON DELETE CASCADE).

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

-- Turns enriched before this version get their antecedent job now.
INSERT OR IGNORE INTO jobs (kind, turn_id) SELECT 'antecedent', turn_id FROM turn_enrichment;
