-- localmem schema, version 7: the vector tables' delete triggers join the migrations.
-- The vectors themselves live in two sqlite-vec vec0 tables, turn_vec and cue_vec,
-- whose dimension is the embedder's: they are made when a store is first bound to an
-- embedder (and remade by reindex) from the template migrations/vectors.sql, not here
-- (see that file for why). These triggers name them in their bodies, which SQLite
-- resolves only when a delete runs; turns are written only by a bound store, so a
-- store that has turns always has both tables.
-- Before this version the triggers were made in Python together with the tables:
-- stores that have them get them replaced by the same definitions.

DROP TRIGGER IF EXISTS turn_vec_delete;
DROP TRIGGER IF EXISTS cue_vec_delete;

CREATE TRIGGER turn_vec_delete AFTER DELETE ON turns BEGIN
    DELETE FROM turn_vec WHERE turn_id = old.id;
END;

CREATE TRIGGER cue_vec_delete AFTER DELETE ON cues BEGIN
    DELETE FROM cue_vec WHERE cue_id = old.id;
END;
