"""A query that names the store's speakers, put in their own words for the dense search.

A speaker's own turns say "I" and "my", seldom their own name; the turns that carry the
name are mostly the other speaker addressing them ("Thanks, Melanie!"). So when a query
names speakers of the store (whole first names; chat roles — user, assistant, system —
are not people), its vector — the one the dense lists search with and the cosine
features compare against — is that of the query in their words:
- one speaker named: the first person ("Melanie's kids" -> "my kids", "does Melanie"
  -> "does I");
- two named, joined by "and": "we" / "our" ("Jon and Gina both" -> "we both");
- two named otherwise: the first named speaks, the second is spoken to ("What did
  Caroline tell Melanie" -> "What did I tell you");
- none or more than two: the query as written.
The lexical lists and every feature read from the query's text (who it names, whether
it asks the assistant, the dates it names) keep the query as written.

Measured on LoCoMo dev (docs/benchmarks.md, "A query in the named speaker's words").
Pure; no store access.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

ROLES = frozenset({"user", "assistant", "system"})
_POSSESSIVE = r"['’]s\b"


def first_person(query: str, speakers: Sequence[str]) -> str | None:
    """``query`` in the words of the speakers it names (see the module docstring), or
    None when it names none of them, more than two, or only chat roles."""
    hits: dict[str, int] = {}
    for s in speakers:
        first = s.split()[0] if s.strip() and s.strip().lower() not in ROLES else ""
        m = re.search(rf"\b{re.escape(first)}\b", query, flags=re.IGNORECASE) if first else None
        if m is not None:
            hits.setdefault(first.lower(), m.start())
    if not 1 <= len(hits) <= 2:
        return None
    names = [re.escape(n) for n in sorted(hits, key=hits.__getitem__)]
    if len(names) == 1:
        return _swap(query, names[0], "my", "I")
    a, b = names
    both = rf"\b{a}\s+and\s+{b}"
    if re.search(both + r"\b", query, flags=re.IGNORECASE):
        return _swap(query, f"{a}\\s+and\\s+{b}", "our", "we")
    return _swap(_swap(query, a, "my", "I"), b, "your", "you")


def _swap(text: str, name: str, possessive: str, pronoun: str) -> str:
    """``name`` (a regex of a name) -> ``pronoun``, ``name's`` -> ``possessive``."""
    text = re.sub(rf"\b{name}{_POSSESSIVE}", possessive, text, flags=re.IGNORECASE)
    return re.sub(rf"\b{name}\b", pronoun, text, flags=re.IGNORECASE)
