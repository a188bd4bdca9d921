"""Provider token formats: secrets recognisable by their own shape (a prefix, an alphabet,
a length), wherever they stand.

Two sources, kept as tables rather than scattered patterns:
- Yelp's detect-secrets plugins (``PLUGIN_KINDS``), their regex denylists; the high-entropy
  plugins are left out (git hashes, UUIDs and base64 blobs fill coding sessions), as are
  the keyword plugin (its filters live in detect-secrets' scan pipeline; ``assignments``
  replaces it) and the public-IP one (not a secret);
- ``TOKENS``: the prefix-anchored formats of gitleaks' rule set (``config/gitleaks.toml``,
  MIT; read at commit b58d3f1, 2026-07) that detect-secrets lacks, each with the provider's
  prefix and alphabet, lengths loosened to a floor so a token cut by a line wrap or a
  newer, longer format is still caught.

Invariant: a pattern here matches the secret itself (group 0), never the words around it;
no pattern is compiled before the first redaction (``Lazy``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from functools import cache
from typing import Any

from localmem.util.lazyre import Lazy

# detect-secrets' plugins used, by their secret_type, with the kind we name (not its
# Telegram plugin: it has no left edge, so a bot URL's `/sendMessage` went with the token).
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
AWS_KEY_ID = Lazy(r"(?<![A-Z0-9])(?:A3T[A-Z0-9]|ABIA|ACCA|AKIA|ASIA)[0-9A-Z]{16}(?![A-Z0-9])")

_B = r"(?<![A-Za-z0-9_-])"  # not inside a longer token
# (kind, gate, the token's shape after the not-inside-a-token guard): a shape is tried
# only on a text that holds one of its gate's strings (a substring test costs next to
# nothing; a pattern that starts with a character class is tried at every position).
# Order is irrelevant: overlapping matches merge.
TOKENS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("anthropic-key", ("sk-ant-",), r"sk-ant-[A-Za-z0-9_-]{20,}"),
    ("openai-key", ("sk-",), r"sk-(?:proj|svcacct|admin|None)-[A-Za-z0-9_-]{20,}"),
    ("api-key", ("sk-",), r"sk-[A-Za-z0-9]{32,}"),
    ("github-token", ("gh", "github_pat_"), r"(?:gh[pousr]_[A-Za-z0-9]{30,255}|github_pat_[A-Za-z0-9_]{22,255})"),
    ("gitlab-token", ("gl",), r"gl(?:pat|dt|ft|rt|soat|cbt|ffct|oas|agent|imt|ptt)-[A-Za-z0-9_-]{20,}"),
    ("slack-token", ("xox",), r"xox[abposre]-[A-Za-z0-9-]{10,}"),
    ("slack-token", ("xapp-",), r"xapp-\d-[A-Za-z0-9-]{20,}"),
    ("stripe-key", ("k_",), r"[sr]k_(?:live|test|prod)_[0-9A-Za-z]{16,}"),
    ("stripe-webhook-secret", ("whsec_",), r"whsec_[A-Za-z0-9+/=]{24,}"),
    ("google-api-key", ("AIza",), r"AIza[0-9A-Za-z_-]{35}"),
    ("google-oauth-secret", ("GOCSPX-",), r"GOCSPX-[A-Za-z0-9_-]{20,}"),
    ("google-oauth-token", ("ya29.",), r"ya29\.[A-Za-z0-9_-]{30,}"),
    ("google-refresh-token", ("1//0",), r"1//0[A-Za-z0-9_-]{40,}"),
    ("huggingface-token", ("hf_", "api_org_"), r"(?:hf_|api_org_)[A-Za-z0-9]{30,}"),
    ("npm-token", ("npm_",), r"npm_[A-Za-z0-9]{36}"),
    ("pypi-token", ("pypi-",), r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{30,}"),
    ("digitalocean-token", ("_v1_",), r"do[opr]_v1_[a-f0-9]{64}"),
    ("shopify-token", ("shp",), r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}"),
    ("databricks-token", ("dapi",), r"dapi[a-f0-9]{32}(?:-\d)?"),
    ("age-secret-key", ("AGE-SECRET-KEY-",), r"AGE-SECRET-KEY-1[0-9A-Z]{58}"),
    ("vault-token", ("hvs.", "hvb."), r"hv[sb]\.[A-Za-z0-9_-]{24,}"),
    ("docker-pat", ("dckr_pat_",), r"dckr_pat_[A-Za-z0-9_-]{20,}"),
    ("sentry-token", ("sntrys_", "sntryu_"), r"sntrys_eyJ[A-Za-z0-9+/=]{20,}_[A-Za-z0-9+/]{20,}|sntryu_[a-f0-9]{64}"),
    ("linear-api-key", ("lin_",), r"lin_(?:api|oauth)_[A-Za-z0-9]{40}"),
    ("postman-api-key", ("PMAK-",), r"PMAK-[a-fA-F0-9]{24}-[a-fA-F0-9]{34}"),
    ("atlassian-api-token", ("ATATT3", "ATCTT3"), r"ATATT3[A-Za-z0-9_=-]{40,}|ATCTT3[A-Za-z0-9_=-]{40,}"),
    (
        "grafana-token",
        ("glsa_", "glc_", "eyJrIjoi"),
        r"glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}|glc_[A-Za-z0-9+/]{32,}={0,3}|eyJrIjoi[A-Za-z0-9]{70,}",
    ),
    ("mailgun-key", ("key-",), r"key-[a-f0-9]{32}"),
    ("doppler-token", ("dp.",), r"dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,}"),
    ("newrelic-key", ("NR",), r"NR(?:AK|II|JS|AA)-[A-Za-z0-9]{27}"),
    ("pulumi-token", ("pul-",), r"pul-[a-f0-9]{40}"),
    ("planetscale-token", ("pscale_",), r"pscale_(?:pw|tkn|oauth)_[A-Za-z0-9_=.-]{32,64}"),
    ("flyio-token", ("fo1_", "fm1", "fm2"), r"fo1_[A-Za-z0-9_-]{43}|fm[12][ar]?_[A-Za-z0-9+/]{100,}={0,3}"),
    ("notion-token", ("ntn_", "secret_"), r"ntn_[0-9]{11}[A-Za-z0-9]{32,}|secret_[A-Za-z0-9]{43}"),
    ("perplexity-key", ("pplx-",), r"pplx-[A-Za-z0-9]{48}"),
    ("sendinblue-key", ("xkeysib-",), r"xkeysib-[a-f0-9]{64}-[A-Za-z0-9]{16}"),
    ("terraform-cloud-token", (".atlasv1.",), r"[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,70}"),
    ("heroku-key", ("HRKU-",), r"HRKU-AA[A-Za-z0-9_-]{58}"),
    ("1password-token", ("ops_eyJ",), r"ops_eyJ[A-Za-z0-9+/]{250,}={0,3}"),
    ("openshift-token", ("sha256~",), r"sha256~[A-Za-z0-9_-]{43}"),
    ("rubygems-token", ("rubygems_",), r"rubygems_[a-f0-9]{48}"),
    ("prefect-token", ("pnu_",), r"pnu_[A-Za-z0-9]{36}"),
    ("readme-token", ("rdme_",), r"rdme_[a-z0-9]{70}"),
    ("dynatrace-token", ("dt0c01.",), r"dt0c01\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{64}"),
    ("shippo-token", ("shippo_",), r"shippo_(?:live|test)_[a-fA-F0-9]{40}"),
    ("easypost-token", ("EZAK", "EZTK"), r"EZ[AT]K[A-Za-z0-9]{54}"),
    ("alibaba-key-id", ("LTAI",), r"LTAI[A-Za-z0-9]{20}"),
    ("bedrock-api-key", ("ABSK",), r"ABSK[A-Za-z0-9+/]{109,269}={0,2}"),
    ("frameio-token", ("fio-u-",), r"fio-u-[A-Za-z0-9_=-]{64}"),
    ("infracost-token", ("ico-",), r"ico-[A-Za-z0-9]{32}"),
    ("airtable-token", ("pat",), r"pat[A-Za-z0-9]{14}\.[a-f0-9]{64}"),
    ("cloudflare-ca-key", ("v1.0-",), r"v1\.0-[a-f0-9]{24}-[a-f0-9]{146}"),
    ("square-token", ("EAAA", "sq0"), r"(?:EAAA|sq0atp-|sq0csp-)[A-Za-z0-9_-]{22,60}"),
    ("facebook-token", ("EAA",), r"EAA[MC][A-Za-z0-9]{100,}"),
    ("azure-ad-client-secret", ("Q~",), r"[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.-]{31,34}"),
    # AWS STS session tokens: base64 of a protobuf that starts the same way every time
    (
        "aws-session-token",
        ("IQoJb3JpZ2luX2Vj", "FwoGZXIvYXdzE", "FQoGZXIvYXdzE"),
        r"(?:IQoJb3JpZ2luX2Vj|FwoGZXIvYXdzE|FQoGZXIvYXdzE)[A-Za-z0-9/+=]{40,}",
    ),
)
# Secrets with more shape than a token: (kind, pattern, the group that is the secret).
SHAPED: tuple[tuple[str, Lazy, int], ...] = (
    # a PEM block, real newlines or JSON-escaped ones; cut off (no END line): its base64 run
    (
        "private-key",
        Lazy(
            r"-----BEGIN ([A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?)-----"
            r"(?:.*?-----END \1-----|[A-Za-z0-9+/=\s\\:,-]*)",
            re.DOTALL,
        ),
        0,
    ),
    # webhooks: the URL is the credential (Slack), or its last part is (Discord, Teams)
    ("slack-webhook", Lazy(r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/+]+"), 0),
    ("discord-webhook", Lazy(r"discord(?:app)?\.com/api/webhooks/\d+/([A-Za-z0-9_-]{40,})"), 1),
    ("teams-webhook", Lazy(r"webhook\.office\.com/webhookb2/([A-Za-z0-9@/-]{40,})"), 1),
    # a Telegram bot token, alone or in its bot URL (`/bot<token>/sendMessage`)
    ("telegram-token", Lazy(r"(?:(?<=/bot)|(?<![0-9A-Za-z_-]))(\d{8,10}:AA[0-9A-Za-z_-]{33})(?![0-9A-Za-z_-])"), 1),
)
_TOKEN_RES = tuple((kind, gate, Lazy(_B + f"(?:{shape})")) for kind, gate, shape in TOKENS)


def tokens(text: str) -> Iterator[tuple[int, int, str]]:
    """Every token of ``TOKENS`` and ``SHAPED`` in ``text``."""
    for kind, gate, pattern in _TOKEN_RES:
        if any(g in text for g in gate):
            yield from ((m.start(), m.end(), kind) for m in pattern.finditer(text))
    for kind, pattern, group in SHAPED:
        for u in pattern.finditer(text):
            yield u.start(group), u.end(group), kind


def aws_key_ids(text: str) -> Iterator[re.Match[str]]:
    return AWS_KEY_ID.finditer(text)


def plugin_values(text: str, plugins: Plugins) -> Iterator[tuple[str, str]]:
    for kind, analyze in plugins:
        for value in analyze(text):
            if not isinstance(value, str) or len(value) < 4:
                continue
            if kind == "aws-access-key" and not AWS_KEY_ID.fullmatch(value):
                kind = "aws-secret-key"  # the plugin's second pattern catches the secret key
            yield kind, value


@cache
def _all_plugins() -> dict[str, Callable[[str], Iterable[str]]]:
    # detect-secrets imports `requests` (~0.1 s): loaded on the first redaction only.
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    found: dict[str, type[Any]] = get_mapping_from_secret_type_to_class()
    return {name: found[name]().analyze_string for name in PLUGIN_KINDS if name in found}


def plugins() -> Plugins:
    return tuple((PLUGIN_KINDS[n], f) for n, f in _all_plugins().items() if n not in NAMED_PLUGINS)


def named_plugins() -> Plugins:
    return tuple((PLUGIN_KINDS[n], f) for n, f in _all_plugins().items() if n in NAMED_PLUGINS)
