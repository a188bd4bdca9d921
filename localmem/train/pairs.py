"""Training pairs: a query, the turn that answers it, and turns that do not.

Three kinds, all cut from the training file only:
- ``question``: a LongMemEval question and each of its evidence turns (negatives are
  mined later from the same haystack: :mod:`localmem.train.mining`);
- ``asked``: a wh-question the assistant asked about the user ("What's your budget for
  the gift?") put in the user's words ("What's my budget for the gift?"), and the user
  turn that answered it; negatives: the session's other user turns;
- ``sentence``: a first-person statement of a user turn and that turn without it (the
  inverse cloze task: the rest of the turn must still be found by what it left out);
  negatives: the session's other user turns.

Invariants: every pair's positive and negatives are turns of the corpus (``doc`` holds a
positive's text when it is not the stored turn's, as in ``sentence``); a query is never
a substring of its positive; the choice of pairs depends only on the corpus and ``seed``.
"""

from __future__ import annotations

import itertools
import random
import re
from dataclasses import dataclass

from localmem.train.corpus import Corpus, Turn, make_turn

WH = re.compile(r"^(what|which|where|when|how|who|why)\b", re.IGNORECASE)
FIRST_PERSON = re.compile(r"\b(i|i'm|i've|i'd|my|me|we|our)\b", re.IGNORECASE)
# "you" is the subject after these words (and at the start): "did you" -> "did I".
_SUBJECT_BEFORE = r"\b(do|did|does|have|has|had|will|would|can|could|should|when|if|that|as|where|what|how|why|and)\s+"
_SWAPS = (
    (re.compile(r"\bare you\b", re.I), "am I"),
    (re.compile(r"\bwere you\b", re.I), "was I"),
    (re.compile(r"\byou are\b", re.I), "I am"),
    (re.compile(r"\byou were\b", re.I), "I was"),
    (re.compile(r"\byou're\b", re.I), "I'm"),
    (re.compile(r"\byou've\b", re.I), "I've"),
    (re.compile(r"\byou'd\b", re.I), "I'd"),
    (re.compile(r"\byou'll\b", re.I), "I'll"),
    (re.compile(r"\byourself\b", re.I), "myself"),
    (re.compile(r"\byours\b", re.I), "mine"),
    (re.compile(r"\byour\b", re.I), "my"),
    (re.compile(_SUBJECT_BEFORE + r"you\b", re.I), r"\1 I"),
    (re.compile(r"^you\b", re.I), "I"),
    (re.compile(r"\byou\b", re.I), "me"),
)


@dataclass(frozen=True)
class Pair:
    query: str
    positive: str  # a turn key
    negatives: tuple[str, ...]
    kind: str  # "question" | "asked" | "sentence"
    doc: Turn | None = None  # the positive as trained on, when not the stored turn


def in_user_words(question: str) -> str:
    """An assistant's question about the user, as the user would ask it."""
    out = question
    for pattern, repl in _SWAPS:
        out = pattern.sub(repl, out)
    return out


def question_pairs(corpus: Corpus) -> list[Pair]:
    return [Pair(q.text, key, (), "question") for q in corpus.questions for key in q.evidence]


def _user_turns(corpus: Corpus, session: str, min_words: int = 8) -> list[str]:
    return [
        k for k in corpus.sessions[session] if corpus.turns[k].role == "user" and _words(corpus.turns[k]) >= min_words
    ]


def _words(turn: Turn) -> int:
    return len(turn.text.split())


def asked_pairs(corpus: Corpus, min_words: int = 5, max_words: int = 25) -> list[Pair]:
    """An assistant's wh-question about the user and the user turn right after it."""
    out: list[Pair] = []
    for session, keys in corpus.sessions.items():
        users = _user_turns(corpus, session)
        for a, b in itertools.pairwise(keys):
            ta = corpus.turns[a]
            if ta.role != "assistant" or b not in users:
                continue
            for s, e in ta.spans:
                sent = ta.doc[s:e]
                if not (sent.endswith("?") and WH.match(sent) and re.search(r"\byou", sent, re.I)):
                    continue
                if min_words <= len(sent.split()) <= max_words:
                    negs = tuple(k for k in users if k != b)
                    out.append(Pair(in_user_words(sent), b, negs, "asked"))
    return out


def sentence_pairs(corpus: Corpus, min_words: int = 6, max_words: int = 40) -> list[Pair]:
    """A first-person statement of a user turn, and the turn without it."""
    out: list[Pair] = []
    for session in corpus.sessions:
        users = _user_turns(corpus, session)
        for key in users:
            turn = corpus.turns[key]
            if len(turn.spans) < 2:
                continue
            for s, e in turn.spans:
                sent = turn.doc[s:e]
                if sent.endswith("?") or not FIRST_PERSON.search(sent):
                    continue
                if not min_words <= len(sent.split()) <= max_words:
                    continue
                rest = (turn.doc[turn.text_start : s] + turn.doc[e:]).strip()
                if len(rest.split()) < min_words:
                    continue
                doc = make_turn(key, session, turn.role, rest, turn.ts)
                negs = tuple(k for k in users if k != key)
                out.append(Pair(sent, key, negs, "sentence", doc))
    return out


def sample(pairs: list[Pair], n: int, seed: int) -> list[Pair]:
    """``n`` of ``pairs`` drawn without replacement (all when there are fewer)."""
    if len(pairs) <= n:
        return list(pairs)
    return random.Random(seed).sample(pairs, n)
