-- localmem schema, version 3: the model layer's bookkeeping.
-- jobs gain a lease: a worker that claims a job records who it is and until when the
-- claim holds, so a job whose worker died (kill -9, power loss) is claimed again.
-- turn_enrichment records, per turn, that extraction ran (exactly once), the memory
-- type (CABLE: event / opinion / plan / state_change; NULL for a low-information
-- turn) and how many extracted cues were kept and rejected by grounding.
-- Turns stored before this version get their extraction job here.

ALTER TABLE jobs ADD COLUMN locked_by TEXT;      -- "<host>:<pid>" of the claiming worker
ALTER TABLE jobs ADD COLUMN locked_until TEXT;   -- naive ISO-8601 UTC; the claim lapses after it

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
CREATE INDEX turn_enrichment_type ON turn_enrichment (memory_type);

INSERT OR IGNORE INTO jobs (kind, turn_id) SELECT 'extract', id FROM turns;
