-- localmem vector tables: a template, applied at run time, not by migrate().
-- vec0 fixes a vector's dimension when the table is created, and the dimension is the
-- embedder's, which is recorded in meta (embedder_id, embedder_dim) when a store is
-- first opened with one. So these tables cannot be made by a numbered migration:
-- localmem.storage.db.create_vector_tables() substitutes {dim} and runs this file in
-- the transaction that records the embedder, and reindex drops and remakes them with
-- the new embedder's dimension. Their delete triggers are static: migration 0007.
-- This file is the only definition of the two tables; the schema snapshot test
-- (tests/data/schema.sql) covers them as made for a 64-d embedder.

CREATE VIRTUAL TABLE turn_vec USING vec0(
    turn_id INTEGER PRIMARY KEY, embedding float[{dim}] distance_metric=cosine);

CREATE VIRTUAL TABLE cue_vec USING vec0(
    cue_id INTEGER PRIMARY KEY, embedding float[{dim}] distance_metric=cosine);
