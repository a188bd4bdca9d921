-- localmem schema, version 4: a lexical index of its own for model-extracted cues.
-- Statement cues (model-free) keep cues_fts to themselves, so extracting cues never
-- shifts the bm25 statistics (document count, lengths, term frequencies) that the
-- model-free scorer was fitted on; extracted cues (triple / keyword / fact) are found
-- through extracted_cues_fts. rowid = cues.id. Contentless, like cues_fts.

CREATE VIRTUAL TABLE extracted_cues_fts USING fts5 (
    doc, content = '', contentless_delete = 1, tokenize = 'porter unicode61 remove_diacritics 2'
);

CREATE TRIGGER extracted_cues_fts_delete AFTER DELETE ON cues WHEN old.kind != 'statement' BEGIN
    DELETE FROM extracted_cues_fts WHERE rowid = old.id;
END;
