"""The secrets guard on the forms people paste (issue 50 item 2): the synthetic corpus of
``localmem.bench.secrets_corpus`` (94 kinds in 14 forms, values new for every seed) is
caught, each form on its own; only the secret's characters are replaced; the prose policy
(docs/security.md) holds both ways; code that only looks like keys is left alone."""

from __future__ import annotations

from collections import Counter

import pytest

from localmem.bench import secrets_bench, secrets_corpus
from localmem.util.secrets import kinds, redact


@pytest.mark.parametrize("seed", [50, 1, 2])
def test_the_corpus_is_caught_in_every_form(seed: int) -> None:
    items = secrets_corpus.corpus(2, seed)
    assert len(items) >= 150 and len({s.kind for s in items}) >= 50
    assert {s.form for s in items} == set(secrets_corpus.FORMS)
    total, caught = Counter[str](), Counter[str]()
    missed = []
    for item in items:
        out = redact(item.text)
        assert redact(out) == out, item.kind  # idempotent
        total[item.form] += 1
        if secrets_corpus.leaked(item, out):
            missed.append((item.kind, out))
        else:
            caught[item.form] += 1
    assert sum(caught.values()) >= 0.97 * len(items), missed
    for form in total:
        assert caught[form] >= 0.9 * total[form], (form, [m for m in missed if m[0]])


def test_the_corpus_is_new_for_every_seed() -> None:
    a, b = secrets_corpus.corpus(1, 1), secrets_corpus.corpus(1, 2)
    assert not {n for s in a for n in s.needles} & {n for s in b for n in s.needles}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("PGPASSWORD=Xq7!mPz2 psql -h db -U app", "PGPASSWORD=[secret: password] psql -h db -U app"),
        ("db_password=epf$JBd0Kh89", "db_password=[secret: password]"),
        ("mysql -u root -pS3cr3t!x shop", "mysql -u root -p[secret: password] shop"),
        ("sshpass -p 'Tr0ub4dor&3' ssh me@h", "sshpass -p '[secret: password]' ssh me@h"),
        ("docker login -u ci -p Maple!8597dw reg.io", "docker login -u ci -p [secret: password] reg.io"),
        ("htpasswd -b -c /etc/.htpasswd admin Velvet!0719", "htpasswd -b -c /etc/.htpasswd admin [secret: password]"),
        ("curl -u root:Quartz$0234qw https://x.io", "curl -u root:[secret: password] https://x.io"),
        ("machine h.io login me password wFk!kXaU3", "machine h.io login me password [secret: password]"),
        ("db.internal:5432:prod:app:Maple&32732d", "db.internal:5432:prod:app:[secret: password]"),
        ("REDIS_URL=redis://:Harbor*8544ir@cache:6379/0", "REDIS_URL=redis://:[secret: password]@cache:6379/0"),
        ("postgresql://app:sfS$FmFI8@db:5432/prod", "postgresql://app:[secret: password]@db:5432/prod"),
        ("the db password is tQM&jw9o7rO6 btw", "the db password is [secret: password] btw"),
        (
            "the signing secret is whsec_PZB5FmseCJaqmtbyaHEJmiJJEDDvCxqo, ok",
            "the signing secret is [secret: stripe-webhook-secret], ok",
        ),
        (
            "https://api.telegram.org/bot8414215051:AA3TgwZnHtrrYqdV1RDv2hekG3iPZrX77mz/sendMessage",
            "https://api.telegram.org/bot[secret: telegram-token]/sendMessage",
        ),
        ("?sv=2022-11-02&sp=rl&sig=Xk3%2Bq9ZpL0aT7wYvB2nM4cR8sD1fG6hJ%3D", "?sv=2022-11-02&sp=rl&sig=[secret: secret]"),
        (
            "-d 'username=admin&password=Saffron%21803&remember=1'",
            "-d 'username=admin&password=[secret: password]&remember=1'",
        ),
    ],
)
def test_only_the_secret_is_replaced(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_a_wrapped_key_goes_whole() -> None:
    item = next(s for s in secrets_corpus.corpus(1, 3) if s.kind == "wrapped-sts-token")
    out = redact(item.text)
    assert out == "[secret: aws-session-token]", out


def test_a_kubernetes_secret_keeps_its_names() -> None:
    text = "kind: Secret\ndata:\n  username: YWRtaW4=\n  password: UzNjcjN0IXg=\n"
    assert redact(text) == "kind: Secret\ndata:\n  username: [secret: k8s-secret]\n  password: [secret: k8s-secret]\n"
    assert redact("kind: ConfigMap\ndata:\n  LOG_LEVEL: info\n") == "kind: ConfigMap\ndata:\n  LOG_LEVEL: info\n"


@pytest.mark.parametrize(
    "text",
    [
        "My password is weak, I know. The password manager keeps the rest.",
        "**Password Protection:**\n\n1. **Use a password manager**: it helps.",
        "I forgot my password again, and the password reset link expired.",
        "The secret is patience. The key is consistency. The token limit is 4096.",
        "the PIN is 4821",  # digits only: not caught (policy)
        "my wifi password is sunflower",  # a plain word: not caught (policy)
        "Password: see the vault. Passcode: ask Dana.",
        "a password-protected folder and a well-known passphrase scheme",
    ],
)
def test_prose_that_holds_no_secret_is_left_alone(text: str) -> None:
    assert redact(text) is text


def test_documentation_example_keys_are_left_alone() -> None:
    text = "AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE\nAWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    assert redact(text) is text


def test_code_snippets_are_left_alone() -> None:
    snippets = secrets_bench.code_snippets(600, seed=11)
    changed = [(s, kinds(s)) for s in snippets if redact(s) != s]
    assert len(changed) <= 0.01 * len(snippets), changed[:5]
