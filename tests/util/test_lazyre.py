"""``util.lazyre.Lazy``: compiled on first use, matching what ``re.compile`` matches."""

from __future__ import annotations

import re
import subprocess
import sys

from localmem.util import secrets
from localmem.util.lazyre import Lazy

TEXTS = ["", "abc", "Key=abc123 and key: xyz; KEY=1", "a\nb\n\nc", "ünï cödé 42"]


def test_lazy_matches_what_re_compile_matches() -> None:
    for pattern, flags in ((r"(\w)=(\w+)", 0), (r"key", re.IGNORECASE), (r"^.+$", re.MULTILINE), (r"\s+", 0)):
        lazy, eager = Lazy(pattern, flags), re.compile(pattern, flags)
        for text in TEXTS:
            for pos in (0, 2):
                assert _m(lazy.search(text, pos)) == _m(eager.search(text, pos))
                assert _m(lazy.match(text, pos)) == _m(eager.match(text, pos))
                assert _m(lazy.fullmatch(text, pos)) == _m(eager.fullmatch(text, pos))
                assert [_m(m) for m in lazy.finditer(text, pos)] == [_m(m) for m in eager.finditer(text, pos)]
                assert lazy.findall(text, pos) == eager.findall(text, pos)
            assert lazy.sub("#", text) == eager.sub("#", text)
            assert lazy.sub(lambda m: m.group(0).upper(), text, 1) == eager.sub(lambda m: m.group(0).upper(), text, 1)
            assert lazy.split(text) == eager.split(text)
        assert (
            lazy.compiled is lazy.compiled and lazy.compiled.pattern == pattern and lazy.compiled.flags == eager.flags
        )


def _m(m: re.Match[str] | None) -> tuple[int, int, tuple[str | None, ...]] | None:
    return None if m is None else (m.start(), m.end(), m.groups())


def test_a_pattern_is_compiled_on_first_use_only() -> None:
    bad = Lazy("(unclosed")  # would raise at import if compiled there
    assert bad.pattern == "(unclosed"
    try:
        bad.search("x")
    except re.error:
        pass
    else:
        raise AssertionError("an invalid pattern must fail when it is first used")


def test_importing_the_write_paths_rules_compiles_none_of_them() -> None:
    """A query imports util.secrets (the write path's redaction) and never runs it."""
    code = (
        "import re._compiler as rc\n"
        "seen = []\n"
        "orig = rc.compile\n"
        "rc.compile = lambda p, f=0: (seen.append(p), orig(p, f))[1]\n"
        "import localmem.util.secrets, localmem.util.gitinfo, localmem.util.injected\n"
        "print(sum('secret' in str(p) or 'sk-' in str(p) or 'private' in str(p) for p in seen))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "0"
    assert secrets.redact("token = 'sk-ant-abcdefghijklmnopqrstuvwx'") != "token = 'sk-ant-abcdefghijklmnopqrstuvwx'"
