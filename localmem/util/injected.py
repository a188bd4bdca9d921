"""Memory that localmem itself put into an agent's context, recognised when it comes back.

A hook wraps what it injects in ``<localmem-context nonce="N">`` … ``</localmem-context
nonce="N">`` (:func:`wrap`), N a digest of the block's own words, and the memory text inside can
never open or close a block: every ``<localmem-context`` / ``</localmem-context`` it holds
(any case, any spacing, unseen characters such as a zero-width space inside it, its ``<``
written as an HTML entity) is escaped (its hyphen becomes U+2011, the unseen characters
dropped), so a remembered turn that
says ``</localmem-context> SYSTEM: …`` stays inside the block as the model reads it. The
block's first line is hashed and recorded with the head lines below when it is injected
(``injected`` table). When the agent's transcript is ingested later, the write path drops
every whole block (memory text cannot make one) and a block the client cut short when its
first line was recorded (:func:`drop_wrapped`): what was injected, never a person's own text
that mentions the tag. Blocks of older versions
(``<localmem-context>`` … ``</localmem-context>``, no nonce) are dropped only when closed.
A line that only introduces what is dropped ("Here is what you told me earlier:", a short
line ending in a colon, :func:`is_intro`) goes with it: left, it would be stored and
recalled as a stub of memory that is no longer there.
Where a client keeps the text but loses the wrapper, the lines themselves are recognised:
each head line of the injected context (the note, a session header, a turn's first line
``[id] speaker: …``, a hook's labels ``localmem: …``) is hashed when it is injected
(:func:`head_lines`) and a stored text loses the lines whose hash is known, with the quoted
continuation lines of a dropped turn (:func:`drop_lines`). A turn's continuation lines are
never hashed on their own: a short line like ``ok`` must not match what a person types later.

Pure functions; the table is read and written by ``localmem.storage``.
"""

from __future__ import annotations

import hashlib
import re

from localmem.util.lazyre import Lazy

OPEN = "<localmem-context"  # the start of a block's first line, of this version's and older ones'
CLOSE = "</localmem-context>"  # an older version's closing tag
_LEGACY = Lazy(re.escape(OPEN + ">") + r".*?" + re.escape(CLOSE), re.DOTALL)
_BLOCK = Lazy(r'(<localmem-context nonce="([0-9a-f]{16})">).*?(?:</localmem-context nonce="\2">|\Z)', re.DOTALL)
_OPEN_LINE = Lazy(r'<localmem-context nonce="[0-9a-f]{16}">$')
# Characters a reader does not see (zero-width spaces and joiners, soft hyphens, direction
# marks, variation selectors, the BOM): a tag spelled with them between its letters reads as
# the tag, so it is matched through them.
_UNSEEN = "[\u00ad\u034f\u061c\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f\ufe00-\ufe0f\ufeff]*"
# what memory text may not hold as it is: the wrapper's tag, in any case, spaced around its
# slash, with unseen characters anywhere in it, or with its "<" written as an HTML entity
# (a client that escapes markup shows the real tag so: Gemini CLI)
_TAG = Lazy(
    r"(?:<|&lt;|&#0*60;|&#x0*3c;)("
    + _UNSEEN
    + r"\s*/?\s*"
    + _UNSEEN
    + r")"
    + _UNSEEN.join(re.escape(c) for c in "localmem-context"),
    re.IGNORECASE,
)
NB_HYPHEN = "\u2011"
# The head lines a rendered context has (localmem.retrieval.packing): its note, a session
# header "# <date> (session <key>)", a turn line "[<id>] <speaker>: <text>"; and the
# labels a hook puts above its parts ("localmem: …").
NOTE_PREFIX = "Recalled memory:"
LABEL_PREFIX = "localmem: "
_TURN_LINE = Lazy(r"\[(\d+)\][ ]")
_HEADER = Lazy(r"# .*\(session .*\)$")
QUOTE = "    "  # how a rendered turn indents its own continuation lines
INTRO_WORDS = 12  # a line that introduces injected memory has at most these words (``is_intro``)


def escape(text: str) -> str:
    """``text`` with every tag of the wrapper in it made inert (module docstring)."""
    if "con" not in text.lower():  # the cheap test first: most memory text holds no such tag
        return text
    return _TAG.sub(lambda m: f"<{_seen(m.group(1))}localmem{NB_HYPHEN}context", text)


def _seen(text: str) -> str:
    return re.sub(_UNSEEN, "", text)


def wrap(text: str, label: str = "") -> str:
    """``text`` (escaped) inside a block marked with its own nonce, with an optional first
    line saying what it is."""
    body = (f"{escape(label)}\n" if label else "") + escape(text)
    # from the block's own words: the same memory gives the same bytes in-process and served,
    # and no text can hold the digest of a block that holds it
    nonce = hashlib.sha256(b"localmem-context\x00" + body.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f'<localmem-context nonce="{nonce}">\n{body}\n</localmem-context nonce="{nonce}">'


def drop_wrapped(text: str, known: set[str] | None = None) -> str:
    """``text`` without the blocks a hook injected: every whole block, and one the client
    cut short (to the end) when its first line's hash is in ``known`` (recorded when it was
    injected). Older versions' blocks go only when closed."""
    if OPEN not in text:
        return text

    def ours(m: re.Match[str]) -> bool:
        whole = m.group(0).endswith(f'</localmem-context nonce="{m.group(2)}">')
        # a whole block can only be one of ours (memory text cannot close it); one cut short
        # only when its first line was recorded as injected
        return whole or (known is not None and line_hash(m.group(1)) in known)

    text = _cut(text, [m.span() for m in _BLOCK.finditer(text) if ours(m)])
    return _cut(text, [m.span() for m in _LEGACY.finditer(text)]).strip()


def is_intro(line: str) -> bool:
    """Whether ``line`` only introduces what follows it ("Here is what you told me
    earlier:"): it ends with a colon and is short. Such a line goes with the injected
    memory it introduces, or a stub of it would be stored and recalled."""
    words = line.split()
    return bool(words) and len(words) <= INTRO_WORDS and line.rstrip().endswith(":")


def _cut(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` without ``spans`` (in order, apart) and the line introducing each, when the
    span ends its line (``is_intro``: the text on the span's line before it, else the last
    line before it that is not blank)."""
    if not spans:
        return text
    out: list[str] = []
    pos = 0
    for start, end in spans:
        before = text[pos:start]
        rest = text[end:]
        if not rest.split("\n", 1)[0].strip():  # nothing follows the span on its line
            kept = before.rstrip()
            line_start = kept.rfind("\n") + 1
            if is_intro(kept[line_start:]):
                before = kept[:line_start]
        out.append(before)
        pos = end
    out.append(text[pos:])
    return "".join(out)


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
    heads = line.startswith((NOTE_PREFIX, LABEL_PREFIX)) or _HEADER.match(line) is not None
    return heads or _OPEN_LINE.match(line) is not None, None


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
    if (
        "[" not in text
        and "# " not in text
        and NOTE_PREFIX not in text
        and LABEL_PREFIX not in text
        and OPEN not in text
    ):
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
        starts = not dropping
        dropping = head(line)[0] and line_hash(line) in known
        changed = changed or dropping
        if not dropping:
            kept.append(line)
        elif starts:  # the line introducing what is dropped goes with it (``is_intro``)
            last = next((i for i in range(len(kept) - 1, -1, -1) if kept[i].strip()), None)
            if last is not None and is_intro(kept[last]):
                del kept[last:]
    return "\n".join(kept).strip() if changed else text
