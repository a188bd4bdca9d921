-- localmem schema, version 13: where a session ran, and what hooks put into agents' context.
-- (localmem/storage/write/changes.py add_session; localmem/retrieval/scope.py; docs/capture.md)
--
-- A session records the client that wrote it (claude-code, codex, gemini-cli; '' for chat
-- exports, MCP and the API) and its project as the client's log says: the working
-- directory, the git remote (credentials taken out), branch and commit; '' where unknown.
-- None of them is part of a session's or a turn's identity. A project scope
-- (`query --project PATH`) finds its sessions by working directory (the folder or one
-- inside it) or by repository.
ALTER TABLE sessions ADD COLUMN client TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN cwd TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN repository TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN branch TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN git_commit TEXT NOT NULL DEFAULT '';
CREATE INDEX sessions_cwd ON sessions (cwd) WHERE cwd != '';
CREATE INDEX sessions_repository ON sessions (repository) WHERE repository != '';

-- Lines a hook injected into an agent's context (one per recalled turn: the line as the
-- context rendered it, hashed), so that when the agent's transcript comes back the
-- injected memory is recognised and not stored as a new memory, even where the client
-- dropped the <localmem-context> wrapper. Local bookkeeping: not journaled, not synced.
CREATE TABLE injected (
    hash    TEXT PRIMARY KEY,  -- content_hash('injected', the line with whitespace collapsed)
    turn_id INTEGER NOT NULL,  -- the recalled turn the line quoted
    at      REAL NOT NULL      -- unix seconds of the last injection
) STRICT, WITHOUT ROWID;
