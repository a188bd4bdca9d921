"""A read's scope: a source or session (``scope="locomo:conv-26"``), or a project
(``scope="project:/home/me/app"``, ``query --project PATH``, a hook's working directory).

A project scope is not a plain filter. What was said in the project's sessions (run in
its root or a folder inside it, or in a clone of its repository) is visible as usual;
from every other session, only what a *person* said about themselves stays: the agents'
own turns there (``AGENT_SPEAKERS``: their replies, tool lines, a subagent's prompts) are
not visible, and of a person's turns only first-person statements (``about_themselves``:
"I prefer pnpm", "my name is Sam"; not "Which database should we use?") stay in the pool
(``retrieval.project_personal`` = "self"; "all" keeps every one), at
``retrieval.project_elsewhere`` (0.25) of their probability of being evidence. So a
preference or fact a person stated in one project is still recalled in another, while
another project's talk does not crowd out this one's (``localmem bench projects``; the
measurement behind both defaults is in docs/capture.md).

Invariants: resolving a path reads only git's files (``util.gitinfo``); a path that is not
in a repository is its own root; the same scope string gives the same sessions on every
call (no clock, no process state).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from localmem.errors import InputError
from localmem.records import ProjectScope
from localmem.storage.reads import queries
from localmem.storage.reads.queries import Filter
from localmem.storage.vectors.table_mirror import TurnMirror
from localmem.storage.write.store import Store
from localmem.util.gitinfo import repo_of

PREFIX = "project:"
# Speakers that are an agent, not a person: the coding agents' replies and tool lines,
# a Claude Code subagent and the agent that prompts it, chat exports' assistant side.
_FIRST_PERSON = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|my|me|mine|myself)\b", re.IGNORECASE)
AGENT_SPEAKERS = frozenset({"assistant", "subagent", "agent", "model", "gemini", "codex", "claude", "system", "tool"})


def project_scope(path: str | Path) -> ProjectScope:
    """The project ``path`` is in: its repository's root and remote, else the folder itself."""
    text = str(path).strip()
    if not text:
        raise InputError("a project scope needs a folder path")
    folder = Path(text).expanduser()
    try:
        folder = folder.resolve()
    except (OSError, RuntimeError) as exc:
        raise InputError(f"project: cannot resolve {text!r}: {exc}") from exc
    repo = repo_of(folder)
    return ProjectScope(repo.root or str(folder), repo.remote)


def split(scope: str | ProjectScope | None) -> tuple[str | None, ProjectScope | None]:
    """(source-or-session scope, project scope) of what a caller gave: a ``ProjectScope``,
    a ``project:PATH`` string, any other string (a source or session key), or None."""
    if scope is None or isinstance(scope, ProjectScope):
        return None, scope
    if scope.startswith(PREFIX):
        return None, project_scope(scope[len(PREFIX) :])
    return scope or None, None


def agent_codes(tm: TurnMirror) -> np.ndarray:
    return np.array([i for i, n in enumerate(tm.names) if n.strip().lower() in AGENT_SPEAKERS], dtype=tm.speaker.dtype)


def inside_mask(store: Store, tm: TurnMirror, project: ProjectScope) -> np.ndarray:
    """Over the turn mirror: turns of the project's sessions."""
    sessions = np.array(queries.project_sessions(store.conn, project), dtype=np.int64)
    out: np.ndarray = np.isin(tm.session, sessions)
    return out


def visible(store: Store, tm: TurnMirror, project: ProjectScope) -> np.ndarray:
    """Over the turn mirror: what a project scope lets through (module docstring)."""
    out: np.ndarray = inside_mask(store, tm, project) | ~np.isin(tm.speaker, agent_codes(tm))
    return out


def about_themselves(text: str) -> bool:
    """Whether a person's turn says something about themselves: a first-person statement
    ("I prefer pnpm", "my name is Sam"), not a question ("Which database should we use?")
    or talk about the work ("How do we run the tests?")."""
    return _FIRST_PERSON.search(text) is not None and not text.rstrip().endswith("?")


def narrow(store: Store, turn_ids: np.ndarray, prob: np.ndarray, flt: Filter) -> tuple[np.ndarray | None, np.ndarray]:
    """A project-scoped read's pool as the module docstring says: (the positions of the
    pool turns that stay, or None for all; their probabilities). Turns outside the project
    that are not a person speaking about themselves (``retrieval.project_personal``
    "self") leave, the rest of them keep ``project_elsewhere`` of their probability.
    Unchanged without a project scope. Call inside the read's snapshot."""
    params = store.params
    if flt.project is None or len(turn_ids) == 0:
        return None, prob
    tm = store.mirrors().turn
    pos = tm.index_of(np.asarray(turn_ids, dtype=np.int64))
    inside = inside_mask(store, tm, flt.project)
    here = np.where(pos >= 0, inside[np.where(pos >= 0, pos, 0)], False)
    keep = np.ones(len(here), dtype=bool)
    if params.project_personal == "self" and not here.all():
        away = [int(t) for t in turn_ids[~here]]
        rows = queries.turn_rows(store.conn, away)
        said = {t for t in away if t in rows and about_themselves(rows[t].text)}
        keep = here | np.array([int(t) in said for t in turn_ids], dtype=bool)
    scaled: np.ndarray = np.where(here, prob, prob * params.project_elsewhere)
    if keep.all():
        return None, scaled
    idx = np.flatnonzero(keep)
    return idx, scaled[idx]
