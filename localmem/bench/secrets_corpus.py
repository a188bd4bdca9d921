"""A corpus of synthetic secrets the way people paste them, for ``localmem bench secrets``
and the tests that plant secrets on every write path.

Each item is one secret of one *kind* (``postgres-url``, ``vault-token``, ...) in one
*form* (the context it was pasted in: a ``.env`` file, a YAML or INI file, a fenced code
block, a pasted tool's JSON, a shell command, a connection URL, a ``.netrc`` or
``.pgpass`` line, the AWS console's CSV, prose, a value wrapped over several lines, a
URL-encoded value, base64 in a Kubernetes Secret, an HTTP header).

Invariants:
- synthetic: every value is drawn from ``random.Random(seed)`` in its provider's published
  format (prefix, alphabet, length); none is a real credential, none is a constant a rule
  could learn (a new seed gives new values);
- ``needles`` are what must not survive redaction: the value as it appears in the text, and
  every random part of 8+ characters the text shows verbatim (what a full-text index would
  keep of a half-redacted value);
- deterministic: the same seed gives the same corpus.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from localmem.bench.secrets_makers import MAKERS
from localmem.bench.secrets_tokens import Draw

FORMS = (
    "env",
    "yaml",
    "ini",
    "code",
    "json",
    "shell",
    "url",
    "netrc",
    "csv",
    "header",
    "prose",
    "wrapped",
    "urlencoded",
    "base64",
)


@dataclass(frozen=True)
class Secret:
    kind: str
    form: str
    text: str
    needles: tuple[str, ...]


def corpus(per_kind: int = 2, seed: int = 50) -> list[Secret]:
    """``per_kind`` items of every maker, values drawn from ``seed``."""
    rng = random.Random(seed)
    out = []
    for kind, form, make in MAKERS:
        for _ in range(per_kind):
            d = Draw(rng)
            text, values = make(d)
            missing = [v for v in values if v not in text]
            if missing:
                raise AssertionError(f"{kind}: value not in its text")  # a maker's bug, not a finding
            parts = [p for p in d.parts if len(p) >= 8 and p in text]
            out.append(Secret(kind, form, text, tuple(dict.fromkeys([*values, *parts]))))
    return out


def leaked(item: Secret, redacted: str) -> list[str]:
    """The needles of ``item`` still in ``redacted``."""
    return [n for n in item.needles if n in redacted]
