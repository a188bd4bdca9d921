"""Secrets and private spans taken out of a text before it is stored.

``redact(text)`` returns the text with every ``<private>…</private>`` span dropped (tags
included; an unclosed ``<private>`` drops the rest of the text) and every secret found
replaced by a typed placeholder, ``[secret: aws-access-key]``. Where secrets are found, by
module:

- ``providers``: tokens known by their shape, from Yelp's detect-secrets plugins and a
  table of provider formats after gitleaks' rule set (``sk-ant-``, ``hvs.``, ``glsa_``, …);
- ``assignments``: ``KEY=value``, ``key: value`` and quoted values whose name says secret;
- ``commandline``: passwords given to commands, ``.netrc`` / ``.pgpass`` lines, URL
  passwords, query parameters, HTTP headers, AWS secret keys beside their key ids;
- ``prose``: a password said in a sentence (its policy is in that module and in
  docs/security.md);
- ``encoded``: URL-encoded and base64 values, a Kubernetes Secret's data, secrets
  wrapped over several lines.

Invariants:
- deterministic and idempotent: the same text always gives the same result, and a result
  redacted again is unchanged (a placeholder matches no rule), so a content hash taken
  after ``redact`` is stable;
- a text in which nothing is found is returned as it was (the same string);
- only the secret's own characters are replaced (``postgres://app:[secret: password]@db``,
  ``Authorization: Bearer [secret: bearer-token]``), so the sentence around it still reads;
- no network and no verification: detect-secrets' ``verify`` steps are never called.

detect-secrets is imported on the first call (it brings ``requests``, ~0.1 s), so
processes that never write a turn do not pay for it.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable, Iterator

from localmem.util.lazyre import Lazy
from localmem.util.secrets import assignments, commandline, encoded, providers
from localmem.util.secrets.prose import prose

__all__ = ["PLACEHOLDER", "drop_private", "find", "kinds", "redact"]

PLACEHOLDER = "[secret: {kind}]"

_WORD_CHARS = frozenset(string.ascii_letters + string.digits + "_-")
_TOKEN_CHARS = frozenset(string.ascii_letters + string.digits + "_-+/=.")
_KEYISH = Lazy(r"[A-Za-z0-9_+/=-]{11,}")
_NAMED = Lazy(r"(?i)pass|pwd|secret|token|key|credential|auth|bearer|\bpw\b")
_PRIVATE = Lazy(r"<private>.*?(?:</private>|\Z)", re.IGNORECASE | re.DOTALL)


def redact(text: str) -> str:
    """``text`` with private spans dropped and secrets replaced (see the module docstring)."""
    if not text:
        return text
    out = drop_private(text)
    spans = _merge(find(out))
    for start, end, kind in reversed(spans):
        out = out[:start] + PLACEHOLDER.format(kind=kind) + out[end:]
    return out


def drop_private(text: str) -> str:
    """``text`` without its ``<private>…</private>`` spans (an unclosed one: to the end),
    the spaces on either side of a dropped span joined into one."""
    if "<private>" not in text.lower():
        return text
    out = text
    while (m := _PRIVATE.search(out)) is not None:
        left, right = out[: m.start()].rstrip(" \t"), out[m.end() :].lstrip(" \t")
        glue = " " if left and right and not left.endswith("\n") and not right.startswith("\n") else ""
        out = left + glue + right
    return out


def find(text: str) -> list[tuple[int, int, str]]:
    """Every secret in ``text`` as (start, end, kind), unmerged, in no particular order."""
    spans = _found(text)
    if "%" in text:
        spans.extend(encoded.percent(text, _found))
    if _keyish(text):
        spans.extend(encoded.base64_runs(text, _found))
    return encoded.wrapped(text, spans)


def _found(text: str) -> list[tuple[int, int, str]]:
    """What every rule finds in ``text`` as written (``find`` adds its decodings)."""
    spans: list[tuple[int, int, str]] = []
    # Cheap gates first (most chat turns pass none): every key and token has a run of 11+
    # key characters (a PEM block its BEGIN line, a URL's password its ://); every named
    # rule, assignment and sentence names its secret.
    if _keyish(text) or "://" in text or "-----BEGIN" in text:
        for kind, value in providers.plugin_values(text, providers.plugins()):
            spans.extend((*_widen(text, s, s + len(value)), kind) for s in _occurrences(text, value))
        spans.extend(providers.tokens(text))
        spans.extend(encoded.kubernetes(text))
    spans.extend(commandline.placed(text))
    if _NAMED.search(text):
        for kind, value in providers.plugin_values(text, providers.named_plugins()):
            spans.extend((*_widen(text, s, s + len(value)), kind) for s in _occurrences(text, value))
        spans.extend(assignments.assignments(text))
        spans.extend(prose(text))
    return [s for s in spans if not _in_placeholder(text, s[0]) and not _documented(text[s[0] : s[1]])]


def kinds(text: str) -> list[str]:
    """The kinds of the secrets in ``text``, each once, in the order they occur."""
    return list(dict.fromkeys(kind for _, _, kind in _merge(find(drop_private(text)))))


def _in_placeholder(text: str, at: int) -> bool:
    """A span starting inside ``[secret: kind]`` (a rule reading a placeholder's kind as a value)."""
    left = text.rfind("[secret: ", max(0, at - 40), at + 1)
    return left >= 0 and "]" not in text[left:at]


def _documented(value: str) -> bool:
    """A provider's documentation example (AWS's ``AKIAIOSFODNN7EXAMPLE`` and
    ``wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY``): left as it is, like any example."""
    return value.endswith(("EXAMPLE", "EXAMPLEKEY"))


def _merge(spans: Iterable[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """Overlapping spans joined: the kind of the one that starts first, the longest on a
    tie, then any kind before the generic ``secret`` (a query parameter's), then by name."""
    out: list[tuple[int, int, str]] = []
    for start, end, kind in sorted(spans, key=lambda s: (s[0], -s[1], s[2] == "secret", s[2])):
        if out and start < out[-1][1]:
            prev = out[-1]
            out[-1] = (prev[0], max(prev[1], end), prev[2])
        else:
            out.append((start, end, kind))
    return out


def _widen(text: str, start: int, end: int) -> tuple[int, int]:
    """A plugin's match grown to the whole token it sits in: some plugins yield a regex
    group (``glpat`` of a GitLab token, a JWT without its signature), not the secret."""
    while start > 0 and text[start - 1] in _WORD_CHARS:  # not over `=`: `KEY=` stays
        start -= 1
    while end < len(text) and text[end] in _TOKEN_CHARS:
        end += 1
    while end > start and text[end - 1] == ".":  # a full stop after it is the sentence's
        end -= 1
    return start, end


def _occurrences(text: str, value: str) -> Iterator[int]:
    at = text.find(value)
    while at >= 0:
        yield at
        at = text.find(value, at + len(value))


def _keyish(text: str) -> bool:
    """A run of 11+ key characters that is not a plain word (a digit, a symbol or an inner capital)."""
    for m in _KEYISH.finditer(text):
        run = m.group()
        if not run.isalpha() or not run[1:].islower():
            return True
    return False
