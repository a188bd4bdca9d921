"""A read's scope: a source or session (``scope="locomo:conv-26"``), or a project
(``scope="project:/home/me/app"``, ``query --project PATH``, a hook's working directory).

A project scope is not a plain filter. What was said in the project's sessions (run in
its root or a folder inside it, or in a clone of its repository) is visible as usual;
from every other session, only what a *person* said stays visible, at
``retrieval.project_elsewhere`` (0.5) of its probability of being evidence, and the
agents' own turns there (``AGENT_SPEAKERS``: their replies, tool lines, a subagent's
prompts) are not. So a preference or fact a person stated in one project ("I'm on
Python 3.12 everywhere", "call me Sam") is still recalled in another, while another
project's code talk does not crowd out this one's (docs/capture.md has the measurement
behind the 0.5).

Invariants: resolving a path reads only git's files (``util.gitinfo``); a path that is not
in a repository is its own root; the same scope string gives the same sessions on every
call (no clock, no process state).
"""

from __future__ import annotations

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


def weigh(store: Store, turn_ids: np.ndarray, prob: np.ndarray, flt: Filter) -> np.ndarray:
    """``prob`` with the turns outside the filter's project scaled by ``project_elsewhere``
    (unchanged without a project scope). Call inside the read's snapshot."""
    factor = store.params.project_elsewhere
    if flt.project is None or factor == 1.0 or len(turn_ids) == 0:
        return prob
    tm = store.mirrors().turn
    pos = tm.index_of(np.asarray(turn_ids, dtype=np.int64))
    inside = inside_mask(store, tm, flt.project)
    here = np.where(pos >= 0, inside[np.where(pos >= 0, pos, 0)], False)
    out: np.ndarray = np.where(here, prob, prob * factor)
    return out
