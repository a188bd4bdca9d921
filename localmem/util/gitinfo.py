"""What git says of a folder, read from its files (no ``git`` process): the repository's
root, its remote and its branch. A project scope resolves a path with it, and a session's
repository is stored through :func:`clean_remote`.

Invariants: never raises for a folder that is not a repository, is unreadable or is gone
(the answer is then empty); a remote never keeps credentials (``https://user:token@host``
loses ``user:token@``), so a token in a remote URL is never stored or compared.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from localmem.util.lazyre import Lazy

_USERINFO = Lazy(r"^([a-z][a-z0-9+.-]*://)[^/@]*@", re.IGNORECASE)


@dataclass(frozen=True)
class Repo:
    root: str  # the working tree's top folder ('' when not in a repository)
    remote: str = ""  # origin's URL (else the first remote's), cleaned
    branch: str = ""


def clean_remote(url: str) -> str:
    """A remote URL without credentials, a trailing ``.git`` or ``/``:
    ``https://tok@github.com/a/b.git`` -> ``https://github.com/a/b``. ``git@host:a/b``
    keeps its ``git@`` (a user name, not a secret)."""
    url = _USERINFO.sub(r"\1", url.strip())
    url = url.rstrip("/")
    return url[:-4] if url.endswith(".git") else url


def repo_of(path: str | Path) -> Repo:
    """The repository ``path`` is in (itself or a parent), or ``Repo(root='')``."""
    try:
        here = Path(path).expanduser().resolve()
    except (OSError, RuntimeError):
        return Repo("")
    for folder in (here, *here.parents):
        dotgit = folder / ".git"
        try:
            if dotgit.is_dir():
                return _read(folder, dotgit, dotgit)
            if dotgit.is_file():  # a worktree or submodule: "gitdir: <path>"
                gitdir = _gitdir(folder, dotgit)
                return _read(folder, gitdir, _common(gitdir)) if gitdir else Repo(str(folder))
        except OSError:
            return Repo(str(folder))
    return Repo("")


def _gitdir(folder: Path, dotgit: Path) -> Path | None:
    text = dotgit.read_text("utf-8", errors="replace").strip()
    if not text.startswith("gitdir:"):
        return None
    target = Path(text[len("gitdir:") :].strip())
    return target if target.is_absolute() else (folder / target).resolve()


def _common(gitdir: Path) -> Path:
    """The folder holding the shared config of a worktree's git dir."""
    common = gitdir / "commondir"
    if common.is_file():
        target = Path(common.read_text("utf-8", errors="replace").strip())
        return target if target.is_absolute() else (gitdir / target).resolve()
    return gitdir


def _read(root: Path, gitdir: Path, common: Path) -> Repo:
    return Repo(str(root), _remote(common / "config"), _branch(gitdir / "HEAD"))


def _remote(config: Path) -> str:
    # configparser compiles its section and option patterns at import (~5 ms of every
    # start): only a process that reads a repository's config pays for it
    import configparser

    parser = configparser.ConfigParser(strict=False, interpolation=None)
    try:
        parser.read(config, encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError):
        return ""
    remotes = [s for s in parser.sections() if s.startswith('remote "')]
    remotes.sort(key=lambda s: s != 'remote "origin"')
    for section in remotes:
        url = parser.get(section, "url", fallback="")
        if url:
            return clean_remote(url)
    return ""


def _branch(head: Path) -> str:
    try:
        text = head.read_text("utf-8", errors="replace").strip()
    except OSError:
        return ""
    prefix = "ref: refs/heads/"
    return text[len(prefix) :] if text.startswith(prefix) else ""
