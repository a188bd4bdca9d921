"""The MRAgent traversal toolkit: small, bounded steps over the Cue–Tag–Content graph.

Each function takes a store and returns a :class:`Page` of compact, cited records
(every record names its turn ids, sessions and times), so a model can reconstruct the
past step by step (MRAgent 3.4): search cues -> tags of a cue -> turns of a (cue, tag)
-> cues and context of a turn -> time, people's facts, topics and themes. The active
loop (``localmem.answering.explore``) and the MCP server call these same functions.

This package re-exports the whole public API; import from here. Its modules:

- :mod:`~localmem.toolkit.records`: the result dataclasses (``Page``, ``TurnRef``, ...);
- :mod:`~localmem.toolkit.common`: limits, argument checks, paging, record builders;
- :mod:`~localmem.toolkit.cues`: search cues, cue -> tags, (cue, tag) -> turns;
- :mod:`~localmem.toolkit.turns`: turn -> cues / context / time, time range -> turns,
  one turn in full, sessions;
- :mod:`~localmem.toolkit.people`: person -> aspects -> facts, topics -> turns,
  theme -> its session topics.
- :mod:`~localmem.toolkit.catalog`: the tools declared once (names, descriptions,
  arguments, the function each runs), for the MCP server and the explore loop.

Invariants (each module states its own part):
- read-only: named reads of ``localmem.storage`` (``traversal``, ``topic_reads``,
  ``queries``; no SQL here) plus the in-memory vector mirrors;
- every list is paged (``limit``, ``offset``) and capped: ``limit`` is clamped to
  :data:`MAX_LIMIT`, a turn's text to :data:`MAX_TEXT_CHARS` (``clipped`` says so;
  the full text is one ``turn`` lookup away), so no call dumps the graph;
- a "cue" in MRAgent's sense is an entity or phrase that may recur across turns:
  functions that take a cue accept a cue id or its text and act on every cue with the
  same text (case-insensitive);
- facts are cues of kind ``fact``: ``subject`` = the person, ``relation`` = the
  aspect, ``object`` = the value (``localmem/enrichment/extract.py``).
"""

from __future__ import annotations

from localmem.toolkit.common import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    MAX_OFFSET,
    MAX_TEXT_CHARS,
    MAX_WINDOW,
    turn_refs,
)
from localmem.toolkit.cues import CUE_KINDS, cue_tags, cue_turns, search_cues
from localmem.toolkit.people import TOPIC_KINDS, person_aspects, person_facts, theme_topics, topic_turns, topics
from localmem.toolkit.records import (
    Aspect,
    CueHit,
    CueRef,
    Fact,
    Link,
    Neighbour,
    Page,
    TagCount,
    Topic,
    TurnContext,
    TurnCues,
    TurnRef,
    TurnTime,
)
from localmem.toolkit.turns import (
    session_turns,
    sessions,
    turn,
    turn_context,
    turn_cues,
    turn_time,
    turns_between,
)

__all__ = [
    "CUE_KINDS",
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "MAX_OFFSET",
    "MAX_TEXT_CHARS",
    "MAX_WINDOW",
    "TOPIC_KINDS",
    "Aspect",
    "CueHit",
    "CueRef",
    "Fact",
    "Link",
    "Neighbour",
    "Page",
    "TagCount",
    "Topic",
    "TurnContext",
    "TurnCues",
    "TurnRef",
    "TurnTime",
    "cue_tags",
    "cue_turns",
    "person_aspects",
    "person_facts",
    "search_cues",
    "session_turns",
    "sessions",
    "theme_topics",
    "topic_turns",
    "topics",
    "turn",
    "turn_context",
    "turn_cues",
    "turn_refs",
    "turn_time",
    "turns_between",
]
