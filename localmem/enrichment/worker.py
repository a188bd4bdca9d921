"""The enrichment worker: claims jobs from the durable queue and runs the step for
their kind (extraction, then CABLE's antecedent construction when enabled), and the
topic and theme passes when the queue is idle.

Invariants: every job kind (extract, antecedent, topics) goes through the queue's
claim/finish/fail protocol (``localmem/storage/layers/queue.py``); a reply the model got wrong
(``localmem/models/replies.py``) is a failed attempt of the jobs it should have
served, recorded by the step with its results (back-off, then parked); a batch whose
model call raised is retried turn by turn under the same claim so one bad turn cannot
fail its neighbours; model calls happen outside any transaction (inside the steps).
A busy database never stops the worker: claims, failures and a step's writes wait out
another process's lock with back-off (logged once per wait); a step whose write met the
lock runs again under the same claim (its model calls too).
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from typing import TypeVar

from localmem.enrichment.antecedent import KIND as ANTECEDENT
from localmem.enrichment.antecedent import run_jobs as antecedent_jobs
from localmem.enrichment.enrich import enrich_jobs
from localmem.enrichment.stats import TopicStats, WorkerStats
from localmem.enrichment.themes import run_themes
from localmem.enrichment.topics import run_topic_jobs
from localmem.errors import LocalmemError, StoreError
from localmem.models.llm import Generator
from localmem.storage.engine.retry import WAITING, StillLocked, forever, retry_locked
from localmem.storage.layers import topics
from localmem.storage.layers.queue import KIND, Job, claim, fail, next_due
from localmem.storage.write.store import Store

log = logging.getLogger(__name__)
R = TypeVar("R")
POLL_S = 1.0
DRAIN_POLL_S = 5.0  # ``drain`` looks again at least this often while it waits out a back-off


def run_worker(
    store: Store,
    gen: Generator,
    *,
    stop: threading.Event | None = None,
    once: bool = False,
    until_empty: bool = False,
    drain: bool = False,
    batch: int | None = None,
    max_attempts: int | None = None,
    progress: Callable[[int], None] | None = None,
    on_batch: Callable[[WorkerStats], None] | None = None,
) -> WorkerStats:
    """Process jobs until ``stop`` is set. ``once``: one claimed batch, then return;
    ``until_empty``: return when nothing is ready; ``drain`` (``localmem enrich``): also
    wait out the back-off of failed jobs and retry them, so that it returns when every
    job is done or parked (or held by another live worker)."""
    batch = batch or store.settings.extract_batch
    max_attempts = max_attempts or store.settings.job_attempts
    stats = WorkerStats()
    load = getattr(gen, "load", None)
    if callable(load):
        load()  # a model that cannot load must fail the worker, not park every job
    while stop is None or not stop.is_set():
        # Extraction first: it gives a turn the memory type its antecedent job needs.
        step: Callable[[Store, Generator, list[Job], WorkerStats, int], int] = enrich_jobs
        try:
            jobs = _patient(lambda: claim(store.conn, batch), stop)
            if not jobs and store.settings.cable.enabled:
                step = antecedent_jobs
                jobs = _patient(lambda: claim(store.conn, 1, kind=ANTECEDENT), stop)
        except StillLocked:  # asked to stop while waiting for the lock
            break
        if not jobs:
            try:
                _patient(partial(_topics_when_idle, store, gen, max_attempts), stop)
            except StillLocked:
                break
            wait = _backoff_left(store) if drain else None
            if once or (until_empty and wait is None):
                break
            pause = POLL_S if wait is None else min(max(wait, 0.05), DRAIN_POLL_S)
            (stop.wait(pause) if stop is not None else time.sleep(pause))
            continue
        try:
            done = _patient(partial(step, store, gen, jobs, stats, max_attempts), stop)
        except StillLocked:
            break  # asked to stop while waiting; the claim lapses and the jobs are taken again
        except StoreError:
            raise  # the store's fault (a full disk, a read-only file), not the job's: no attempt spent
        except LocalmemError as exc:
            done = 0
            for job in jobs if len(jobs) == 1 else []:
                state = _patient(partial(fail, store.conn, job, f"{type(exc).__name__}: {exc}", max_attempts), None)
                stats.failed += 1
                stats.parked += state == "parked"
            if len(jobs) > 1:  # find the culprit: each turn on its own, still under our claim
                for job in jobs:
                    try:
                        done += _patient(partial(step, store, gen, [job], stats, max_attempts), None)
                    except StoreError:
                        raise
                    except LocalmemError as one:
                        state = _patient(
                            partial(fail, store.conn, job, f"{type(one).__name__}: {one}", max_attempts), None
                        )
                        stats.failed += 1
                        stats.parked += state == "parked"
        if progress and done:
            progress(done)
        if on_batch:
            on_batch(stats)
        if once:
            break
    return stats


def _patient(fn: Callable[[], R], stop: threading.Event | None) -> R:
    """``fn`` (a write), waiting out another process's lock with back-off for as long as it
    takes, or until ``stop`` is set (then ``StillLocked``); the wait is logged once."""
    waits = forever() if stop is None else itertools.takewhile(lambda _: not stop.is_set(), forever())
    return retry_locked(fn, waits, on_wait=lambda: log.warning(WAITING))


def _backoff_left(store: Store) -> float | None:
    """Seconds until the earliest failed job of a kind this worker runs is due again;
    None when no job waits on a back-off."""
    kinds = [KIND] + ([ANTECEDENT] if store.settings.cable.enabled else [])
    when = next_due(store.conn, kinds)
    if when is None:
        return None
    due = datetime.fromisoformat(when).replace(tzinfo=UTC)
    return (due - datetime.now(UTC)).total_seconds()


def _topics_when_idle(store: Store, gen: Generator, max_attempts: int) -> None:
    """The periodic topic layer: once extraction has caught up, group turns that are in
    no topic yet (after extraction, so labels can use the extracted keywords), and run
    the theme pass when topics await it (left over after a forget or a label cap). A
    topic failure is logged, never fatal to the worker: topics are a convenience layer."""
    if topics.has_work(store.conn):
        try:
            run_topics(store, gen)
        except StoreError:
            raise  # not a topic failure: the worker's caller reports it
        except LocalmemError as exc:
            log.warning("topic layer: %s", exc)


def run_topics(
    store: Store, gen: Generator | None = None, *, themes: bool = True, max_attempts: int | None = None
) -> TopicStats:
    """Run every topics job this worker can claim, then the cross-session theme pass
    over the topics that changed (unless ``themes`` is off)."""
    stats = run_topic_jobs(store, gen, max_attempts=max_attempts)
    if themes:
        stats.themes = run_themes(store, gen)
    return stats
