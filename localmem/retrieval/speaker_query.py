"""A query that names one speaker, put in that speaker's own words for the dense search.

A speaker's own turns say "I" and "my", seldom their own name; the turns that carry the
name are mostly the other speaker addressing them ("Thanks, Melanie!"). So when a query
names exactly one speaker (``scorer.mentioned_speaker``) that is not a chat role (user,
assistant, system), its vector — the one the dense lists search with and the cosine
features compare against — is that of the query with the name in the first person
("Melanie's kids" -> "my kids", "does Melanie" -> "does I"). The lexical lists and every
feature read from the query's text (who it names, whether it asks the assistant, the
dates it names) keep the query as written.

Measured on LoCoMo dev (docs/benchmarks.md, "A query in the named speaker's words"):
open-domain +6 to +8 points at every budget, multi-hop +1 to +2. Pure; no store access.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from localmem.retrieval.scorer import mentioned_speaker

ROLES = frozenset({"user", "assistant", "system"})


def first_person(query: str, speakers: Sequence[str]) -> str | None:
    """``query`` with the one speaker it names in the first person, or None when it names
    none, several, or only a chat role."""
    named = [s for s in speakers if s.strip() and s.strip().lower() not in ROLES]
    who = mentioned_speaker(query, named)
    if who is None:
        return None
    first = re.escape(who.split()[0])
    spoken = re.sub(rf"\b{first}['’]s\b", "my", query, flags=re.IGNORECASE)
    return re.sub(rf"\b{first}\b", "I", spoken, flags=re.IGNORECASE)
