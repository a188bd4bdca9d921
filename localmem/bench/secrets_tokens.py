"""Random values in providers' token formats, for the synthetic secrets corpus
(``secrets_corpus``): the alphabets, ``Draw`` (random parts remembered, so a corpus item
can name its needles) and one maker per token format (prefix, alphabet and length as each
provider documents them or as gitleaks' rules read them). Synthetic: no value is a real
credential."""

from __future__ import annotations

import base64
import json
import random
import string
from collections.abc import Callable

AN = string.ascii_letters + string.digits
UP = string.ascii_uppercase + string.digits
LO = string.ascii_lowercase + string.digits
HEX = "0123456789abcdef"
DIG = string.digits
B64 = AN + "+/"
URLSAFE = AN + "-_"
DJANGO = string.ascii_lowercase + string.digits + "!@#$%^&*(-_=+)"
WORDS = ("tiger", "maple", "orbit", "falcon", "copper", "velvet", "harbor", "nimbus", "quartz", "saffron")
USERS = ("admin", "deploy", "app", "ci-bot", "svc_report", "root", "alice", "ops")
HOSTS = ("db.internal", "10.0.3.17", "pg-prod.acme.io", "mysql.svc.cluster.local", "cache-01.acme.net")


class Draw:
    """Random parts for one item; remembers them so the needles can be named."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.parts: list[str] = []

    def r(self, alphabet: str, n: int) -> str:
        out = "".join(self.rng.choice(alphabet) for _ in range(n))
        self.parts.append(out)
        return out

    def plain(self, alphabet: str, n: int) -> str:
        """Random, but no secret (an id beside one): not a needle."""
        return "".join(self.rng.choice(alphabet) for _ in range(n))

    def pick(self, options: tuple[str, ...]) -> str:
        return self.rng.choice(options)

    def password(self, symbols: str = "!$*#%&") -> str:
        """A password as people choose them: random, or a word with digits and a symbol."""
        if self.rng.random() < 0.5:
            core = self.r(AN, self.rng.randint(7, 12))
            return core[:3] + self.rng.choice(symbols) + core[3:] + self.rng.choice(DIG)
        word = self.pick(WORDS).capitalize()
        out = word + self.rng.choice(symbols) + "".join(self.rng.choice(DIG) for _ in range(4)) + self.r(LO, 2)
        self.parts.append(out)
        return out


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def b64url(obj: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj, separators=(",", ":")).encode()).decode().rstrip("=")


def wrap(value: str, width: int) -> list[str]:
    return [value[i : i + width] for i in range(0, len(value), width)]


# -- token formats (prefix, alphabet, length as each provider documents or as gitleaks' rules read)


def aws_key_id(d: Draw, prefix: str = "AKIA") -> str:
    return prefix + d.r("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16)


def aws_secret(d: Draw) -> str:
    return d.r(B64, 40)


def sts_token(d: Draw) -> str:
    return d.pick(("IQoJb3JpZ2luX2Vj", "FwoGZXIvYXdzE")) + d.r(B64, d.rng.randint(300, 420)) + "=="


def jwt(d: Draw) -> str:
    head = b64url({"alg": "RS256", "typ": "JWT", "kid": d.r(HEX, 8)})
    return head + "." + b64url({"sub": d.r(HEX, 12), "exp": 1767225600}) + "." + d.r(URLSAFE, 86)


def sentry_org_token(d: Draw) -> str:
    claims = {"iat": 1767225600.5, "url": "https://sentry.io", "region_url": "https://us.sentry.io", "org": d.r(LO, 9)}
    return "sntrys_" + b64(json.dumps(claims, separators=(",", ":")).encode()).rstrip("=") + "_" + d.r(AN, 43)


def pem(d: Draw, label: str) -> str:
    body = "\n".join(d.r(B64, 64) for _ in range(5))
    return f"-----BEGIN {label}-----\n{body}\n{d.r(B64, 24)}==\n-----END {label}-----"


PREFIXED: dict[str, Callable[[Draw], str]] = {
    "github-pat": lambda d: "ghp_" + d.r(AN, 36),
    "github-fine-grained-pat": lambda d: "github_pat_" + d.r(AN, 22) + "_" + d.r(AN, 59),
    "gitlab-pat": lambda d: "glpat-" + d.r(URLSAFE, 20),
    "slack-bot-token": lambda d: f"xoxb-{d.r(DIG, 12)}-{d.r(DIG, 13)}-{d.r(AN, 24)}",
    "openai-key": lambda d: "sk-proj-" + d.r(URLSAFE, 58) + "T3BlbkFJ" + d.r(URLSAFE, 58),
    "anthropic-key": lambda d: "sk-ant-api03-" + d.r(URLSAFE, 93) + "AA",
    "huggingface-token": lambda d: "hf_" + d.r(string.ascii_letters, 34),
    "google-api-key": lambda d: "AIza" + d.r(URLSAFE, 35),
    "npm-token": lambda d: "npm_" + d.r(AN, 36),
    "pypi-token": lambda d: "pypi-AgEIcHlwaS5vcmc" + d.r(URLSAFE, 70),
    "sendgrid-key": lambda d: "SG." + d.r(URLSAFE, 22) + "." + d.r(URLSAFE, 43),
    "stripe-secret-key": lambda d: "sk_live_" + d.r(AN, 24),
    "stripe-webhook-secret": lambda d: "whsec_" + d.r(AN, 32),
    "vault-token": lambda d: "hvs." + d.r(URLSAFE, 91),
    "docker-pat": lambda d: "dckr_pat_" + d.r(URLSAFE, 27),
    "sentry-org-token": sentry_org_token,
    "sentry-user-token": lambda d: "sntryu_" + d.r(HEX, 64),
    "linear-api-key": lambda d: "lin_api_" + d.r(AN, 40),
    "postman-api-key": lambda d: "PMAK-" + d.r(HEX, 24) + "-" + d.r(HEX, 34),
    "atlassian-api-token": lambda d: "ATATT3xFfGF0" + d.r(URLSAFE, 174) + "=" + d.r(HEX.upper(), 8),
    "grafana-service-account-token": lambda d: "glsa_" + d.r(AN, 32) + "_" + d.r(HEX, 8),
    "mailgun-key": lambda d: "key-" + d.r(HEX, 32),
    "doppler-token": lambda d: "dp.pt." + d.r(AN, 43),
    "newrelic-user-key": lambda d: "NRAK-" + d.r(UP, 27),
    "pulumi-token": lambda d: "pul-" + d.r(HEX, 40),
    "planetscale-password": lambda d: "pscale_pw_" + d.r(URLSAFE, 43),
    "flyio-token": lambda d: "fo1_" + d.r(URLSAFE, 43),
    "notion-token": lambda d: "ntn_" + d.r(DIG, 11) + d.r(AN, 35),
    "perplexity-key": lambda d: "pplx-" + d.r(AN, 48),
    "digitalocean-token": lambda d: "dop_v1_" + d.r(HEX, 64),
    "sendinblue-key": lambda d: "xkeysib-" + d.r(HEX, 64) + "-" + d.r(AN, 16),
    "terraform-cloud-token": lambda d: d.r(LO, 14) + ".atlasv1." + d.r(URLSAFE, 67),
    "shopify-token": lambda d: "shpat_" + d.r(HEX, 32),
    "twilio-key": lambda d: "SK" + d.r(HEX, 32),
    "google-oauth-token": lambda d: "ya29.a0" + d.r(URLSAFE, 150),
    "heroku-key": lambda d: "HRKU-AA" + d.r(URLSAFE, 58),
    "age-secret-key": lambda d: "AGE-SECRET-KEY-1" + d.r("QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L".upper(), 58),
}
