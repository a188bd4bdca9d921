"""Checks on what a model extracted, before anything is stored. Pure functions.

- ``low_information``: CABLE's rule-based filter (greetings, acknowledgements, filler);
  such turns never reach the model.
- ``keyword_memory_type``: CABLE's fallback classifier when the model's type is
  missing or unusable.
- ``ground_*``: a cue is kept only when its arguments are supported by the turn text:
  every content word of a keyword, a triple's object, a fact's value (and a subject
  that is not the speaker or a pronoun) must occur in the turn, compared after light
  stemming. The cue records the character span of the turn it rests on. Labels
  (relations, tags, aspects) are names for associations, not claims, so they are only
  cleaned (lower case, 1-4 words), not grounded.

Invariant: a returned ``Grounded`` span satisfies 0 <= start < end <= len(turn text).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from localmem.storage.reads.queries import STOPWORDS

MEMORY_TYPES = ("event", "opinion", "plan", "state_change")

_TOKEN = re.compile(r"[\w][\w'’-]*", re.UNICODE)
_FIRST_PERSON = frozenset({"i", "me", "my", "myself", "mine", "i'm", "im", "speaker", "user"})
_FILLER = frozenset(
    """hi hello hey hiya yo bye goodbye goodnight night morning evening thanks thank thx ty cheers welcome
    ok okay k sure yeah yep yup yes no nope nah lol haha hahaha lmao omg wow whoa oh ah aw aww ooh hmm um uh
    cool nice great awesome amazing wonderful fantastic lovely sweet good glad happy sounds sound sorry
    right true totally absolutely definitely indeed agreed exactly same too also really so much lot
    congrats congratulations care take see later soon talk chat hear hope well love appreciate
    that's it's i'm you're thats its im youre let's lets""".split()  # noqa: SIM905
)


@dataclass(frozen=True)
class Token:
    start: int
    end: int
    stem: str


def stem(word: str) -> str:
    w = word.lower().replace("’", "'")
    if w.endswith("'s"):
        w = w[:-2]
    w = w.strip("'-")
    for suffix in ("ing", "ed", "es", "s"):
        if len(w) > len(suffix) + 3 and w.endswith(suffix):
            w = w[: -len(suffix)]
            break
    return w[:7]


def tokens(text: str) -> list[Token]:
    return [Token(m.start(), m.end(), stem(m.group(0))) for m in _TOKEN.finditer(text)]


def content_words(text: str) -> list[str]:
    return [m.group(0) for m in _TOKEN.finditer(text) if m.group(0).lower().replace("’", "'") not in STOPWORDS]


def low_information(text: str, names: Sequence[str] = ()) -> bool:
    """Greetings, thanks, acknowledgements, reactions: nothing worth a model call."""
    body = re.sub(r"\[image: [^\]]*\]", " IMAGE ", text)
    if "IMAGE" in body or re.search(r"\d", body):
        return False
    parts = [n.lower() for name in names for n in name.split()]
    words = [w.lower().replace("’", "'") for w in _TOKEN.findall(body)]
    content = [
        w
        for w in words
        if w not in STOPWORDS and w not in _FILLER and not any(len(w) >= 3 and p.startswith(w) for p in parts)
    ]
    return not content


_TYPE_CUES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "state_change",
        re.compile(
            r"\b(moved|moving to|started|quit|quitting|became|become|no longer|not anymore|got (?:a )?new|changed|"
            r"switched|broke up|married|engaged|divorced|promoted|graduated|retired|lost my|adopted|joined|left my|"
            r"now i|i'm now|i am now|recovered|pregnant|hired|fired)\b",
            re.IGNORECASE,
        ),
    ),
    (
        "plan",
        re.compile(
            r"\b(will|won't|going to|gonna|plan|planning|plans|intend|want to|wanna|hope to|hoping to|thinking of|"
            r"thinking about|next (?:week|month|year|weekend)|tomorrow|someday|soon|looking forward|can't wait|"
            r"aim to|goal is|decided to|about to)\b",
            re.IGNORECASE,
        ),
    ),
    (
        "opinion",
        re.compile(
            r"\b(i think|i believe|i feel|in my opinion|i love|i like|i hate|i prefer|favorite|favourite|i enjoy|"
            r"should|best|worst|beautiful|amazing|awesome|terrible|important|agree|disagree|i wish|i find)\b",
            re.IGNORECASE,
        ),
    ),
)


