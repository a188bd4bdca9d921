"""The secrets guard (localmem.util.secrets): every planted kind replaced by its typed
placeholder, only the secret's own characters, private spans dropped, idempotent, and
ordinary prose and code left exactly as they were."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from localmem.util.secrets import drop_private, kinds, redact
from tests.util.secret_corpus import MAKERS, corpus, needles, private_spans


def test_the_corpus_is_big_and_varied() -> None:
    planted = corpus()
    assert len(planted) >= 200 and len({p.kind for p in planted}) >= 20
    assert len({p.value for p in planted}) == len(planted)


@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_every_kind_is_replaced(kind: str) -> None:
    for p in [p for p in corpus() if p.kind == kind]:
        out = redact(p.text)
        assert not [n for n in needles(p) if n in out], (p.text, out)
        assert "[secret: " in out
        assert redact(out) == out  # idempotent: a placeholder is no secret


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "DATABASE_URL=postgres://app:S3cretPw9@db.internal:5432/prod",
            "DATABASE_URL=postgres://app:[secret: password]@db.internal:5432/prod",
        ),
        (
            'curl -H "Authorization: Bearer abcDEF0123456789ghiJKL" https://x.dev',
            'curl -H "Authorization: Bearer [secret: bearer-token]" https://x.dev',
        ),
        ("export AWS_ACCESS_KEY_ID=AKIAQWERTYUIOPASDFGH", "export AWS_ACCESS_KEY_ID=[secret: aws-access-key]"),
        ("DB_PASSWORD=hunter22\nDB_HOST=localhost", "DB_PASSWORD=[secret: password]\nDB_HOST=localhost"),
        ('password = "hunter22"', 'password = "[secret: password]"'),
        ("mysql --password=Sup3rSecret db", "mysql --password=[secret: password] db"),
        # a key glued to the next text by a "(" (drawn by the fuzz below in CI): a "(" had made it a call
        (
            "SENDINBLUE_API_KEY=OqMtqoIbmuQ0LTZkoE4myIa4VCB9XM9h(export AWS_ACCESS_KEY_ID=AKIAF6CX27G3SY12JDF0",
            "SENDINBLUE_API_KEY=[secret: api-key](export AWS_ACCESS_KEY_ID=[secret: aws-access-key]",
        ),
        ("TOKEN=3f9a81c0d2e4b5a69788(x", "TOKEN=[secret: token](x"),
        ("password: Xy7qLmN0pRsT4uVw(zz", "password: [secret: password](zz"),
    ],
)
def test_only_the_secret_is_replaced(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_kinds_named() -> None:
    text = "AKIAQWERTYUIOPASDFGH and ghp_" + "a1" * 18 + " and sk-ant-api03-" + "x" * 40
    assert kinds(text) == ["aws-access-key", "github-token", "anthropic-key"]


@pytest.mark.parametrize(
    "text",
    [
        "Use `git commit 3f9a2b1c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a` please.",
        "The request id was 550e8400-e29b-41d4-a716-446655440000.",
        "The token limit is 4096 and max_tokens=512.",
        "token = args.token\nself.password = password\nsecret = os.environ['SECRET']",
        'password = input("Password: ")\napi_key = os.getenv("API_KEY")\nTOKEN=${GITHUB_TOKEN}',
        "Token: Tokens are how models count text.",
        "My password is weak, I know. The secret to good bread is time.",
        "the tokenizer: bert-base-uncased, token_type: bearer, password_file: /run/secrets/db",
        'API_KEY = "<your-api-key>"\nPASSWORD=changeme\nSECRET_KEY=xxxxxxxx',
        "An Authorization: Bearer header carries the token; bearer of bad news.",
        "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "API_KEY=get_api_key()\napi_key = load_Key2FromVaultNow(x)\nsecret_key = sha256_of_v2(x)",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact(text) is text


def test_private_spans_are_dropped() -> None:
    assert drop_private("my key is <private>abc</private> ok") == "my key is ok"
    assert drop_private("a <PRIVATE>x\ny</Private>\nb") == "a\nb"
    assert drop_private("keep this <private>and not this, nor what follows") == "keep this"
    assert drop_private("no tags here") == "no tags here"
    marker = private_spans(1)[0]
    assert marker not in redact(f"before <private>{marker} ghp_{'b2' * 18}</private> after")


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=300))
def test_redact_is_idempotent_and_total(text: str) -> None:
    once = redact(text)
    assert redact(once) == once


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(corpus(2)), min_size=1, max_size=5), st.text(max_size=40))
def test_secrets_among_other_text(planted: list, filler: str) -> None:  # type: ignore[type-arg]
    text = filler.join(p.text for p in planted)
    out = redact(text)
    for p in planted:
        assert not [n for n in needles(p) if n in out]


@pytest.mark.parametrize("filler", ["", "(", "${", "X…;", "$", "[$", "\t"])
def test_every_pair_of_secrets_glued_by_a_filler(filler: str) -> None:
    # Deterministic and exhaustive for the joins the fuzz above drew once each: every
    # ordered pair of planted secrets, glued by characters that made a key look like a
    # call ("("), a template ("${"), an ellipsis or code (a dotted name right after it).
    planted = corpus(1)
    leaks = []
    for a, b in itertools.product(planted, repeat=2):
        out = redact(a.text + filler + b.text)
        leaks += [(p.kind, filler) for p in (a, b) if [n for n in needles(p) if n in out]]
    assert not leaks
