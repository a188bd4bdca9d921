-- localmem schema, version 9: change counters for the in-memory vector mirrors.
-- Each process keeps numpy mirrors of the vector tables (localmem/storage/vectors.py)
-- and refreshes them by loading only rows with an id above the newest it holds. That
-- is exact while rows are only added: SQLite gives a new row max(id) + 1. A delete
-- (forget) breaks it, since the freed ids are given out again (turns and cues have no
-- AUTOINCREMENT), and so would an update of a mirrored column. These counters go up
-- with every such change, in the same transaction; a mirror whose counter differs
-- from the table's reloads that table. A new embedder (reindex) re-embeds every row
-- under the same ids, so recording one bumps both.

CREATE TABLE mirror_epochs (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    turns INTEGER NOT NULL DEFAULT 0,
    cues  INTEGER NOT NULL DEFAULT 0
) STRICT;
INSERT INTO mirror_epochs (id) VALUES (1);

CREATE TRIGGER turns_mirror_delete AFTER DELETE ON turns BEGIN
    UPDATE mirror_epochs SET turns = turns + 1 WHERE id = 1;
END;
CREATE TRIGGER turns_mirror_update AFTER UPDATE OF id, session_id, ord, speaker, ts, words ON turns BEGIN
    UPDATE mirror_epochs SET turns = turns + 1 WHERE id = 1;
END;
CREATE TRIGGER cues_mirror_delete AFTER DELETE ON cues BEGIN
    UPDATE mirror_epochs SET cues = cues + 1 WHERE id = 1;
END;
CREATE TRIGGER cues_mirror_update AFTER UPDATE OF id, turn_id, kind ON cues BEGIN
    UPDATE mirror_epochs SET cues = cues + 1 WHERE id = 1;
END;
CREATE TRIGGER embedder_mirror_reset AFTER INSERT ON meta WHEN new.key IN ('embedder_id', 'embedder_dim') BEGIN
    UPDATE mirror_epochs SET turns = turns + 1, cues = cues + 1 WHERE id = 1;
END;
