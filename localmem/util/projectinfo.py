"""What a project folder says about itself, as a few words a session start can search with:
its name, its repository's name, the head of its README and what its manifests name
(``package.json``'s name and description, ``pyproject.toml``'s, ``Cargo.toml``'s, the
language a manifest implies). A session start in a project with no memory of its own asks
with these words which of the person's own statements elsewhere bear on it
(``retrieval.personal``); nothing about the project, nothing asked.

Invariants: reads at most ``MAX_READ`` bytes of a handful of named files in the root (no
walk, no process), never raises for a folder that is missing or unreadable (the answer is
then what is left: at least the folder's name), and is the same for the same files.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from localmem.util.lazyre import Lazy

MAX_READ = 16_384  # bytes of any one file read
README_WORDS = 60  # of the README's head kept
READMES = ("README.md", "README.rst", "README.txt", "README", "readme.md")
# manifest -> the language or tooling it implies (words a person's statement may share)
MANIFESTS = {
    "package.json": "JavaScript TypeScript Node npm package",
    "pyproject.toml": "Python package",
    "setup.py": "Python package",
    "requirements.txt": "Python",
    "Cargo.toml": "Rust crate cargo",
    "go.mod": "Go module",
    "Gemfile": "Ruby gems",
    "pom.xml": "Java Maven",
    "build.gradle": "Java Gradle",
    "composer.json": "PHP Composer",
    "mix.exs": "Elixir",
    "Dockerfile": "Docker container",
    "hugo.toml": "Hugo static site",
}
_TOML_FIELD = Lazy(r'^\s*(name|description)\s*=\s*"([^"\n]{1,200})"', re.MULTILINE)
_MARKUP = Lazy(r"[#=*`_>\[\]()!|<]+")
_SPACES = Lazy(r"\s+")


@dataclass(frozen=True)
class About:
    name: str  # the folder's (or repository's) name, words split
    words: str  # everything found, one line; '' past the name when the folder says nothing

    @property
    def says_more_than_its_name(self) -> bool:
        return self.words != self.name


def _read(path: Path) -> str:
    try:
        with path.open("rb") as fh:
            return fh.read(MAX_READ).decode("utf-8", errors="replace")
    except OSError:
        return ""


def _name_words(name: str) -> str:
    """``invoice-ui`` / ``invoice_ui`` / ``InvoiceUI`` -> ``invoice ui``."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name)
    return _SPACES.sub(" ", re.sub(r"[-_.]+", " ", spaced)).strip()


def _readme_head(root: Path) -> str:
    for name in READMES:
        text = _read(root / name)
        if text.strip():
            words = _SPACES.sub(" ", _MARKUP.sub(" ", text)).split()
            return " ".join(words[:README_WORDS])
    return ""


def _manifest(path: Path) -> str:
    text = _read(path)
    if not text:
        return ""
    if path.suffix == ".json":
        try:
            obj = json.loads(text)
        except ValueError:
            return ""
        if not isinstance(obj, dict):
            return ""
        return " ".join(str(obj[k]) for k in ("name", "description") if isinstance(obj.get(k), str))
    if path.suffix == ".toml":
        return " ".join(m.group(2) for m in _TOML_FIELD.finditer(text))
    return ""


def about(root: str | Path, remote: str = "") -> About:
    """The words ``root`` says about itself (module docstring); ``remote``: its repository's URL."""
    folder = Path(root)
    name = _name_words(folder.name)
    repo = _name_words(remote.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]) if remote else ""
    parts = [name] + ([repo] if repo and repo.lower() != name.lower() else [])
    for manifest, implies in MANIFESTS.items():
        path = folder / manifest
        try:
            present = path.is_file()
        except OSError:
            present = False
        if present:
            parts += [w for w in (implies, _manifest(path)) if w]
    head = _readme_head(folder)
    if head:
        parts.append(head)
    return About(name, _SPACES.sub(" ", " ".join(parts)).strip())
