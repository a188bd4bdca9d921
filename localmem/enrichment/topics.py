"""The topic layer: turns of a session grouped into labelled topics (MRAgent 3.2).

A ``topics`` job (in the durable ``jobs`` table, kind ``topics``) is queued per session
whose turns are not all in a topic yet; its ``turn_id`` is the session's newest turn,
so new turns in a session queue a new job (incremental). Running a job:

- the session's unassigned turns, in order, extend its last topic while they stay
  similar to it (embedding cosine to the topic's mean >= ``SIMILAR``) and it has fewer
  than ``MAX_TURNS`` turns; otherwise they start a new topic;
- each new or grown topic gets a short label and summary from the model (one
  schema-constrained call), or without a model its top keywords as the label and its
  speakers and dates as the summary; a refused reply (``localmem/models/replies.py``)
  or a model error is logged (``logging.warning``), counted (``label_failures``) and
  costs the label only: the keywords label the topic;
- topics, their member turns, the call log rows and ``done`` commit in one
  transaction (``localmem/storage/layers/topics.py``, each topic through the door for
  changes), which also clears each touched topic's ``themed`` flag: the
  cross-session theme pass (``localmem/enrichment/themes.py``), run after the jobs,
  picks the topic up from that flag.

Jobs go through the queue's protocol like every kind (``localmem/storage/layers/queue.py``):
claimed one at a time under a lease, never while another job of the same session is
running (``exclusive``), finished only while this worker still holds the claim, and
the write checks that the turns it adds are still in no topic (a claim that lapsed
while another worker did the session); otherwise the attempt fails and is retried.
Two workers in two processes therefore never group a turn twice.

Topics here are rows of kind ``session``; themes share the table (kind ``theme``) and
are never grown or relabelled by this module.
"""

from __future__ import annotations

import logging
import re
from collections import Counter

import numpy as np

from localmem.enrichment.stats import TopicStats
from localmem.errors import LocalmemError
from localmem.models.llm import Generator
from localmem.models.replies import CallRecord, ReplyError, parse_reply, record
from localmem.storage.layers import cues
from localmem.storage.layers import topics as stored
from localmem.storage.layers.queue import Job, claim, fail
from localmem.storage.reads import queries
from localmem.storage.vectors.stored import turn_vectors
from localmem.storage.write.changes import TopicWrite
from localmem.storage.write.store import Store
from localmem.util.clock import now_iso

log = logging.getLogger(__name__)

KIND = "topics"
SIMILAR = 0.25
MAX_TURNS = 12
LABEL_TOKENS = 120
SCHEMA = {
    "type": "object",
    "properties": {"label": {"type": "string", "maxLength": 60}, "summary": {"type": "string", "maxLength": 300}},
    "required": ["label", "summary"],
}
PROMPT = """You name the topic of a stretch of conversation. Reply with JSON: "label" (two to five words)
and "summary" (one sentence saying who talked about what)."""


def enqueue(store: Store) -> int:
    """Queue a topics job for each session with turns outside every topic."""
    return stored.enqueue_jobs(store.conn, KIND)


def keywords(store: Store, turn_ids: list[int]) -> Counter[str]:
    """Keyword counts of some turns: extracted keyword cues, else the turns' own words."""
    kws = [k.lower() for k in cues.keyword_texts(store.conn, turn_ids)]
    if not kws:
        rows = queries.turn_rows(store.conn, turn_ids).values()
        # speakers' names and contractions ("i'm", "it's") are in every topic of a chat
        skip = queries.STOPWORDS | {w for r in rows for w in r.speaker.lower().split()}
        for r in rows:
            words = (w.removesuffix("'s") for w in re.findall(r"[a-z][a-z']{2,}", r.text.lower()))
            kws += [w for w in words if "'" not in w and w not in skip]
    return Counter(kws)


def _label_free(store: Store, turn_ids: list[int]) -> tuple[str, str]:
    """A label from the most frequent keywords, a summary from speakers and date."""
    top = [w for w, _ in keywords(store, turn_ids).most_common(3)]
    label = ", ".join(top) or "conversation"
    rows = queries.turn_rows(store.conn, turn_ids)
    speakers = sorted({r.speaker for r in rows.values() if r.speaker})
    times = sorted(r.ts for r in rows.values() if r.ts)
    when = f" on {times[0][:10]}" if times else ""
    return label, f"{len(turn_ids)} turns{when} by {', '.join(speakers) or 'unknown'} about {label}."


def _label_model(
    store: Store, gen: Generator, turn_ids: list[int], records: list[CallRecord]
) -> tuple[str, str] | None:
    rows = queries.turn_rows(store.conn, turn_ids)
    lines = [f"{rows[t].speaker}: {rows[t].text[:300]}" for t in turn_ids if t in rows][:MAX_TURNS]
    return ask_label(gen, PROMPT, lines, "topic-label", records)


