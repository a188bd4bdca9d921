"""``localmem bench secrets``: what the secrets guard catches and what it takes that is not
a secret.

- caught: the synthetic corpus (``secrets_corpus``: every kind in its forms, values drawn
  from ``--seed``) through ``redact``; an item is caught when none of its needles is left.
  Counted per form and overall, the kinds missed named;
- false positives on chat: every turn of the LoCoMo and LongMemEval files given (each
  distinct text once) that ``redact`` changes, with the kinds and a few examples (the
  matched text shown: these are public data sets, and a real token in them is named so);
- false positives on code: synthetic snippets full of what looks like a key and is not
  (git SHAs, UUIDs, sha256 / docker digests, lockfile integrity strings, base64 images,
  documentation example keys, secrets read from the environment, ports after ``-p``).

``--code DIR`` runs the guard of another source tree (an older checkout) in a child
process, so the same numbers measure the code before a change. Touches no store.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import random
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from localmem.bench import secrets_corpus, secrets_tokens
from localmem.errors import InputError
from localmem.util import secrets

Guard = Callable[[list[str]], list[str]]
_CHILD = (
    "import json, sys\n"
    "from localmem.util.secrets import redact\n"
    "texts = json.load(sys.stdin)\n"
    "json.dump([redact(t) for t in texts], sys.stdout)\n"
)


def guard(code: Path | None) -> Guard:
    """``redact`` over a list of texts: this checkout's, or ``code``'s in a child process."""
    if code is None:
        return lambda texts: [secrets.redact(t) for t in texts]
    if not (code / "localmem" / "util").is_dir():
        raise InputError("--code: no localmem package in that folder", path=str(code))

    def run(texts: list[str]) -> list[str]:
        env = {**os.environ, "PYTHONPATH": str(code)}
        proc = subprocess.run(
            [sys.executable, "-c", _CHILD],
            input=json.dumps(texts),
            capture_output=True,
            text=True,
            env=env,
            cwd=code,  # not this checkout: `python -c` puts the working folder first on sys.path
            check=False,
        )
        if proc.returncode != 0:
            raise InputError(f"--code: the guard in {code} failed: {proc.stderr.strip()[-400:]}")
        out: list[str] = json.loads(proc.stdout)
        return out

    return run


def chat_turns(locomo: Path | None, longmemeval: Path | None) -> dict[str, list[str]]:
    """Each data set's distinct turn texts (LoCoMo: with the image captions it indexes)."""
    out: dict[str, list[str]] = {}
    if locomo is not None:
        texts = []
        for sample in _load(locomo):
            for key, session in sample.get("conversation", {}).items():
                if key.startswith("session_") and isinstance(session, list):
                    for t in session:
                        texts.append(" ".join(str(t.get(k, "")) for k in ("text", "blip_caption") if t.get(k)))
        out["locomo"] = list(dict.fromkeys(texts))
    if longmemeval is not None:
        texts = [str(t.get("content", "")) for q in _load(longmemeval) for s in q["haystack_sessions"] for t in s]
        out["longmemeval"] = list(dict.fromkeys(texts))
    return out


def _load(path: Path) -> list[Any]:
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as fh:
            items = json.load(fh)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot read {path}: {exc}", path=str(path)) from exc
    if not isinstance(items, list):
        raise InputError("expected a JSON list (LoCoMo or LongMemEval)", path=str(path))
    return items


