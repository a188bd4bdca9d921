"""Secrets and private spans taken out of a text before it is stored.

``redact(text)`` returns the text with every ``<private>…</private>`` span dropped (tags
included; an unclosed ``<private>`` drops the rest of the text) and every secret found
replaced by a typed placeholder, ``[secret: aws-access-key]``. Secrets are found by Yelp's
detect-secrets plugins (their regex denylists, which give the secret's own value and so its
span) plus the rules below for what agent transcripts hold and those plugins miss: PEM key
blocks over several lines, ``Authorization: Bearer …`` headers, ``KEY=value`` lines of
``.env`` files and quoted ``password = "…"`` assignments, provider keys (``sk-ant-``,
``sk-proj-``, ``github_pat_``, ``hf_``, ``AIza``, …) and AWS secret access keys.

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
from collections.abc import Callable, Iterable, Iterator
from functools import cache
from itertools import pairwise
from typing import Any

from localmem.util.lazyre import Lazy

PLACEHOLDER = "[secret: {kind}]"

# detect-secrets' plugins used, by their secret_type, with the kind we name. Left out:
# the high-entropy-string plugins (git hashes, UUIDs and base64 blobs are everywhere in
# coding sessions), the keyword plugin (its filters live in the scan pipeline, not in the
# plugin; the assignment rules below replace it) and the public-IP one (not a secret).
PLUGIN_KINDS = {
    "AWS Access Key": "aws-access-key",
    "Artifactory Credentials": "artifactory-token",
    "Azure Storage Account access key": "azure-storage-key",
    "Basic Auth Credentials": "password",
    "Cloudant Credentials": "cloudant-key",
    "Discord Bot Token": "discord-token",
    "GitHub Token": "github-token",
    "GitLab Token": "gitlab-token",
    "IBM COS HMAC Credentials": "ibm-cos-key",
    "IBM Cloud IAM Key": "ibm-cloud-key",
    "JSON Web Token": "jwt",
    "Mailchimp Access Key": "mailchimp-key",
    "NPM tokens": "npm-token",
    "OpenAI Token": "openai-key",
    "PyPI Token": "pypi-token",
    "SendGrid API Key": "sendgrid-key",
    "Slack Token": "slack-token",
    "SoftLayer Credentials": "softlayer-key",
    "Square OAuth Secret": "square-secret",
    "Stripe Access Key": "stripe-key",
    "Twilio API Key": "twilio-key",
}
# Plugins whose every pattern starts at a key word (key, pass, token, ...): run only on
# texts that have one.
NAMED_PLUGINS = frozenset(
    {"Cloudant Credentials", "IBM COS HMAC Credentials", "IBM Cloud IAM Key", "SoftLayer Credentials"}
)
Plugins = tuple[tuple[str, Callable[[str], Iterable[str]]], ...]
_AWS_KEY_ID = Lazy(r"(?:A3T[A-Z0-9]|ABIA|ACCA|AKIA|ASIA)[0-9A-Z]{16}")

_B = r"(?<![A-Za-z0-9_-])"  # not inside a longer token
# Rules that match the secret itself: (kind, pattern, group holding the secret, 0 = all of it).
RULES: tuple[tuple[str, Lazy, int], ...] = (
    # A PEM block, real newlines or JSON-escaped ones (a GCP service-account file's
    # "private_key"); cut off (no END line): its base64 run.
    (
        "private-key",
        Lazy(
            r"-----BEGIN ([A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?)-----"
            r"(?:.*?-----END \1-----|[A-Za-z0-9+/=\s\\:,-]*)",
            re.DOTALL,
        ),
        0,
    ),
    ("anthropic-key", Lazy(_B + r"sk-ant-[A-Za-z0-9_-]{20,}"), 0),
    ("openai-key", Lazy(_B + r"sk-(?:proj|svcacct|admin|None)-[A-Za-z0-9_-]{20,}"), 0),
    ("api-key", Lazy(_B + r"sk-[A-Za-z0-9]{32,}"), 0),
    ("github-token", Lazy(_B + r"(?:gh[pousr]_[A-Za-z0-9]{30,255}|github_pat_[A-Za-z0-9_]{22,255})"), 0),
    ("slack-token", Lazy(_B + r"xox[abposr]-[A-Za-z0-9-]{10,}"), 0),
    ("slack-webhook", Lazy(r"https://hooks\.slack\.com/services/[A-Za-z0-9_/]+"), 0),
    ("stripe-key", Lazy(_B + r"[sr]k_(?:live|test)_[0-9A-Za-z]{16,}"), 0),
    ("google-api-key", Lazy(_B + r"AIza[0-9A-Za-z_-]{35}"), 0),
    ("google-oauth-secret", Lazy(_B + r"GOCSPX-[A-Za-z0-9_-]{20,}"), 0),
    ("huggingface-token", Lazy(_B + r"hf_[A-Za-z0-9]{30,}"), 0),
    ("npm-token", Lazy(_B + r"npm_[A-Za-z0-9]{36}"), 0),
    ("digitalocean-token", Lazy(_B + r"do[opr]_v1_[a-f0-9]{64}"), 0),
    ("shopify-token", Lazy(_B + r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}"), 0),
    ("databricks-token", Lazy(_B + r"dapi[a-f0-9]{32}"), 0),
    ("age-secret-key", Lazy(r"AGE-SECRET-KEY-1[0-9A-Z]{58}"), 0),
    ("telegram-token", Lazy(r"(?<![0-9A-Za-z])\d{8,10}:AA[0-9A-Za-z_-]{33}"), 0),
)
# Rules that start at the secret's name (a key word, a header, a flag).
NAMED_RULES: tuple[tuple[str, Lazy, int], ...] = (
    (
        "aws-secret-key",
        Lazy(
            r"(?i)(?:aws_?secret_?access_?key|secret_?access_?key|aws_?secret_?key)[\"']?\s*[:=]\s*[\"']?"
            r"([A-Za-z0-9/+=]{40})"
        ),
        1,
    ),
    ("gcp-private-key-id", Lazy(r"\"private_key_id\"\s*:\s*\"([a-f0-9]{40})\""), 1),
    (
        "bearer-token",
        Lazy(
            r"(?i)\b(?:bearer|token|bot)\s+((?=[A-Za-z0-9._~+/-]*\d)(?=[A-Za-z0-9._~+/-]*[A-Za-z])"
            r"[A-Za-z0-9._~+/-]{16,}=*)(?![A-Za-z0-9._~+/=-])"
        ),
        1,
    ),
    (
        "password",
        Lazy(
            r"(?i)(?<![\w-])--?(?:password|passwd|pass|token|api-key|apikey|secret)[= ]"
            r"([^\s\"'`$<{(\[-][^\s\"'`]{3,})"
        ),
        1,
    ),
    (
        "basic-auth",
        Lazy(r"(?i)\bauthorization\s*[:=]\s*[\"']?basic\s+([A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])"),
        1,
    ),
    (
        "api-key",
        Lazy(
            r"(?i)\b(?:x-api-key|api-key|x-auth-token|private-token|x-goog-api-key|anthropic-api-key)"
            r"\s*:\s*[\"']?([A-Za-z0-9._~+/=-]{12,})"
        ),
        1,
    ),
)

# Assignments whose name says it holds a secret. The name's parts (split at _ - . and
# camelCase) must hold one of these words or word pairs, and not end in a word that says
# the value is about the secret rather than the secret itself (a type, a limit, a path).
_SECRET_WORDS = {"password", "passwd", "pwd", "passphrase", "secret", "token", "apikey", "credential", "credentials"}
_SECRET_PAIRS = {("api", "key"), ("access", "key"), ("private", "key"), ("secret", "key"), ("auth", "key")}
_NOT_SECRET_LAST = {
    "type", "types", "limit", "limits", "count", "length", "len", "size", "url", "uri", "file", "path", "dir",
    "name", "id", "ids", "expiry", "expires", "ttl", "header", "endpoint", "field", "env", "var", "prefix",
    "hint", "policy", "rotation", "provider", "manager", "store", "scope", "scopes", "address", "addr",
}  # fmt: skip
_NOT_A_VALUE = {"none", "null", "nil", "true", "false", "undefined", "changeme", "redacted", "required", "optional"}
# `KEY=value` and `key: value` anywhere (a .env file, a shell line, a sentence); a value
# ends at a space, a quote or backquote, `#`, `,`, `;`, `)` or `]`.
_ENV_LINE = Lazy(r"(?<![A-Za-z_])([A-Za-z_][A-Za-z0-9_.-]*)[ \t]*=[ \t]*([\"']?)([^\s\"'`#,;)\]]+)\2")
_COLON_LINE = Lazy(r"(?<![A-Za-z_])([A-Za-z_][A-Za-z0-9_.-]*)[ \t]*:[ \t]+([^\s\"'`#,;)\]]+)")
_QUOTED = Lazy(r"([\"']?)([A-Za-z_][A-Za-z0-9_.-]*)\1[ \t]*(?::=|=>|==|[:=])[ \t]*[@]?([\"'`])([^\"'`\s]{4,200})\3")
_IDENTIFIER = Lazy(r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*")
_CAMEL = Lazy(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
_WORD_CHARS = frozenset(string.ascii_letters + string.digits + "_-")
_TOKEN_CHARS = frozenset(string.ascii_letters + string.digits + "_-+/=.")
_KEYISH = Lazy(r"[A-Za-z0-9_+/=-]{11,}")
_KEY_RUN = Lazy(r"[A-Za-z0-9_+/=-]*")
_NAMED = Lazy(r"(?i)pass|pwd|secret|token|key|credential|auth|bearer")
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
    spans: list[tuple[int, int, str]] = []
    # Two cheap gates first (most chat turns pass neither): every key and token has a run
    # of 11+ key characters (a PEM block its BEGIN line, a URL's password its ://); every
    # named rule and assignment names its secret.
    if _keyish(text) or "://" in text or "-----BEGIN" in text:
        for kind, value in _plugin_values(text, _plugins()):
            spans.extend((*_widen(text, s, s + len(value)), kind) for s in _occurrences(text, value))
        spans.extend(_matches(RULES, text))
    if _NAMED.search(text):
        for kind, value in _plugin_values(text, _named_plugins()):
            spans.extend((*_widen(text, s, s + len(value)), kind) for s in _occurrences(text, value))
        spans.extend(_matches(NAMED_RULES, text))
        spans.extend(_assignments(text))
    return spans


def _matches(rules: Iterable[tuple[str, Lazy, int]], text: str) -> Iterator[tuple[int, int, str]]:
    """Every match of every rule, overlapping ones too (a value that runs into the next
    ``key: value`` must not hide it)."""
    for kind, pattern, group in rules:
        for m in _overlapping(pattern, text):
            if m.group(group):
                yield m.start(group), m.end(group), kind


def _overlapping(pattern: Lazy, text: str) -> Iterator[re.Match[str]]:
    m = pattern.search(text)
    while m is not None:
        yield m
        m = pattern.search(text, m.start() + 1)


def kinds(text: str) -> list[str]:
    """The kinds of the secrets in ``text``, each once, in the order they occur."""
    return list(dict.fromkeys(kind for _, _, kind in _merge(find(drop_private(text)))))


def _merge(spans: Iterable[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """Overlapping spans joined (the kind of the one that starts first, the longest on a tie)."""
    out: list[tuple[int, int, str]] = []
    for start, end, kind in sorted(spans, key=lambda s: (s[0], -s[1])):
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


def _plugin_values(text: str, plugins: Plugins) -> Iterator[tuple[str, str]]:
    for kind, analyze in plugins:
        for value in analyze(text):
            if not isinstance(value, str) or len(value) < 4:
                continue
            if kind == "aws-access-key" and not _AWS_KEY_ID.fullmatch(value):
                kind = "aws-secret-key"  # the plugin's second pattern catches the secret key
            yield kind, value


@cache
def _all_plugins() -> dict[str, Callable[[str], Iterable[str]]]:
    # detect-secrets imports `requests` (~0.1 s): loaded on the first redaction only.
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    found: dict[str, type[Any]] = get_mapping_from_secret_type_to_class()
    return {name: found[name]().analyze_string for name in PLUGIN_KINDS if name in found}


def _plugins() -> Plugins:
    return tuple((PLUGIN_KINDS[n], f) for n, f in _all_plugins().items() if n not in NAMED_PLUGINS)


def _named_plugins() -> Plugins:
    return tuple((PLUGIN_KINDS[n], f) for n, f in _all_plugins().items() if n in NAMED_PLUGINS)


def _assignments(text: str) -> Iterator[tuple[int, int, str]]:
    """``KEY=value`` lines (.env), ``key: value`` lines (YAML) and quoted assignments in
    code or JSON (``password = "…"``, ``"api_key": "…"``) whose name says secret."""
    if "=" in text:
        for m in _overlapping(_ENV_LINE, text):
            # An upper-case name is a .env or shell variable: its value is a literal. In code
            # (`token = args.token`) a bare value is an expression unless it has a digit or symbol.
            loose = m.group(1).upper() == m.group(1) or bool(m.group(2))
            code = not loose and _looks_like_code(m.group(3))
            size = _secret_size(m.group(3), loose=loose)
            if _secret_name(m.group(1)) and not code and size:
                yield m.start(3), m.start(3) + size, _kind(m.group(1))
    if ":" in text:
        for m in _overlapping(_COLON_LINE, text):
            if text[max(0, m.start() - 1) : m.start() + 8] == "[secret: ":
                continue  # a placeholder
            size = _secret_size(m.group(2), loose=False)
            if _secret_name(m.group(1)) and size:
                yield m.start(2), m.start(2) + size, _kind(m.group(1))
    if '"' in text or "'" in text or "`" in text:
        for m in _overlapping(_QUOTED, text):
            size = _secret_size(m.group(4), loose=True)
            if _secret_name(m.group(2)) and size:
                yield m.start(4), m.start(4) + size, _kind(m.group(2))


def _looks_like_code(value: str) -> bool:
    """A name or a dotted path (``args.token``), not a literal: short, or without digits
    and inner capitals (a 40-character random run is a key, whatever it looks like)."""
    if _IDENTIFIER.fullmatch(value) is None:
        return False
    first = value.split(".", 1)[0]  # a random run before a dot is a key glued to a name
    return len(first) < 16 or not (re.search(r"\d", first) and re.search(r"[a-z][A-Z]", first))


def _parts(name: str) -> list[str]:
    return [p.lower() for chunk in re.split(r"[_.\-]+", name) for p in _CAMEL.findall(chunk)]


def _secret_name(name: str) -> bool:
    parts = _parts(name)
    if not parts or parts[-1] in _NOT_SECRET_LAST:
        return False
    return any(p in _SECRET_WORDS for p in parts) or any(pair in _SECRET_PAIRS for pair in pairwise(parts))


def _kind(name: str) -> str:
    parts = _parts(name)
    if any(p in ("password", "passwd", "pwd", "passphrase") for p in parts):
        return "password"
    if "token" in parts:
        return "token"
    if any(pair in _SECRET_PAIRS for pair in pairwise(parts)) or "apikey" in parts:
        return "api-key"
    return "secret"


def _secret_size(value: str, *, loose: bool) -> int:
    """How many leading characters of an assigned ``value`` are a secret: all of it when it
    can be one (``_value_ok``); else its leading run of key characters when that is a key
    glued to what follows (``KEY=<token>(…``, ``<token>${…``, ``<token>…;``: a call, a
    template or an ellipsis otherwise): 16+ characters, six digits or two and both cases,
    which a function's name is not; else 0."""
    if _value_ok(value, loose=loose):
        return len(value)
    run = _KEY_RUN.match(value)
    head = run.group() if run else ""
    digits = len(re.findall(r"\d", head))
    mixed = head not in (head.lower(), head.upper())
    if len(head) >= 16 and (digits >= 6 or (digits >= 2 and mixed)) and _value_ok(head, loose=loose):
        return len(head)
    return 0


def _value_ok(value: str, *, loose: bool) -> bool:
    """A value that can be a secret: not a reference to one (``$VAR``, ``${…}``,
    ``os.environ[…]``, ``<placeholder>``), a number, a boolean or a redaction. ``loose``
    (an ``=`` or a quoted value): 4 characters or more; otherwise (``key: value``) it must
    also not be a plain word (a digit, a symbol or inner capitals, or 16 characters)."""
    v = value.strip().rstrip(",;")
    if len(v) < 4 or v.lower() in _NOT_A_VALUE or v.startswith(("$", "%", "{", "<", "(", "[", "*", "…", ".", "/", "~")):
        return False
    if (
        re.fullmatch(r"[\d.,_-]+", v)
        or re.fullmatch(r"(.)\1{3,}", v)
        or "(" in v
        or "${" in v
        or v.endswith(("...", "…"))
    ):
        return False
    if re.match(r"(?i)(?:os\.|process\.env|env\.|settings\.|config\.|self\.|secrets\.|vault:|ENV\[)", v):
        return False
    if re.fullmatch(r"(?i)(?:x+|your[-_a-z]*|my[-_a-z]*|example[-_a-z]*|placeholder|dummy|test|secret|password)", v):
        return False
    if loose:
        return True
    return len(v) >= 16 or bool(re.search(r"\d|[^A-Za-z0-9_.]|[a-z][A-Z]", v))
