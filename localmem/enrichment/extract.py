"""Turn -> cues, tags, facts and memory type, with a local model. No SQL here.

Per batch of turns of one session (CueMem 4.1, MRAgent 3.1-3.3, CABLE 3.1.1):
1. the low-information filter (``grounding.low_information``): greetings and
   acknowledgements get no model call and no extracted cues;
2. the remaining turns go to the model together, a few per call (one prompt, one JSON
   object with one entry per turn, constrained by the schema below);
3. the reply is read by ``localmem/models/replies.py`` (``parse_entries``): a turn whose
   entry is missing, cut off or empty gets ``error`` set and no cues (its job is a
   failed attempt, see that module for what fails); every call leaves a
   ``CallRecord`` in ``BatchResult.records`` for the call log;
4. each entry is validated and grounded in its turn (``localmem/enrichment/grounding.py``); what
   is not supported is rejected and counted, duplicates are dropped;
5. relative dates ("yesterday", "last week") become date cues resolved from the
   turn's time (``localmem/util/dates.py``), without the model;
6. the memory type is the model's when it gave one of the four, else the keyword
   fallback (CABLE E.1).

Whatever the model writes, the result is well-formed: junk output is a named failure
of the turns it should have covered, never an empty success. The prompt is written for this project; the papers' prompts were read as
references only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from localmem.enrichment.grounding import (
    MEMORY_TYPES,
    TAGS,
    candidate_phrases,
    clean_label,
    clean_phrase,
    content_words,
    ground,
    keyword_memory_type,
    low_information,
    resolve_person,
    tokens,
)
from localmem.models.llm import Generator, Message
from localmem.models.replies import CallRecord, ReplyError, parse_entries, record, status_of
from localmem.util import dates

TEMPERATURE = 0.1  # CABLE's typing temperature; extraction wants the likeliest reading
MAX_KEYWORDS, MAX_TRIPLES, MAX_FACTS = 3, 1, 1
TOKENS_PER_TURN = 100  # generation cap per turn in a call (the target is <= 150 on average)
MAX_TOKEN_SCALE = 4  # a retried turn's cap grows x2 per failed attempt, up to x4
PROMPT_CHARS_PER_TURN = 1200  # a longer turn is cut in the prompt (grounding still sees all of it)


@dataclass(frozen=True)
class TurnInput:
    turn_id: int
    speaker: str
    text: str
    ts: str | None


@dataclass(frozen=True)
class ExtractedCue:
    kind: str  # triple / keyword / fact
    text: str
    start: int
    end: int
    subject: str | None = None
    relation: str | None = None
    object: str | None = None
    tags: tuple[str, ...] = ()


@dataclass
class TurnExtraction:
    turn_id: int
    memory_type: str | None
    type_source: str  # model / keyword / none
    low_info: bool
    cues: list[ExtractedCue] = field(default_factory=list)
    rejected: int = 0
    duplicates: int = 0
    error: str = ""  # why the model's reply gave this turn nothing usable; "" = it did


@dataclass
class BatchResult:
    turns: list[TurnExtraction]
    calls: int = 0
    prompt_tokens: int = 0
    generated_tokens: int = 0
    unparsed_calls: int = 0  # the model's reply was not (all) the JSON asked for
    records: list[CallRecord] = field(default_factory=list)  # one per call, for the call log

    @property
    def failed(self) -> list[TurnExtraction]:
        return [t for t in self.turns if t.error]


SYSTEM_PROMPT = """You index chat messages for a personal memory. For each numbered message m1, m2, ... give:
- "type": event (something happened), opinion (a view, like or dislike), plan (an intention for the future) or state_change (something about a person changed: home, job, relationship, health);
- "keywords": up to 3 of the message's most telling names, places, things or activities, each with a "tag" saying what it is;
- "triples": the main fact the message states (or none), as subject "s", a short relation "r" in the message's words, object "o";
- "facts": at most 1 lasting fact about a person: "person", "aspect", "value".
Use only what the message says; leave triples and facts empty when it states none."""


def _enum(values: Sequence[str]) -> dict[str, Any]:
    return {"enum": list(values)} if values else {"type": "string", "maxLength": 0}


def _list(item: dict[str, Any], most: int, allowed: bool = True, least: int = 0) -> dict[str, Any]:
    if not allowed:
        return {"type": "array", "maxItems": 0, "items": item}
    return {"type": "array", "minItems": least, "maxItems": most, "items": item}


def schema(batch: Sequence[TurnInput], people: Sequence[str] = ()) -> dict[str, Any]:
    """The JSON schema of one reply: one entry per message (``m1``, ``m2``, ...).
    Keywords, triple objects and fact values are constrained to phrases of their own
    message (``candidate_phrases``), subjects and persons to those phrases and the
    participants, tags and aspects to a fixed vocabulary; relations are short free text."""

    def obj(props: dict[str, Any]) -> dict[str, Any]:
        return {"type": "object", "properties": props, "required": list(props)}

    entries: dict[str, Any] = {}
    for i, t in enumerate(batch, 1):
        cands = candidate_phrases(t.text[:PROMPT_CHARS_PER_TURN])
        persons = list(dict.fromkeys(p for p in (t.speaker, *people) if p))
        has = bool(cands)
        entries[f"m{i}"] = obj(
            {
                "type": {"enum": list(MEMORY_TYPES)},
                # at least one keyword: small models otherwise answer [] for everything
                "keywords": _list(obj({"k": _enum(cands), "tag": {"enum": list(TAGS)}}), MAX_KEYWORDS, has, 1),
                "triples": _list(
                    obj({"s": _enum([*persons, *cands]), "r": {"type": "string", "maxLength": 24}, "o": _enum(cands)}),
                    MAX_TRIPLES,
                    has,
                ),
                "facts": _list(
                    obj({"person": _enum(persons), "aspect": {"enum": list(TAGS)}, "value": _enum(cands)}),
                    MAX_FACTS,
                    has and bool(persons),
                ),
            }
        )
    return obj(entries)


def messages(batch: Sequence[TurnInput]) -> list[Message]:
    when = next((t.ts for t in batch if t.ts), None)
    head = f"Date: {when[:10]}\n" if when else ""
    lines = [
        f"m{i}. {t.speaker or 'Someone'}: {' '.join(t.text[:PROMPT_CHARS_PER_TURN].split())}"
        for i, t in enumerate(batch, 1)
    ]
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": head + "\n".join(lines)},
    ]


def parse(
    text: str, batch: Sequence[TurnInput], people: Sequence[str] = (), sch: dict[str, Any] | None = None
) -> tuple[dict[int, Any], dict[int, str]]:
    """The reply's entries by turn id, and the reason per turn that got none (see
    ``localmem/models/replies.py``; ``sch``: the call's schema when already built).
    Raises ``ReplyError`` when the reply as a whole is unusable."""
    entries, failed = parse_entries(text, sch or schema(batch, people))
    by_key = {f"m{i}": t.turn_id for i, t in enumerate(batch, 1)}
    return {by_key[k]: e for k, e in entries.items()}, {by_key[k]: r for k, r in failed.items()}


def _items(entry: dict[str, Any], key: str, limit: int) -> list[dict[str, Any]]:
    raw = entry.get(key)
    if not isinstance(raw, list):
        return []
    return [x for x in raw[:limit] if isinstance(x, dict)]


def ground_entry(entry: dict[str, Any], turn: TurnInput, people: Sequence[str]) -> TurnExtraction:
    """Validate and ground one turn's entry; rejected and duplicate cues are counted."""
    mtype = entry.get("type")
    if mtype in MEMORY_TYPES:
        result = TurnExtraction(turn.turn_id, str(mtype), "model", False)
    else:
        result = TurnExtraction(turn.turn_id, keyword_memory_type(turn.text), "keyword", False)
    text, toks = turn.text, tokens(turn.text)
    seen: set[tuple[str, str]] = set()

    def keep(cue: ExtractedCue | None) -> None:
        if cue is None:
            result.rejected += 1
            return
        key = (cue.kind, cue.text.casefold())
        if key in seen:
            result.duplicates += 1
            return
        seen.add(key)
        result.cues.append(cue)

    for kw in _items(entry, "keywords", MAX_KEYWORDS):
        phrase = clean_phrase(kw.get("k"), max_words=6)
        span = ground(phrase, text, toks) if phrase else None
        if phrase is None or span is None or len(phrase) > 0.8 * len(text):
            keep(None)
            continue
        if phrase.casefold() in {p.casefold() for p in (turn.speaker, *people) if p}:
            result.duplicates += 1  # the speaker's own name says nothing the turn line does not
            continue
        tag = clean_label(kw.get("tag"), max_words=2)
        keep(ExtractedCue("keyword", phrase, *span, tags=(tag,) if tag else ()))

    for tr in _items(entry, "triples", MAX_TRIPLES):
        subj = resolve_person(tr.get("s"), turn.speaker, people, text)
        rel = clean_label(tr.get("r"), max_words=5)
        obj = clean_phrase(tr.get("o"))
        span = ground(obj, text, toks) if obj else None
        if subj is None or rel is None or obj is None or span is None or obj.casefold() == subj.casefold():
            keep(None)
            continue
        if content_words(rel) and ground(rel, text, toks) is None:
            keep(None)  # a relation with content words must use the message's words
            continue
        keep(ExtractedCue("triple", f"{subj} {rel} {obj}", *span, subject=subj, relation=rel, object=obj))

    for fa in _items(entry, "facts", MAX_FACTS):
        person = resolve_person(fa.get("person"), turn.speaker, people, text)
        aspect = clean_label(fa.get("aspect"), max_words=3)
        value = clean_phrase(fa.get("value"))
        span = ground(value, text, toks) if value else None
        if person is None or aspect is None or value is None or span is None:
            keep(None)
            continue
        names = {p.casefold() for p in (turn.speaker, *people) if p}
        if value.casefold() in names or (person != turn.speaker and ground(person, text, toks) is None):
            keep(None)  # a fact is about someone the message is by or names, and says more than a name
            continue
        keep(
            ExtractedCue(
                "fact",
                f"{person} {aspect}: {value}",
                *span,
                subject=person,
                relation=aspect,
                object=value,
                tags=(aspect,),
            )
        )
    return result


