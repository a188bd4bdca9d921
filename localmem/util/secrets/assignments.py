"""Assignments whose name says it holds a secret: ``KEY=value`` (a ``.env`` file, a shell
line, an INI file, a connection string's ``Password=…;``), ``key: value`` (YAML, a
sentence) and quoted ones in code or JSON (``password = "…"``, ``"api_key": "…"``, and
the same JSON escaped inside a tool's output, ``\\"client_secret\\": \\"…\\"``).

A name holds a secret when its parts (split at ``_ - .`` and camelCase) hold a secret
word, or a part ends in one (``PGPASSWORD``, ``mail_password``, ``authToken``), or a pair
names a key (``ENCRYPTION_KEY``, ``SECRET_KEY``, ``api_key``), and its last part does not
say the value is about the secret rather than the secret (a type, a limit, a path, a URL:
a URL's password is ``credentials``' to find).

Invariant: the value must be able to be a secret (``value_ok``): not a reference to one
(``$VAR``, ``${…}``, ``os.environ[…]``, ``<placeholder>``), a number, a boolean, a
placeholder word or a call.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterator
from itertools import pairwise

from localmem.util.lazyre import Lazy

_SECRET_WORDS = {"password", "passwd", "pwd", "passphrase", "secret", "token", "apikey", "credential", "credentials"}
_SECRET_ENDINGS = ("password", "passwd", "passphrase", "secret", "token", "apikey")
_KEY_OWNERS = {
    "api", "access", "private", "secret", "auth", "encryption", "signing", "master", "session", "client",
    "app", "service", "hmac", "crypto", "cipher", "aes", "jwt", "webhook", "license", "storage", "account",
    "admin", "deploy", "ssh", "sas", "shared", "sign", "decryption", "root", "server",
}  # fmt: skip
_NOT_SECRET_LAST = {
    "type", "types", "limit", "limits", "count", "length", "len", "size", "url", "uri", "file", "path", "dir",
    "name", "id", "ids", "expiry", "expires", "ttl", "header", "endpoint", "field", "env", "var", "prefix",
    "hint", "policy", "rotation", "provider", "manager", "store", "scope", "scopes", "address", "addr",
    "host", "port", "user", "username", "enabled", "required", "format", "algorithm", "version",
}  # fmt: skip
_NOT_A_VALUE = {
    "none", "null", "nil", "true", "false", "undefined", "changeme", "redacted", "required", "optional",
    "string", "str", "bool", "int", "number", "object", "secret", "password", "token", "hidden", "masked",
}  # fmt: skip
# A value ends at a space, a quote or backquote, `,`, `;`, `)` or `]` (not at `#`: in a
# .env or INI value it is the password's, a comment starts after a space).
_ENV_LINE = Lazy(r"(?<![A-Za-z_])([A-Za-z_][A-Za-z0-9_.-]*)[ \t]*=[ \t]*([\"']?)([^\s\"'`,;)\]]+)\2")
_COLON_LINE = Lazy(r"(?<![A-Za-z_])([A-Za-z_][A-Za-z0-9_.-]*)[ \t]*:[ \t]+([^\s\"'`,;)\]]+)")
# Quoted, and the same JSON escaped in a string (`\"name\": \"value\"`): the quote with its
# backslashes is matched again after the value.
_QUOTED = Lazy(
    r"(\\*[\"']?)([A-Za-z_][A-Za-z0-9_.-]*)\1[ \t]*(?::=|=>|==|[:=])[ \t]*@?(\\*[\"'`])([^\"'`\s]{4,4096}?)\3"
)
_IDENTIFIER = Lazy(r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*")
_CAMEL = Lazy(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
_KEY_RUN = Lazy(r"[A-Za-z0-9_+/=-]*")
_CALL = Lazy(r"[A-Za-z_][\w.]*\(")
_REFERENCE = Lazy(r"(?i)(?:os\.|process\.env|env\.|settings\.|config\.|self\.|secrets\.|vault:|ENV\[)")
_PLACEHOLDER = Lazy(
    r"(?i)(?:x+|\*+|your[-_a-z]*|my[-_a-z]*|example[-_a-z]*|placeholder|dummy|test|secret|password|"
    r"pass(?:word)?123|hunter2|foobar|foo|bar|baz|abc123|qwerty|letmein|s3cr3t|p@ssw0rd|redacted)"
)
_KEY_CHARS = frozenset(string.ascii_letters + string.digits + "_-+/=.")


def assignments(text: str) -> Iterator[tuple[int, int, str]]:
    """Every secret assigned to a secret name in ``text``, as (start, end, kind)."""
    if "=" in text:
        for m in _overlapping(_ENV_LINE, text):
            name, quote, value = m.group(1), m.group(2), m.group(3)
            if not secret_name(name):
                continue
            if text[max(0, m.start() - 1) : m.start()] in ("?", "&"):
                value = value.split("&", 1)[0]  # a query string's parameter
            # An upper-case name is a .env or shell variable: its value is a literal. In code
            # (`token = args.token`) a bare value is an expression unless it has a digit or symbol.
            loose = name.upper() == name or bool(quote)
            code = not loose and _looks_like_code(value)
            size = secret_size(value, loose=loose)
            if not code and size:
                yield m.start(3), m.start(3) + size, kind_of(name)
    if ":" in text:
        for m in _overlapping(_COLON_LINE, text):
            if text[max(0, m.start() - 1) : m.start() + 8] == "[secret: ":
                continue  # a placeholder
            size = secret_size(m.group(2), loose=False)
            if secret_name(m.group(1)) and size:
                yield m.start(2), m.start(2) + size, kind_of(m.group(1))
    if '"' in text or "'" in text or "`" in text:
        for m in _overlapping(_QUOTED, text):
            size = secret_size(m.group(4), loose=True, quoted=True)
            if secret_name(m.group(2)) and size:
                yield m.start(4), m.start(4) + size, kind_of(m.group(2))


def _overlapping(pattern: Lazy, text: str) -> Iterator[re.Match[str]]:
    m = pattern.search(text)
    while m is not None:
        yield m
        m = pattern.search(text, m.start() + 1)


def _looks_like_code(value: str) -> bool:
    """A name or a dotted path (``args.token``), not a literal: without digits, or short
    and without a ``$`` inside (a 16-character run of both cases and digits is a key,
    whatever it looks like, and so is ``epf$JBd0Kh89``)."""
    if _IDENTIFIER.fullmatch(value) is None:
        return False
    first = value.split(".", 1)[0]  # a random run before a dot is a key glued to a name
    digit = re.search(r"\d", first) is not None
    mixed = first not in (first.lower(), first.upper())
    return not (digit and ((mixed and len(first) >= 16) or "$" in first[1:]))


def parts(name: str) -> list[str]:
    return [p.lower() for chunk in re.split(r"[_.\-]+", name) for p in _CAMEL.findall(chunk)]


def secret_name(name: str) -> bool:
    ps = parts(name)
    if not ps or ps[-1] in _NOT_SECRET_LAST:
        return False
    if any(p in _SECRET_WORDS or p.endswith(_SECRET_ENDINGS) for p in ps):
        return True
    return any(b == "key" and a in _KEY_OWNERS for a, b in pairwise(ps))


def kind_of(name: str) -> str:
    ps = parts(name)
    if any(p in ("pwd", "passphrase") or p.endswith(("password", "passwd")) for p in ps):
        return "password"
    if any(p.endswith("token") for p in ps):
        return "token"
    if any(b == "key" and a in _KEY_OWNERS for a, b in pairwise(ps)) or "apikey" in ps:
        return "api-key"
    return "secret"


def secret_size(value: str, *, loose: bool, quoted: bool = False) -> int:
    """How many leading characters of an assigned ``value`` are a secret: all of it when it
    can be one (``value_ok``); else its leading run of key characters when that is a key
    glued to what follows (``KEY=<token>(…``, ``<token>${…``, ``<token>…;``: a call, a
    template or an ellipsis otherwise): 16+ characters, six digits or two and both cases,
    which a function's name is not; else 0."""
    if value_ok(value, loose=loose, quoted=quoted):
        return len(value)
    run = _KEY_RUN.match(value)
    head = run.group() if run else ""
    digits = sum(c.isdigit() for c in head)
    mixed = head not in (head.lower(), head.upper())
    if len(head) >= 16 and (digits >= 6 or (digits >= 2 and mixed)) and value_ok(head, loose=loose):
        return len(head)
    return 0


def value_ok(value: str, *, loose: bool, quoted: bool = False) -> bool:
    """A value that can be a secret (module docstring). ``loose`` (an ``=`` or a quoted
    value): 4 characters or more; otherwise (``key: value``) it must also not be a plain
    word (a digit, a symbol or inner capitals, or 16 characters). A ``(`` ends a bare
    value (a call, or a key glued to the next text); a quoted one may hold it (Django's
    keys do)."""
    v = value.strip().rstrip(",;")
    if len(v) < 4 or v.lower() in _NOT_A_VALUE or v.startswith(("$", "%", "{", "<", "(", "[", "*", "…", ".", "/", "~")):
        return False
    if re.fullmatch(r"[\d.,_:-]+", v) or re.fullmatch(r"(.)\1{3,}", v) or "${" in v or v.endswith(("...", "…")):
        return False
    if (
        (not quoted and "(" in v)
        or _CALL.match(v)
        or _REFERENCE.match(v)
        or _PLACEHOLDER.fullmatch(v)
        or v.startswith("[secret: ")
    ):
        return False
    if len(v) >= 6 and _sequential(v):
        return False
    if loose:
        return True
    return len(v) >= 16 or bool(re.search(r"\d|[^A-Za-z0-9_.]|[a-z][A-Z]", v))


def _sequential(value: str) -> bool:
    """``abcdef``, ``123456``, ``ABCDEF0123``: detect-secrets' own filter (a test value)."""
    # detect-secrets brings `requests` (~0.1 s): imported on the first redaction, not with the store
    from detect_secrets.filters.heuristic import is_sequential_string

    return bool(is_sequential_string(value))


def key_like(value: str, min_len: int = 16) -> bool:
    """A run that reads as a key, not a word: long enough, letters and digits both."""
    return (
        len(value) >= min_len
        and all(c in _KEY_CHARS for c in value)
        and any(c.isdigit() for c in value)
        and any(c.isalpha() for c in value)
    )