def code_snippets(n: int = 300, seed: int = 7) -> list[str]:
    """Code and tool output that holds no secret (module docstring), values drawn from ``seed``."""
    rng = random.Random(seed)

    def r(alphabet: str, k: int) -> str:
        return "".join(rng.choice(alphabet) for _ in range(k))

    hx, an, b64 = secrets_tokens.HEX, secrets_tokens.AN, secrets_tokens.B64
    makers: list[Callable[[], str]] = [
        lambda: f"commit {r(hx, 40)}\nAuthor: Dana <dana@example.com>\n\n    fix the parser",
        lambda: f"git checkout {r(hx, 7)} && git cherry-pick {r(hx, 40)}",
        lambda: f"{r(hx, 64)}  dist/localmem-1.2.0.tar.gz",
        lambda: f"docker pull python@sha256:{r(hx, 64)}",
        lambda: f'{{"request_id": "{uuid.UUID(int=rng.getrandbits(128), version=4)}", "status": "ok"}}',
        lambda: f'"integrity": "sha512-{r(b64, 86)}=="',
        lambda: f'<script src="app.js" integrity="sha384-{r(b64, 64)}" crossorigin></script>',
        lambda: f"![plot](data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAA{r(b64, 400)}=)",
        lambda: f"pip install --require-hashes requests==2.32.3 --hash=sha256:{r(hx, 64)}",
        lambda: f'checksum = "{r(hx, 64)}"',
        lambda: f"github.com/stretchr/testify v1.9.0 h1:{r(b64, 43)}=",
        lambda: "aws configure set aws_access_key_id AKIAIOSFODNN7EXAMPLE",
        lambda: "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        lambda: 'password = os.environ["DB_PASSWORD"]\napi_key = settings.API_KEY',
        lambda: "const token = await getAccessToken(client);\nif (!token) throw new Error('no token');",
        lambda: "PASSWORD_MIN_LENGTH = 12\nTOKEN_TTL_SECONDS = 3600\nMAX_TOKENS = 4096",
        lambda: (
            "def check_password(password: str, hashed: bytes) -> bool:\n    return bcrypt.checkpw(password.encode(), hashed)"
        ),
        lambda: f"docker run -p {rng.randint(1024, 9999)}:80 -e DB_PASSWORD=$DB_PASSWORD nginx",
        lambda: f"ssh -p {rng.randint(1024, 9999)} deploy@{r('0123456789', 2)}.0.0.1",
        lambda: "mysql -u root -p shop   # prompts for the password",
        lambda: 'curl -u "$USER:$PASS" https://api.example.com',
        lambda: "DATABASE_URL=postgres://app:${DB_PASSWORD}@db:5432/app",
        lambda: f"GET /search?q=rust+lifetimes&page={rng.randint(1, 9)}&sort=desc HTTP/1.1",
        lambda: f".btn {{ color: #{r(hx, 6)}; background: #{r(hx, 6)}; }}",
        lambda: f'<link href="/static/main.{r(hx, 8)}.css" rel="stylesheet">',
        lambda: f'ETag: "{r(hx, 32)}"\nX-Request-Id: {r(an, 26)}',
        lambda: f'{{"_id": {{"$oid": "{r(hx, 24)}"}}, "name": "widget"}}',
        lambda: f"token_type: bearer\nexpires_in: 3600\nscope: repo read:org\nsession_id: {r(hx, 16)}",
        lambda: "kind: ConfigMap\ndata:\n  LOG_LEVEL: info\n  FEATURE_FLAGS: search,export",
        lambda: f"key = hashlib.sha256(data).hexdigest()  # e.g. {r(hx, 64)}",
        lambda: f"const cacheKey = `${{userId}}:{r(an, 8)}`;",
        lambda: f"Successfully built {r(hx, 12)}\nSuccessfully tagged app:latest",
        lambda: f"pk_live_{r(an, 24)} is the publishable key; the secret one stays on the server",
        lambda: f"ulid: 01{r('0123456789ABCDEFGHJKMNPQRSTVWXYZ', 24)}",
        lambda: f"- uses: actions/checkout@{r(hx, 40)}  # v4.2.2",
        lambda: "export GITHUB_TOKEN=$(gh auth token)\nexport NPM_TOKEN=${{ secrets.NPM_TOKEN }}",
        lambda: f"password_hash = '$2b$12${r(b64.replace('+', '.'), 53)}'",
        lambda: "tokenizer = AutoTokenizer.from_pretrained('bert-base-uncased')\ntokens = tokenizer(text)",
        lambda: f"Build ID: {r(hx, 40)}\nBuild time: 2026-01-05T10:00:00Z",
        lambda: f"wheel: sha256={r(b64.replace('+', '-').replace('/', '_'), 43)}",
        lambda: f'"thumbnail": "{base64.b64encode(rng.randbytes(240)).decode()}"',
        lambda: "kubectl create secret generic db --from-literal=password=$DB_PASSWORD",
        lambda: 'db:\n  password: "{{ vault_db_password }}"\n  user: "{{ db_user }}"',
        lambda: '{"api_key": "<YOUR_API_KEY>", "model": "gpt-4o-mini"}',
        lambda: 'curl -H "Authorization: Bearer $TOKEN" https://api.example.com/v1/me',
        lambda: "REDIS_URL=redis://localhost:6379/0\nSSH_URL=ssh://git@github.com/acme/app.git",
        lambda: f"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{r(b64, 43)} dana@laptop",
        lambda: "Started 12:30:45, finished 13:02:11:00 (log 10:00:00:00:01)",
        lambda: "git log --format=%H%x09%an%x09%s -n 20",
        lambda: "GET /search?q=hello%20world&lang=en&page=2 HTTP/1.1",
        lambda: 'echo "aGVsbG8gd29ybGQgZnJvbSB0aGUgZG9jcw==" | base64 -d',
        lambda: "docker login -u acme --password-stdin < token.txt",
        lambda: "htpasswd -c /etc/nginx/.htpasswd admin   # asks for the password twice",
    ]
    return [rng.choice(makers)() for _ in range(n)]


