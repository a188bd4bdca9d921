"""A corpus of planted secrets: synthetic values in each kind's real format (random, seeded;
none is a real credential), each inside a sentence or a snippet the way agent transcripts
carry them (a pasted .env, a curl command, a config file, a connection string).

``corpus(per_kind)`` -> list of ``Planted(kind, value, text)``; ``needles(p)`` are the
strings that must not be found anywhere a store keeps or writes: the value, and its
longest runs of letters and digits (what a full-text index would keep of it)."""

from __future__ import annotations

import base64
import json
import random
import re
import string
from collections.abc import Callable
from dataclasses import dataclass

AN = string.ascii_letters + string.digits
UP = string.ascii_uppercase + string.digits
HEX = "0123456789abcdef"
B64 = AN + "+/"


@dataclass(frozen=True)
class Planted:
    kind: str
    value: str
    text: str


def _r(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _b64url(obj: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")


def _pem(rng: random.Random, label: str) -> str:
    body = "\n".join(_r(rng, B64, 64) for _ in range(6))
    return f"-----BEGIN {label}-----\n{body}\n{_r(rng, B64, 20)}==\n-----END {label}-----"


Maker = Callable[[random.Random], tuple[str, str]]  # -> (value, text holding it)
MAKERS: dict[str, Maker] = {
    "aws-access-key": lambda r: (v := "AKIA" + _r(r, UP, 16), f"export AWS_ACCESS_KEY_ID={v}"),
    "aws-secret-key": lambda r: (v := _r(r, B64, 40), f"aws_secret_access_key = {v}"),
    "github-token": lambda r: (v := "ghp_" + _r(r, AN, 36), f"git clone https://{v}@github.com/acme/app.git"),
    "github-pat": lambda r: (v := "github_pat_" + _r(r, AN, 22) + "_" + _r(r, AN, 59), f"GH_TOKEN={v} gh pr list"),
    "openai-key": lambda r: (v := "sk-" + _r(r, AN, 20) + "T3BlbkFJ" + _r(r, AN, 20), f"my key is {v}, use it"),
    "openai-project-key": lambda r: (v := "sk-proj-" + _r(r, AN + "_-", 56), f'client = OpenAI(api_key="{v}")'),
    "anthropic-key": lambda r: (v := "sk-ant-api03-" + _r(r, AN + "_-", 93) + "AA", f"ANTHROPIC_API_KEY: {v}"),
    "slack-bot-token": lambda r: (
        v := f"xoxb-{_r(r, string.digits, 12)}-{_r(r, string.digits, 13)}-{_r(r, AN, 24)}",
        f"the bot token is {v} (rotate it later)",
    ),
    "slack-webhook": lambda r: (
        v := f"https://hooks.slack.com/services/T{_r(r, UP, 8)}/B{_r(r, UP, 10)}/{_r(r, AN, 24)}",
        f"post alerts to {v}",
    ),
    "stripe-key": lambda r: (v := "sk_live_" + _r(r, AN, 24), f"stripe.api_key = '{v}'"),
    "google-api-key": lambda r: (v := "AIza" + _r(r, AN + "_-", 35), f"maps?key={v}&q=berlin"),
    "rsa-private-key": lambda r: (v := _pem(r, "RSA PRIVATE KEY"), f"here is the deploy key:\n{v}\nkeep it safe"),
    "openssh-private-key": lambda r: (v := _pem(r, "OPENSSH PRIVATE KEY"), f"cat ~/.ssh/id_ed25519\n{v}"),
    "gcp-service-account": lambda r: (
        v := _pem(r, "PRIVATE KEY").replace("\n", "\\n"),
        json.dumps({"type": "service_account", "private_key_id": _r(r, HEX, 40), "private_key": v + "\\n"}).replace(
            "\\\\n", "\\n"
        ),
    ),
    "jwt": lambda r: (
        v := _b64url({"alg": "HS256", "typ": "JWT"}) + "." + _b64url({"sub": _r(r, HEX, 12)}) + "." + _r(r, AN, 43),
        f"the session cookie was {v}",
    ),
    "bearer-token": lambda r: (
        v := _r(r, AN, 24) + _r(r, string.digits, 4) + _r(r, AN, 12),
        f'curl -H "Authorization: Bearer {v}" https://api.acme.dev/v1/me',
    ),
    "postgres-password": lambda r: (
        v := _r(r, AN, 10) + "7x",
        f"DATABASE_URL=postgres://app:{v}@db.internal:5432/prod",
    ),
    "mongodb-password": lambda r: (
        v := _r(r, AN, 14) + "9",
        f"connect with mongodb+srv://admin:{v}@cluster0.abcde.mongodb.net/test",
    ),
    "env-password": lambda r: (v := _r(r, AN, 12) + "!2", f"DB_PASSWORD={v}\nDB_HOST=localhost"),
    "env-api-key": lambda r: (v := _r(r, AN, 32), f"SENDINBLUE_API_KEY={v}"),
    "yaml-password": lambda r: (v := _r(r, AN, 9) + "4$", f"database:\n  user: app\n  password: {v}\n  port: 5432"),
    "json-client-secret": lambda r: (v := _r(r, AN + "-_", 35), json.dumps({"client_id": "web", "client_secret": v})),
    "huggingface-token": lambda r: (v := "hf_" + _r(r, AN, 34), f"huggingface-cli login --token {v}"),
    "npm-token": lambda r: (v := "npm_" + _r(r, AN, 36), f"//registry.npmjs.org/:_authToken={v}"),
    "gitlab-token": lambda r: (v := "glpat-" + _r(r, AN + "_-", 20), f"use {v} for the CI push"),
    "sendgrid-key": lambda r: (v := "SG." + _r(r, AN + "_-", 22) + "." + _r(r, AN + "_-", 43), f"sendgrid key {v}"),
    "twilio-key": lambda r: (v := "SK" + _r(r, HEX, 32), f"twilio api key {v} with the account"),
    "telegram-token": lambda r: (v := _r(r, "123456789", 9) + ":AA" + _r(r, AN + "_-", 33), f"bot = Bot('{v}')"),
    "discord-token": lambda r: (
        v := "M" + _r(r, AN, 23) + "." + _r(r, AN, 6) + "." + _r(r, AN + "_-", 27),
        f"DISCORD_TOKEN={v}",
    ),
    "pypi-token": lambda r: (v := "pypi-AgEIcHlwaS5vcmc" + _r(r, AN + "_-", 80), f"password = {v}"),
    "mailchimp-key": lambda r: (v := _r(r, HEX, 32) + "-us12", f"mailchimp: {v}"),
    "cli-password": lambda r: (v := _r(r, AN, 11) + "8", f"mysql -u root --password={v} shop"),
    "api-key-header": lambda r: (v := _r(r, AN, 40), f"x-api-key: {v}"),
    "age-secret-key": lambda r: (v := "AGE-SECRET-KEY-1" + _r(r, UP, 58), f"the age identity: {v}"),
    "digitalocean-token": lambda r: (v := "dop_v1_" + _r(r, HEX, 64), f"doctl auth init -t {v}"),
    "azure-storage-key": lambda r: (
        v := _r(r, B64, 86) + "==",
        f"DefaultEndpointsProtocol=https;AccountName=acme;AccountKey={v};EndpointSuffix=core.windows.net",
    ),
    "square-secret": lambda r: (v := "sq0csp-" + _r(r, AN + "-_", 43), f"square oauth secret {v}"),
}


def corpus(per_kind: int = 6, seed: int = 37) -> list[Planted]:
    rng = random.Random(seed)
    out = []
    for kind, make in MAKERS.items():
        for _ in range(per_kind):
            value, text = make(rng)
            out.append(Planted(kind, value, text))
    return out


def private_spans(n: int = 20, seed: int = 5) -> list[str]:
    """Markers to put inside ``<private>…</private>``: none may be stored."""
    rng = random.Random(seed)
    return [f"PRIVATE{_r(rng, UP, 10)}" for _ in range(n)]


def needles(p: Planted) -> list[str]:
    """The value, and its alphanumeric runs of 10 or more characters."""
    value = p.value.replace("\\n", "\n")
    runs = [m for m in re.findall(r"[A-Za-z0-9]{10,}", value) if not m.startswith(("BEGIN", "PRIVATE"))]
    return [p.value, *runs]
