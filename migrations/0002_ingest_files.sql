-- localmem schema, version 2: ingest bookkeeping.
-- One row per file (and format and options) ever ingested: the resume point of an
-- interrupted or growing ingest, and the fingerprint by which the watcher knows an
-- unchanged, renamed or moved file. Memories never depend on these rows: without one,
-- a file is read from its start again, and turns already stored are recognised by
-- their content hash.

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
CREATE INDEX ingest_files_fingerprint ON ingest_files (fingerprint);
