-- localmem schema, version 8: every model call leaves a record (localmem/storage/calls.py).
-- model_calls is the call log, like the `llm` tool's responses table: when, what for
-- (purpose: extract, antecedent-queries, antecedent-verify, topic-label, theme-label,
-- answer, explore), which model, a hash of the prompt, the reply (cut to a few KB), the
-- parse status ('ok' or the reason the reply was refused: empty, truncated, not JSON,
-- not an object, a missing key) and the token counts. It is bounded: the transaction
-- that writes a row deletes those older than the newest 10,000.
-- model_call_totals keeps the per-purpose counts of parsed and unparsed calls over the
-- store's whole life (the log itself forgets), updated in the same transaction.

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

CREATE TABLE model_call_totals (
    purpose          TEXT PRIMARY KEY,
    parsed           INTEGER NOT NULL DEFAULT 0,
    unparsed         INTEGER NOT NULL DEFAULT 0,
    prompt_tokens    INTEGER NOT NULL DEFAULT 0,
    generated_tokens INTEGER NOT NULL DEFAULT 0
) STRICT, WITHOUT ROWID;
