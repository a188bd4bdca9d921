"""A session as the door for changes stores and journals it (``changes.add_session``),
and as a fold reads it back from the journal: source, key, title, start, and since schema
version 13 the client that wrote it and its project (cwd, repository, branch, commit).

Invariant: ``session_from_data(w.data())`` is ``w``; a session without client and
project journals exactly the four fields it did before version 13, so older devices read
it as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SessionWrite:
    """A session as the door stores it; ``client`` and the project fields are '' when unknown."""

    source: str
    key: str
    title: str
    started_at: str | None
    client: str = ""
    cwd: str = ""
    repository: str = ""
    branch: str = ""
    commit: str = ""

    def data(self) -> dict[str, Any]:
        """The journal's data of this session: client and project only when known, so a
        session without them reads as it did before schema version 13."""
        out: dict[str, Any] = {
            "source": self.source,
            "key": self.key,
            "title": self.title,
            "started_at": self.started_at,
        }
        if self.client:
            out["client"] = self.client
        project = {k: v for k, v in zip(PROJECT_FIELDS, self.project, strict=True) if v}
        if project:
            out["project"] = project
        return out

    @property
    def project(self) -> tuple[str, str, str, str]:
        return (self.cwd, self.repository, self.branch, self.commit)


PROJECT_FIELDS = ("cwd", "repository", "branch", "commit")


def session_from_data(d: dict[str, Any]) -> SessionWrite:
    """The session a journal row's data describes (``SessionWrite.data``), as a fold reads it."""
    given = d.get("project")
    project: dict[str, Any] = given if isinstance(given, dict) else {}
    fields = [str(project.get(k) or "") for k in PROJECT_FIELDS]
    return SessionWrite(
        str(d["source"]),
        str(d["key"]),
        str(d.get("title") or ""),
        d.get("started_at"),
        str(d.get("client") or ""),
        *fields,
    )