def ask_label(
    gen: Generator, prompt: str, lines: list[str], purpose: str, records: list[CallRecord]
) -> tuple[str, str] | None:
    """One schema-constrained call for a label and a summary of ``lines``, recorded in
    ``records``; None when the model fails or its reply is refused (logged; the caller
    counts it and labels without the model)."""
    msgs = [{"role": "system", "content": prompt}, {"role": "user", "content": "\n".join(lines)}]
    try:
        out = gen.generate_json(msgs, SCHEMA, max_tokens=LABEL_TOKENS, temperature=0.0)
    except LocalmemError as exc:
        log.warning("%s: the model failed (%s); keyword label instead", purpose, exc)
        return None
    try:
        data, status = parse_reply(out.text, SCHEMA), "ok"
    except ReplyError as exc:
        data, status = None, exc.reason
        log.warning("%s: %s; keyword label instead", purpose, exc)
    records.append(record(purpose, gen.model_id, msgs, out.text, status, (out.prompt_tokens, out.generated_tokens)))
    if data is None:
        return None
    label, summary = str(data["label"]).strip(), str(data["summary"]).strip()
    return label[:60], summary[:300]


def vectors(store: Store, turn_ids: list[int]) -> np.ndarray:
    """The turns' stored vectors (zero rows for turns without one)."""
    return turn_vectors(store.conn, turn_ids, store.embedder.dim)


def group(store: Store, session_id: int) -> list[tuple[int | None, list[int]]]:
    """(topic id or None for a new topic, turn ids to add) for a session's unassigned turns."""
    rows = stored.session_turn_topics(store.conn, session_id)
    last_topic: int | None = None
    last_members: list[int] = []
    todo: list[int] = []
    for tid, topic in rows:
        if topic is not None:
            if topic != last_topic:
                last_topic, last_members = topic, []
            last_members.append(tid)
        else:
            todo.append(tid)
    if not todo:
        return []
    vecs = dict(zip(last_members + todo, vectors(store, last_members + todo), strict=True))
    groups: list[tuple[int | None, list[int]]] = []
    current: tuple[int | None, list[int]] = (last_topic, [])
    members = list(last_members)
    for tid in todo:
        if members:
            centroid = np.mean([vecs[m] for m in members], axis=0)
            norm = float(np.linalg.norm(centroid)) or 1.0
            sim = float(vecs[tid] @ centroid) / norm
            if sim < SIMILAR or len(members) >= MAX_TURNS:
                if current[1]:
                    groups.append(current)
                current, members = (None, []), []
        current[1].append(tid)
        members.append(tid)
    if current[1]:
        groups.append(current)
    return groups


def run_job(store: Store, job: Job, gen: Generator | None, stats: TopicStats, max_attempts: int) -> None:
    """Group and label the unassigned turns of the session of a claimed ``job``, then
    write them and finish the job in one transaction (see the module docstring)."""
    session = stored.session_of(store.conn, job.turn_id)
    plan = group(store, session) if session is not None else []
    writes: list[stored.Planned] = []
    records: list[CallRecord] = []
    now = now_iso()
    for topic, add in plan:
        members = add
        if topic is not None:
            members = stored.members(store.conn, topic) + add
        got = _label_model(store, gen, members, records) if gen is not None else None
        stats.model_calls += gen is not None
        stats.label_failures += gen is not None and got is None
        label, summary = got or _label_free(store, members)
        model = gen.model_id if gen is not None and got is not None else None
        writes.append((TopicWrite(topic, "session", label, summary, now, add_turns=tuple(add)), model))
    state = stored.commit_session_topics(store.conn, job, records, writes, max_attempts)
    if state == "failed":
        stats.failed += 1
        return
    if state == "lost":
        return  # reclaimed by another worker after our lease lapsed: its result counts
    for write, _model in writes:
        stats.topics_created += write.id is None
        stats.topics_grown += write.id is not None
        stats.turns += len(write.add_turns)
    stats.jobs += 1


def run_topic_jobs(store: Store, gen: Generator | None = None, *, max_attempts: int | None = None) -> TopicStats:
    """Queue what is missing and run every topics job this worker can claim, oldest
    first; a job that fails (``LocalmemError``) is a failed attempt of the queue."""
    enqueue(store)
    stats = TopicStats()
    max_attempts = max_attempts or store.settings.job_attempts
    while jobs := claim(store.conn, 1, kind=KIND, batch=False, exclusive=True):
        try:
            run_job(store, jobs[0], gen, stats, max_attempts)
        except LocalmemError as exc:
            fail(store.conn, jobs[0], f"{type(exc).__name__}: {exc}", max_attempts)
            stats.failed += 1
    return stats