def date_cues(turn: TurnInput) -> list[ExtractedCue]:
    return [
        ExtractedCue("keyword", f"{d.label} ({d.phrase})", d.start, d.end, tags=("date",))
        for d in dates.resolve(turn.text, turn.ts)
    ]


def chunks(turns: Sequence[TurnInput], size: int) -> list[list[TurnInput]]:
    """Consecutive groups of at most ``size`` turns and about ``size`` average turns of text."""
    out: list[list[TurnInput]] = []
    cur: list[TurnInput] = []
    chars = 0
    for t in turns:
        n = min(len(t.text), PROMPT_CHARS_PER_TURN)
        if cur and (len(cur) >= size or chars + n > size * 400):
            out.append(cur)
            cur, chars = [], 0
        cur.append(t)
        chars += n
    if cur:
        out.append(cur)
    return out


def extract(
    gen: Generator,
    turns: Sequence[TurnInput],
    *,
    people: Sequence[str] = (),
    batch_size: int = 6,
    attempt: int = 1,
) -> BatchResult:
    """Extract cues for ``turns`` (best: consecutive turns of one session). ``attempt``:
    the jobs' attempt number; a retry gets twice the token cap per earlier attempt (at
    most ``MAX_TOKEN_SCALE`` times), so a reply cut at the cap can complete."""
    scale = min(2 ** max(attempt - 1, 0), MAX_TOKEN_SCALE)
    people = list(people) or sorted({t.speaker for t in turns if t.speaker})
    by_id: dict[int, TurnExtraction] = {}
    informative: list[TurnInput] = []
    for t in turns:
        if low_information(t.text, people):
            by_id[t.turn_id] = TurnExtraction(t.turn_id, None, "none", True)
        else:
            informative.append(t)
    result = BatchResult([])
    for group in chunks(informative, max(1, batch_size)):
        msgs, sch = messages(group), schema(group, people)
        out = gen.generate_json(
            msgs,
            sch,
            max_tokens=TOKENS_PER_TURN * scale * len(group) + 16,
            temperature=TEMPERATURE,
        )
        result.calls += 1
        result.prompt_tokens += out.prompt_tokens
        result.generated_tokens += out.generated_tokens
        try:
            entries, failed = parse(out.text, group, people, sch)
            status = status_of({str(k): v for k, v in failed.items()})
        except ReplyError as exc:
            entries, failed, status = {}, {t.turn_id: str(exc) for t in group}, exc.reason
        result.unparsed_calls += status != "ok"
        result.records.append(
            record("extract", gen.model_id, msgs, out.text, status, (out.prompt_tokens, out.generated_tokens))
        )
        for t in group:
            if t.turn_id in entries:
                by_id[t.turn_id] = ground_entry(entries[t.turn_id], t, people)
            else:
                by_id[t.turn_id] = TurnExtraction(t.turn_id, None, "none", False, error=failed[t.turn_id])
    for t in turns:
        ex = by_id[t.turn_id]
        if ex.error:
            result.turns.append(ex)
            continue
        have = {(c.kind, c.text.casefold()) for c in ex.cues}
        for cue in date_cues(t):
            if (cue.kind, cue.text.casefold()) not in have:
                ex.cues.append(cue)
        result.turns.append(ex)
    return result
