"""Secrets found by where they stand rather than by their shape: a password given to a
command (``mysql -p…``, ``sshpass -p``, ``docker login -p``, ``htpasswd -b``,
``curl -u user:pass``, ``--password=…``), a ``.netrc`` or ``.pgpass`` line, a URL's
password (``scheme://user:pass@host``, an empty user too), a query parameter
(``?password=…``, an Azure SAS ``sig=``, ``X-Amz-Signature=``), an HTTP header
(``Authorization: Bearer …``, ``X-Api-Key: …``), an AWS secret key beside its key id.

Each rule is (kind, gate, pattern, group): the pattern runs only on texts holding one of
its gate's strings (most chat turns hold none), and the group is the secret. A value must
still be able to be one (``assignments.value_ok``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from localmem.util.lazyre import Lazy
from localmem.util.secrets import assignments, providers

# a shell word: quoted, or bare (to a space, a pipe, `;`, `&&` or a redirection)
_Q = r"(?:'([^'\n]{4,})'|\"([^\"\n]{4,})\"|((?:[^\s'\"`|;&<>]|&(?![&\s])){4,}))"
_SECRET_PARAM = (
    r"password|passwd|pwd|pass|passphrase|secret|client_secret|token|access_token|refresh_token|id_token|"
    r"api_key|apikey|api-key|auth_token|sig|signature|x-amz-signature|x-amz-security-token|x-goog-signature"
)
Rule = tuple[str, tuple[str, ...], Lazy, int]
RULES: tuple[Rule, ...] = (
    # flags of well-known commands: a glued `-pPASS` (mysql), `-p PASS` (sshpass, docker login)
    ("password", ("mysql", "mariadb"), Lazy(r"\b(?:mysql\w*|mariadb\w*)\b[^\n|;&]*?\s-p" + _Q), 0),
    ("password", ("sshpass",), Lazy(r"\bsshpass\s+-p\s*" + _Q), 0),
    (
        "password",
        ("docker", "podman", "helm"),
        Lazy(r"\b(?:docker|podman|helm)\b[^\n|;&]*?\blogin\b[^\n|;&]*?\s-p\s+" + _Q),
        0,
    ),
    ("password", ("htpasswd",), Lazy(r"\bhtpasswd\s+(?:-[a-zA-Z]*b[a-zA-Z]*\s+)(?:-\w+\s+)*\S+\s+\S+\s+" + _Q), 0),
    ("password", ("htpasswd",), Lazy(r"\bhtpasswd\s+(?:-[a-zA-Z]*n[a-zA-Z]*b[a-zA-Z]*\s+)(?:-\w+\s+)*\S+\s+" + _Q), 0),
    (
        "password",
        ("-u", "--user"),
        Lazy(r"(?:\bcurl\b|\bhttp\b|\bwget\b)[^\n|;&]*?\s(?:-u|--user)(?:=|\s+)['\"]?[^\s:'\"]*:([^\s'\"]{3,})"),
        1,
    ),
    (
        "password",
        ("-pass", "-pwd", "-secret", "-token", "-key"),
        Lazy(
            r"(?i)(?<![\w-])--?(?:password|passwd|pass|token|api-key|apikey|secret|client-secret|access-token)"
            r"(?:=|\s+)" + _Q
        ),
        0,
    ),
    # .netrc (one line or several) and .pgpass (host:port:database:user:password)
    ("password", ("machine",), Lazy(r"\bmachine\s+\S+(?:\s+login\s+\S+)?\s+password\s+(\S+)"), 1),
    ("password", (":",), Lazy(r"(?m)^[\w.*-]+:(?:\d{2,5}|\*):[\w.*-]+:[^\s:]+:(\S+)$"), 1),
    # a URL's password, the user possibly empty (`redis://:pw@host`)
    ("password", ("://",), Lazy(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s:/@'\"`]*:([^\s/@'\"`]+)@[\w.\[-]"), 1),
    # query and form parameters
    ("secret", ("=",), Lazy(r"(?i)[?&;](?:" + _SECRET_PARAM + r")=([^&\s#\"'<>`]{6,})"), 1),
    # HTTP headers
    (
        "bearer-token",
        ("bearer", "token", "bot", "Bearer", "Token", "BEARER", "TOKEN"),
        Lazy(
            r"(?i)\b(?:bearer|token|bot)\s+((?=[A-Za-z0-9._~+/-]*\d)(?=[A-Za-z0-9._~+/-]*[A-Za-z])"
            r"[A-Za-z0-9._~+/-]{16,}=*)(?![A-Za-z0-9._~+/=-])"
        ),
        1,
    ),
    (
        "basic-auth",
        ("asic",),
        Lazy(r"(?i)\bauthorization\s*[:=]\s*[\"']?basic\s+([A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])"),
        1,
    ),
    (
        "api-key",
        ("-key", "-Key", "-KEY", "-token", "-Token", "-TOKEN", "api-key", "API-Key"),
        Lazy(
            r"(?i)\b(?:x-api-key|api-key|x-auth-token|private-token|x-goog-api-key|anthropic-api-key|"
            r"x-[a-z]+-access-token|x-access-token|x-api-token)\s*[\"']?\s*:\s*[\"']?([A-Za-z0-9._~+/=-]{12,})"
        ),
        1,
    ),
    ("gcp-private-key-id", ("private_key_id",), Lazy(r"\"private_key_id\"\s*:\s*\"([a-f0-9]{40})\""), 1),
    (
        "aws-secret-key",
        ("ecret", "ECRET"),
        Lazy(
            r"(?i)(?:aws_?secret_?access_?key|secret_?access_?key|aws_?secret_?key)[\"']?\s*[:=]\s*[\"']?"
            r"([A-Za-z0-9/+=]{40})"
        ),
        1,
    ),
)
_AWS_SECRET = Lazy(r"(?<![A-Za-z0-9/+=])([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])")
_NEAR = 400  # characters from a key id within which a 40-character run is its secret


def placed(text: str) -> Iterator[tuple[int, int, str]]:
    """Every secret of ``RULES`` in ``text``, and AWS secret keys beside their key ids."""
    for kind, gate, pattern, group in RULES:
        if not any(g in text for g in gate):
            continue
        for m in pattern.finditer(text):
            g = group or next((i for i in (1, 2, 3) if m.group(i) is not None), 0)
            value = m.group(g)
            if value is None or not assignments.value_ok(value, loose=True):
                continue
            yield m.start(g), m.end(g), kind
    yield from _aws_secrets(text)


def _aws_secrets(text: str) -> Iterator[tuple[int, int, str]]:
    """A 40-character run of the secret key's alphabet near an AWS key id (a CSV row, a
    sentence): both cases and a digit, not hex (a git SHA is 40 hex digits)."""
    ids = [m.start() for m in providers.aws_key_ids(text)]
    if not ids:
        return
    for m in _AWS_SECRET.finditer(text):
        run = m.group(1)
        if re.fullmatch(r"[0-9a-fA-F]+", run) or not (re.search(r"[a-z]", run) and re.search(r"[A-Z]", run)):
            continue
        if any(c.isdigit() for c in run) and any(abs(m.start() - at) <= _NEAR for at in ids):
            yield m.start(1), m.end(1), "aws-secret-key"
