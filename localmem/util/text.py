"""Pure text helpers: token counting, sentence spans, timestamps, lexical queries.

Invariants: ``count_tokens`` is the one token counter for budgets everywhere
(ceil(words x 1.3)); ``sentence_spans`` returns non-overlapping spans that cover every
non-space character of the text; ``parse_time`` returns naive ISO-8601 strings
(timezone-aware inputs are converted to UTC first) so that string order is time order.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime

TOKENS_PER_WORD = 1.3


def count_words(text: str) -> int:
    return len(text.split())


def tokens_for_words(words: int) -> int:
    return math.ceil(words * TOKENS_PER_WORD)


def count_tokens(text: str) -> int:
    return tokens_for_words(count_words(text))


def words_for_tokens(tokens: int) -> int:
    """The most words whose token count stays within ``tokens``."""
    words = int(tokens / TOKENS_PER_WORD)
    while words > 0 and tokens_for_words(words) > tokens:
        words -= 1
    while tokens_for_words(words + 1) <= tokens:
        words += 1
    return words


# A sentence ends at . ! ? followed by space and a capital, digit, quote or bracket
# (measured on LoCoMo against a looser splitter that merged short pieces: this one
# gave better cue retrieval), or at a blank line. An image caption appended as
# "[image: ...]" is a cue of its own.
_SENT_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'\[])|\n\s*\n")
_CAPTION = re.compile(r"\s*\[image: [^\]]*\]\s*$")


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of the sentences of ``text`` (each stripped of white space)."""
    cap = _CAPTION.search(text)
    body_end = cap.start() if cap else len(text)
    spans: list[tuple[int, int]] = []
    start = 0
    for m in _SENT_END.finditer(text, 0, body_end):
        spans.append(_strip(text, start, m.start()))
        start = m.end()
    spans.append(_strip(text, start, body_end))
    if cap:
        spans.append(_strip(text, cap.start(), len(text)))
    return [(a, b) for a, b in spans if a < b]


def _strip(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


_TIME_FORMATS = (
    "%Y-%m-%dT%H:%M:%S",
    "%Y-%m-%dT%H:%M",
    "%Y-%m-%d %H:%M:%S",
    "%Y-%m-%d %H:%M",
    "%Y-%m-%d",
    "%Y/%m/%d %H:%M",  # LongMemEval, after the weekday is removed
    "%Y/%m/%d",
    "%I:%M %p on %d %B, %Y",  # LoCoMo: "1:56 pm on 8 May, 2023"
    "%I:%M %p on %d %b, %Y",
    "%d %B %Y",
    "%d %B, %Y",
    "%B %d, %Y",
)
_WEEKDAY = re.compile(r"\s*\((mon|tue|wed|thu|fri|sat|sun)[a-z]*\)\s*", re.IGNORECASE)


def parse_time(value: str | float | int) -> str:
    """Normalise a timestamp to naive ISO-8601; raise ValueError naming the value."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return datetime.fromtimestamp(float(value), tz=UTC).replace(tzinfo=None).isoformat(timespec="seconds")
    raw = str(value).strip()
    text = _WEEKDAY.sub(" ", raw).strip()
    dt: datetime | None = None
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        for fmt in _TIME_FORMATS:
            try:
                dt = datetime.strptime(text, fmt)
                break
            except ValueError:
                continue
    if dt is None:
        raise ValueError(f"unrecognised date/time {raw!r}")
    if dt.tzinfo is not None:
        dt = dt.astimezone(UTC).replace(tzinfo=None)
    return dt.isoformat(timespec="seconds")


def display_time(iso: str | None) -> str:
    """``2023-05-08T13:56:00`` -> ``2023-05-08 13:56`` (what contexts show)."""
    if not iso:
        return "undated"
    return iso[:16].replace("T", " ")


_WORD = re.compile(r"[\w']+", re.UNICODE)


def fts_query(text: str, stopwords: frozenset[str] = frozenset()) -> str:
    """An FTS5 MATCH expression that ORs the query's words, each quoted, so user text
    can never be read as FTS5 syntax."""
    words = []
    seen = set()
    for w in _WORD.findall(text.lower()):
        w = w.strip("'")
        if not w or w in stopwords or w in seen:
            continue
        seen.add(w)
        words.append('"' + w.replace('"', '""') + '"')
    return " OR ".join(words)


def line_word_cost(words: int, speaker: str) -> int:
    """Words of a turn's context line ("Speaker: text") given the turn's own word count:
    the one definition the packer and the turn mirror share."""
    return words + len(speaker.split())