TAGS = (
    "person", "family", "friend", "pet", "place", "home", "travel", "work", "school", "money", "hobby", "art",
    "music", "book", "sport", "health", "food", "event", "feeling", "goal", "belief", "identity", "thing", "date",
)  # fmt: skip
_BREAK = frozenset(
    """yesterday today tomorrow tonight last next ago week weeks month months year years weekend morning
    afternoon evening night really pretty super kinda gonna wanna""".split()  # noqa: SIM905
)


def candidate_phrases(text: str, names: Sequence[str] = (), limit: int = 40) -> list[str]:
    """Runs of up to 4 content words of ``text`` (split at stop words, filler and
    punctuation), then participant names: what a cue may be made of. Constraining a
    small model's keywords to these makes them grounded by construction."""
    out: list[str] = []
    run: list[str] = []
    last_end = 0

    def flush() -> None:
        if run:
            out.append(" ".join(run[:4]))
            run.clear()

    for m in _TOKEN.finditer(re.sub(r"\[image: ", "[image ", text)):
        w = m.group(0)
        low = w.lower().replace("’", "'")
        if text[last_end : m.start()].strip():  # punctuation between words
            flush()
        last_end = m.end()
        if low in STOPWORDS or low in _FILLER or low in _BREAK or low.split("'")[0] in STOPWORDS or low == "image":
            flush()
        else:
            run.append(w)
    flush()
    people = [n for n in names if n]
    return list(dict.fromkeys([*out, *people]))[:limit]


def keyword_memory_type(text: str, default: str | None = "event") -> str | None:
    """CABLE's fallback: the first of state_change, plan, opinion whose phrases occur; else ``default``."""
    for name, pattern in _TYPE_CUES:
        if pattern.search(text):
            return name
    return default


def clean_label(label: object, max_words: int = 4) -> str | None:
    """A tag, relation or aspect: lower-case words, at most ``max_words``, else None."""
    if not isinstance(label, str):
        return None
    words = re.findall(r"[a-z][a-z'-]*", label.lower().replace("_", " "))
    if not words or len(words) > max_words:
        return None
    out = " ".join(words)
    return out if len(out) <= 40 else None


def clean_phrase(value: object, max_words: int = 12) -> str | None:
    if not isinstance(value, str):
        return None
    text = " ".join(value.split()).strip(" .,;:!?\"'")
    if not text or len(text.split()) > max_words or len(text) > 120:
        return None
    return text


def ground(phrase: str, text: str, toks: Sequence[Token] | None = None) -> tuple[int, int] | None:
    """The span of ``text`` that supports ``phrase``, or None.

    The phrase verbatim (ignoring case) wins; otherwise every content word of the
    phrase must match a word of the text by stem, and the span is the tightest window
    holding one match of each. A phrase with no content word (``it``, ``the one``) is
    never supported."""
    words = content_words(phrase)
    if not words:
        return None
    at = text.lower().find(phrase.lower())
    if at >= 0:
        return at, at + len(phrase)
    toks = tokens(text) if toks is None else toks
    hits: list[list[Token]] = []
    for w in words:
        s = stem(w)
        found = [t for t in toks if t.stem == s]
        if not found:
            return None
        hits.append(found)
    best: tuple[int, int] | None = None
    for anchor in hits[0]:
        lo, hi = anchor.start, anchor.end
        for options in hits[1:]:
            near = min(options, key=lambda t: abs(t.start - anchor.start))
            lo, hi = min(lo, near.start), max(hi, near.end)
        if best is None or hi - lo < best[1] - best[0]:
            best = (lo, hi)
    return best


def resolve_person(name: object, speaker: str, people: Sequence[str], text: str) -> str | None:
    """A subject/person: the speaker for first-person words, a known participant, or a
    name that occurs in the turn; else None (not supported)."""
    if not isinstance(name, str):
        return None
    n = " ".join(name.split()).strip(" .,;:!?\"'")
    if not n:
        return None
    low = n.lower()
    if low in _FIRST_PERSON:
        return speaker or None
    for p in (speaker, *people):
        if p and (low == p.lower() or low == p.lower().split()[0]):
            return p
    return n if ground(n, text) is not None else None