def run(
    *,
    seed: int = 50,
    per_kind: int = 2,
    locomo: Path | None = None,
    longmemeval: Path | None = None,
    code: Path | None = None,
    snippets: int = 300,
) -> dict[str, Any]:
    redact_all = guard(code)
    items = secrets_corpus.corpus(per_kind, seed)
    t0 = time.perf_counter()
    outs = redact_all([s.text for s in items])
    forms: dict[str, list[int]] = {f: [0, 0] for f in secrets_corpus.FORMS}
    missed: Counter[str] = Counter()
    for item, out in zip(items, outs, strict=True):
        forms[item.form][1] += 1
        if secrets_corpus.leaked(item, out):
            missed[item.kind] += 1
        else:
            forms[item.form][0] += 1
    caught = sum(c for c, _ in forms.values())
    result: dict[str, Any] = {
        "code": str(code) if code else "this checkout",
        "seed": seed,
        "corpus": {"items": len(items), "kinds": len({s.kind for s in items}), "caught": caught},
        "forms": forms,
        "missed_kinds": dict(missed),
        "corpus_s": round(time.perf_counter() - t0, 2),
    }
    snippets_in = code_snippets(snippets, seed)
    snippets_out = redact_all(snippets_in)
    changed = [(a, b) for a, b in zip(snippets_in, snippets_out, strict=True) if a != b]
    result["code_snippets"] = {"snippets": len(snippets_in), "changed": len(changed), "examples": _examples(changed)}
    result["chat"] = {}
    for name, texts in chat_turns(locomo, longmemeval).items():
        t0 = time.perf_counter()
        outs = redact_all(texts)
        spent = time.perf_counter() - t0
        changed = [(a, b) for a, b in zip(texts, outs, strict=True) if a != b]
        result["chat"][name] = {
            "turns": len(texts),
            "changed": len(changed),
            "ms_per_1k_turns": round(spent * 1e6 / max(1, len(texts))),
            "examples": _examples(changed),
        }
    return result


def _examples(changed: list[tuple[str, str]], n: int = 12, width: int = 90) -> list[str]:
    """Where each changed text first differs, with a little of what is around it."""
    out = []
    for before, after in changed[:n]:
        at = next((i for i, (a, b) in enumerate(zip(before, after, strict=False)) if a != b), 0)
        seg = before[max(0, at - 30) : at + width - 30]
        kind = after[at:].split("]", 1)[0].removeprefix("[secret: ")
        out.append(f"{kind}: {' '.join(seg.split())}")
    return out


def print_report(result: dict[str, Any]) -> None:
    c = result["corpus"]
    print(f"secrets guard: code: {result['code']}, corpus seed {result['seed']}")
    print(f"{'form':<12} {'caught':>7} {'of':>4}")
    for form, (ok, total) in result["forms"].items():
        if total:
            print(f"{form:<12} {ok:>7} {total:>4}")
    print(f"{'all':<12} {c['caught']:>7} {c['items']:>4}  ({100 * c['caught'] / c['items']:.1f}%, {c['kinds']} kinds)")
    if result["missed_kinds"]:
        print("missed: " + ", ".join(f"{k} ({n})" for k, n in sorted(result["missed_kinds"].items())))
    s = result["code_snippets"]
    print(f"\nfalse positives on code snippets: {s['changed']} of {s['snippets']}")
    for line in s["examples"]:
        print(f"  {line}")
    for name, ch in result["chat"].items():
        print(
            f"\nfalse positives on {name}: {ch['changed']} of {ch['turns']} turns changed"
            f" ({ch['ms_per_1k_turns']} ms per 1k turns)"
        )
        for line in ch["examples"]:
            print(f"  {line}")
