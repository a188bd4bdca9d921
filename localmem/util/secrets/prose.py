"""Secrets said in a sentence: "the db password is tQM&jw9o7rO6", "my wifi password is
Saffron#8505", "log in with password Xy7…", "the passphrase for the backup key: …".

Policy (docs/security.md): after a password word (password, passwd, passcode,
passphrase, pwd, pw), optionally "for/of/to/on" and up to three words, optionally "is",
"was", "would be", ":", "=" or "-", the next word is the secret when it can be a password
and is not a plain word: 6 to 64 characters with a digit or a symbol, or a capital inside
it (``hunter22``, ``Tr0ub4dor``, ``sunflower!``). After "secret", "token", "api key" or
"key", the next word must read as a key (16+ characters, letters and digits). Not caught:
a password that is a plain word or only digits ("my password is sunflower", "the PIN is
4821"), one spread over several words, or said without a password word ("it's hunter2").
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from localmem.util.lazyre import Lazy
from localmem.util.secrets import assignments

_SP = r"[^\S\n]"
_FOR = rf"{_SP}+(?:for|of|to|on|at){_SP}+(?:[\w.@'-]+{_SP}+){{0,2}}[\w.@'-]+"
_SAYS = rf"(?::|=|-|—|is|was|(?:would|will|should){_SP}+be|now{_SP}+is|is{_SP}+now)"
# "password for the backup key: V", "password is V", "password: V", "password V"
_LINK = rf"(?:{_FOR}{_SP}*{_SAYS}{_SP}*|{_SP}*{_SAYS}{_SP}*|{_SP}+)"
_PASSWORD = Lazy(
    rf"(?i)\b(?:password|passwd|passcode|passphrase|pass{_SP}?word|pwd|pw)s?{_LINK}[\"'`“]?([^\s\"'`”]{{4,80}})"
)
_KEY = Lazy(rf"(?i)\b(?:secret|token|api{_SP}?key|key|access{_SP}key){_LINK}[\"'`“]?([A-Za-z0-9_+/=.-]{{16,200}})")
_TRAIL = ".,;:?)]}>\u2019\u201d"


def prose(text: str) -> Iterator[tuple[int, int, str]]:
    """Every secret said after a password or key word in ``text`` (module docstring)."""
    for m in _PASSWORD.finditer(text):
        if text[max(0, m.start() - 1) : m.start()] in ("?", "&", "_", ".", "-", "/", "$"):
            continue  # a parameter or a name's part (`&password=`, `db_password`): assignments' to read
        start, value = m.start(1), _trim(m.group(1))
        if value.startswith(("*", "_", "~")) or "**" in value or "__" in value or value.endswith(("*", "_", "~")):
            continue  # markdown emphasis ("**Password Protection:**"): a heading, not a value
        if _password_like(value):
            yield start, start + len(value), "password"
    for m in _KEY.finditer(text):
        start, value = m.start(1), _trim(m.group(1))
        if assignments.key_like(value) and assignments.value_ok(value, loose=True):
            yield start, start + len(value), "secret"


def _trim(value: str) -> str:
    """A sentence's punctuation after the value is the sentence's (a ``!`` is kept: it may
    be the password's, and taking one more character out costs nothing)."""
    return value.rstrip(_TRAIL)


def _password_like(value: str) -> bool:
    if not 6 <= len(value) <= 64 or not assignments.value_ok(value, loose=True):
        return False
    if value.startswith(("http", "[")) or "://" in value:
        return False
    # a sentence's "!" or "?" after a word is no symbol of a password ("a password manager!")
    symbol = bool(re.search(r"[^A-Za-z0-9]", value.strip("'-").rstrip("!?")))
    digit = any(c.isdigit() for c in value)
    inner_capital = bool(re.search(r"[a-z][A-Z]", value))
    if value.rstrip("!?").isalpha() and not inner_capital:
        return False  # a plain word
    if symbol and not digit and not inner_capital and re.fullmatch(r"[A-Za-z]+(?:[-'][A-Za-z]+)*", value):
        return False  # a hyphenated word ("well-known")
    return digit or symbol or inner_capital
