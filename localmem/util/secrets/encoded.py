"""Secrets that are not written out plainly: URL-encoded (``dsn=postgresql%3A%2F%2F…``),
base64-encoded (an ``echo … | base64 -d``, a Kubernetes Secret's ``data:``), or wrapped
over several lines (a terminal's hard wrap, a shell's ``\\`` continuation, a string split
in code).

- percent-encoded runs are decoded, searched with the whole guard, and what is found
  is mapped back to the encoded characters (only those are replaced);
- a base64 run that decodes to text in which the guard finds a secret is a secret, whole;
- every value under a Kubernetes Secret's ``data:`` / ``stringData:`` is one (base64
  hides its shape, so the place says it);
- a secret that ends its line is continued over the lines after it that hold nothing but
  a run of key characters (optionally quoted, or ended by ``\\``).

Invariant: decoding goes one level deep (a secret encoded twice is found by its outer
layer's rules or not at all), so a crafted text cannot make the guard recurse.
"""

from __future__ import annotations

import base64
import binascii
import codecs
from collections.abc import Callable, Iterator

from localmem.util.lazyre import Lazy

Find = Callable[[str], list[tuple[int, int, str]]]
_PERCENT_RUN = Lazy(r"[^\s\"'<>`]*%[0-9A-Fa-f]{2}[^\s\"'<>`]*")
_HEXPAIR = Lazy(r"%([0-9A-Fa-f]{2})")
_B64_RUN = Lazy(r"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/]{16,8192}={0,2}(?![A-Za-z0-9+/=_-])")
_K8S = Lazy(r"(?i)\bkind\b[\"']?\s*:\s*[\"']?secret\b")
_K8S_YAML = Lazy(r"(?m)^([ \t]*)(?:data|stringData):[ \t]*\n((?:\1[ \t]+\S[^\n]*(?:\n|$))+)")
_K8S_ITEM = Lazy(r"(?m)^[ \t]+[\"']?[\w.-]+[\"']?:[ \t]*[\"']?([^\s\"'#]+)")
_K8S_JSON = Lazy(r"\"(?:data|stringData)\"\s*:\s*\{([^{}]*)\}")
_JSON_ITEM = Lazy(r"\"[^\"]+\"\s*:\s*\"([^\"]+)\"")
_CONTINUED = Lazy(
    r"[\"']?[ \t]*\\?[ \t]*\r?\n[ \t]*[\"']?([A-Za-z0-9+/=_.~-]+)[\"']?[ \t]*(?:\\|[,;)]*)[ \t]*(?=\r?\n|$)"
)


def percent(text: str, find: Find) -> Iterator[tuple[int, int, str]]:
    """Secrets inside percent-encoded runs, as spans of ``text``."""
    for m in _PERCENT_RUN.finditer(text):
        run = m.group()
        decoded, where = _unquote(run)
        if decoded == run:
            continue
        for s, e, kind in find(decoded):
            yield m.start() + where[s], m.start() + where[e], kind


def _unquote(run: str) -> tuple[str, list[int]]:
    """``run`` percent-decoded (as UTF-8, bad bytes replaced), and for each decoded
    character the offset in ``run`` where it starts (and ``len(run)`` for the end)."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    chars: list[str] = []
    where: list[int] = []
    first = 0  # where the character being decoded began
    i = 0
    while i < len(run):
        m = _HEXPAIR.match(run, i)
        if m is None:
            out = decoder.decode(b"", final=True)  # a character cut short by plain text
            chars.extend(out)
            where.extend([first] * len(out))
            chars.append(run[i])
            where.append(i)
            i += 1
            first = i
            continue
        out = decoder.decode(bytes([int(m.group(1), 16)]))
        i += 3
        chars.extend(out)
        where.extend([first] * len(out))
        if out:
            first = i
    out = decoder.decode(b"", final=True)
    chars.extend(out)
    where.extend([first] * len(out))
    where.append(len(run))
    return "".join(chars), where


def base64_runs(text: str, find: Find) -> Iterator[tuple[int, int, str]]:
    """Base64 runs whose decoded text holds a secret, each whole."""
    for m in _B64_RUN.finditer(text):
        run = m.group()
        if len(run) % 4 or run.isalpha() or run.isdigit():
            continue
        try:
            decoded = base64.b64decode(run, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError, ValueError):
            continue
        if not decoded.isprintable() and not all(c.isprintable() or c in "\n\r\t" for c in decoded):
            continue
        found = find(decoded)
        if found:
            yield m.start(), m.end(), min(found)[2]


def kubernetes(text: str) -> Iterator[tuple[int, int, str]]:
    """Every value of a Kubernetes Secret's ``data`` / ``stringData``, YAML or JSON."""
    if _K8S.search(text) is None:
        return
    for block in _K8S_YAML.finditer(text):
        base = block.start(2)
        for item in _K8S_ITEM.finditer(block.group(2)):
            if not item.group(1).startswith(("{", "$", "[secret:")):
                yield base + item.start(1), base + item.end(1), "k8s-secret"
    for block in _K8S_JSON.finditer(text):
        base = block.start(1)
        for item in _JSON_ITEM.finditer(block.group(1)):
            if not item.group(1).startswith(("{", "$", "[secret:")):
                yield base + item.start(1), base + item.end(1), "k8s-secret"


def wrapped(text: str, spans: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """``spans`` with each secret that ends its line (and fills 20+ characters of it)
    continued over the wrapped lines after it (module docstring)."""
    out = []
    for start, end, kind in spans:
        line_start = text.rfind("\n", 0, start) + 1
        if end - max(start, line_start) >= 20:
            previous = end - max(start, line_start)
            lines = 0
            while (m := _CONTINUED.match(text, end)) is not None:
                run = m.group(1)
                if (run.isalpha() and run.islower()) or (len(run) < 8 and not lines):
                    break  # a word on its own line, not a key's tail (a short tail only ends a wrap)
                lines += 1
                end = m.end(1)
                if len(run) < previous - 2:
                    break  # a shorter line is the last of the wrap
                previous = len(run)
        out.append((start, end, kind))
    return out
