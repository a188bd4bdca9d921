-- localmem schema, version 6: cross-session themes (localmem/themes.py).
-- topics gain a kind: 'session' (a stretch of one session, localmem/topics.py; every
-- topic stored before this version is one) or 'theme' (session topics that recur
-- across sessions, with a label and summary of their own). A theme's member turns are
-- rows of topic_turns like a session topic's, so whatever reads topic -> turns reads
-- themes too; theme_topics links a theme to the session topics it groups (a session
-- topic is in at most one theme).
-- themed = 0 marks work for the theme pass: a session topic not yet placed with its
-- current turns, or a theme whose membership changed since it was labelled. Whatever
-- changes a topic's turns clears it in the same transaction (topics.py, and the
-- trigger below when turns are forgotten), so a crash before the next pass loses nothing.

ALTER TABLE topics ADD COLUMN kind TEXT NOT NULL DEFAULT 'session' CHECK (kind IN ('session', 'theme'));
ALTER TABLE topics ADD COLUMN themed INTEGER NOT NULL DEFAULT 0;
CREATE INDEX topics_kind ON topics (kind, themed);

-- Before this version forgetting turns could leave a topic with none: drop those.
DELETE FROM topics WHERE id NOT IN (SELECT topic_id FROM topic_turns);

CREATE TABLE theme_topics (
    theme_id INTEGER NOT NULL REFERENCES topics (id) ON DELETE CASCADE,
    topic_id INTEGER NOT NULL UNIQUE REFERENCES topics (id) ON DELETE CASCADE,
    PRIMARY KEY (theme_id, topic_id)
) STRICT, WITHOUT ROWID;

-- A turn leaving a topic or theme (forget cascades here) marks it for the next theme
-- pass; one with no turn left goes at once, since its label would only describe
-- forgotten text (its theme_topics rows go with it).
CREATE TRIGGER topic_turns_delete AFTER DELETE ON topic_turns BEGIN
    UPDATE topics SET themed = 0 WHERE id = old.topic_id;
    DELETE FROM topics WHERE id = old.topic_id
        AND NOT EXISTS (SELECT 1 FROM topic_turns WHERE topic_id = old.topic_id);
END;
