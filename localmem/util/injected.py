"""Memory that localmem itself put into an agent's context, recognised when it comes back.

A hook wraps what it injects in ``<localmem-context>`` … ``</localmem-context>``
(:func:`wrap`); when the agent's transcript is ingested later, the write path drops every
such span (:func:`drop_wrapped`), the way it drops ``<private>`` spans, so a recalled memory
is never stored again as a new one. Where a client keeps the text but loses the wrapper,
the lines themselves are recognised: each head line of the injected context (the note, a
session header, a turn's first line ``[id] speaker: …``) is hashed when it is injected
and a hook's labels, ``localmem: …``; :func:`head_lines`, kept in the store's ``injected`` table) and a stored text loses the
lines whose hash is known, with the quoted continuation lines of a dropped turn
(:func:`drop_lines`). A turn's continuation lines are never hashed on their own: a short
line like ``ok`` must not match what a person types later.

Pure functions; the table is read and written by ``localmem.storage``.
"""

from __future__ import annotations

import hashlib
import re

from localmem.util.lazyre import Lazy

OPEN = "<localmem-context>"
CLOSE = "</localmem-context>"
_WRAPPED = Lazy(re.escape(OPEN) + r".*?(?:" + re.escape(CLOSE) + r"|\Z)", re.DOTALL)
# The head lines a rendered context has (localmem.retrieval.packing): its note, a session
# header "# <date> (session <key>)", a turn line "[<id>] <speaker>: <text>"; and the
# labels a hook puts above its parts ("localmem: …").
NOTE_PREFIX = "Recalled memory:"
LABEL_PREFIX = "localmem: "
_TURN_LINE = Lazy(r"\[(\d+)\][ ]")
_HEADER = Lazy(r"# .*\(session .*\)$")
QUOTE = "    "  # how a rendered turn indents its own continuation lines


def wrap(text: str, label: str = "") -> str:
    """``text`` inside the wrapper, with an optional first line saying what it is."""
    head = f"{label}\n" if label else ""
    return f"{OPEN}\n{head}{text}\n{CLOSE}"


def drop_wrapped(text: str) -> str:
    """``text`` without its wrapped spans (an unclosed one: to the end)."""
    if OPEN not in text:
        return text
    return _WRAPPED.sub("", text).strip()


def line_hash(line: str) -> str:
    """The identity of a head line: its words, whitespace collapsed."""
    h = hashlib.sha256(b"injected\x00" + " ".join(line.split()).encode("utf-8"))
    return h.hexdigest()[:32]


def head(line: str) -> tuple[bool, int | None]:
    """Whether ``line`` (stripped) is a head line, and the turn id it quotes (None for
    the note or a session header)."""
    line = line.strip()
    if (m := _TURN_LINE.match(line)) is not None:
        return True, int(m.group(1))
    return line.startswith((NOTE_PREFIX, LABEL_PREFIX)) or _HEADER.match(line) is not None, None


def head_lines(context: str) -> list[tuple[str, int | None]]:
    """The (hash, turn id or None) of every head line of a rendered context."""
    out: list[tuple[str, int | None]] = []
    for line in context.splitlines():
        is_head, turn = head(line)
        if is_head:
            out.append((line_hash(line), turn))
    return out


def candidate_hashes(text: str) -> list[str]:
    """Hashes of the lines of ``text`` that could be injected head lines."""
    if "[" not in text and "# " not in text and NOTE_PREFIX not in text and LABEL_PREFIX not in text:
        return []
    return [line_hash(line) for line in text.splitlines() if head(line)[0]]


def drop_lines(text: str, known: set[str]) -> str:
    """``text`` without the head lines whose hash is in ``known`` and the quoted
    continuation lines of each dropped turn line."""
    if not known:
        return text
    kept: list[str] = []
    dropping = False
    changed = False
    for line in text.splitlines():
        if dropping and line.startswith(QUOTE):
            continue
        dropping = head(line)[0] and line_hash(line) in known
        changed = changed or dropping
        if not dropping:
            kept.append(line)
    return "\n".join(kept).strip() if changed else text
