"""The forms of the synthetic secrets corpus: one maker per (kind, form), each drawing new
values and wrapping them the way people paste them (``secrets_corpus`` says which forms).
A maker returns the text and the values as they appear in it."""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Callable

from localmem.bench.secrets_tokens import (
    AN,
    B64,
    DIG,
    DJANGO,
    HOSTS,
    LO,
    PREFIXED,
    UP,
    URLSAFE,
    USERS,
    Draw,
    aws_key_id,
    aws_secret,
    b64,
    jwt,
    pem,
    sts_token,
    wrap,
)

Maker = Callable[[Draw], tuple[str, list[str]]]  # -> (text, the values as they appear in it)


def _prefixed(kind: str, template: str) -> Maker:
    def make(d: Draw) -> tuple[str, list[str]]:
        v = PREFIXED[kind](d)
        return template.format(v=v), [v]

    return make


def _pw(template: str, symbols: str = "!$*#%&") -> Maker:
    def make(d: Draw) -> tuple[str, list[str]]:
        v = d.password(symbols)
        return template.format(v=v, user=d.pick(USERS), host=d.pick(HOSTS)), [v]

    return make


def _django(d: Draw) -> tuple[str, list[str]]:
    v = "django-insecure-" + d.r(DJANGO, 50)
    return f"```python\n# settings.py\nDEBUG = False\nSECRET_KEY = '{v}'\nALLOWED_HOSTS = ['*']\n```", [v]


def _encryption_key(d: Draw) -> tuple[str, list[str]]:
    v = b64(d.r(AN, 32).encode())
    return f"APP_ENV=production\nENCRYPTION_KEY={v}\nLOG_LEVEL=info", [v]


def _aws_csv(d: Draw) -> tuple[str, list[str]]:
    kid, sec = aws_key_id(d), aws_secret(d)
    text = f"User name,Access key ID,Secret access key\n{d.pick(USERS)},{kid},{sec}\n"
    return text, [kid, sec]


def _aws_console_csv(d: Draw) -> tuple[str, list[str]]:
    kid, sec = aws_key_id(d), aws_secret(d)
    return f"Access key ID,Secret access key\r\n{kid},{sec}\r\n", [kid, sec]


def _aws_prose(d: Draw) -> tuple[str, list[str]]:
    kid, sec = aws_key_id(d), aws_secret(d)
    return f"ok the new key id is {kid} and the secret is {sec} — can you update the CI vars?", [kid, sec]


def _aws_credentials(d: Draw) -> tuple[str, list[str]]:
    kid, sec, tok = aws_key_id(d, "ASIA"), aws_secret(d), sts_token(d)
    text = f"[default]\naws_access_key_id = {kid}\naws_secret_access_key = {sec}\naws_session_token = {tok}\n"
    return text, [kid, sec, tok]


def _sts_json(d: Draw) -> tuple[str, list[str]]:
    kid, sec, tok = aws_key_id(d, "ASIA"), aws_secret(d), sts_token(d)
    creds = {"AccessKeyId": kid, "SecretAccessKey": sec, "SessionToken": tok, "Expiration": "2026-01-05T12:00:00Z"}
    tool = {"tool": "Bash", "command": "aws sts assume-role --role-arn arn:aws:iam::123456789012:role/ci"}
    tool["output"] = json.dumps({"Credentials": creds}, indent=4)
    return json.dumps(tool), [kid, sec, tok]


def _telegram_url(d: Draw) -> tuple[str, list[str]]:
    v = d.plain("123456789", 1) + d.r(DIG, 9) + ":AA" + d.r(URLSAFE, 33)
    return f'curl -s "https://api.telegram.org/bot{v}/sendMessage?chat_id=-100{d.plain(DIG, 10)}&text=deployed"', [v]


def _discord_webhook(d: Draw) -> tuple[str, list[str]]:
    v = f"https://discord.com/api/webhooks/{d.plain(DIG, 19)}/{d.r(URLSAFE, 68)}"
    return f"alerts go to {v} for now", [v]


def _slack_webhook(d: Draw) -> tuple[str, list[str]]:
    v = f"https://hooks.slack.com/services/T{d.r(UP, 10)}/B{d.r(UP, 10)}/{d.r(AN, 24)}"
    return f'SLACK_WEBHOOK: "{v}"', [v]


def _azure_sas(d: Draw) -> tuple[str, list[str]]:
    sig = urllib.parse.quote(b64(d.r(AN, 32).encode()), safe="")
    url = (
        f"https://acme{d.r(LO, 4)}.blob.core.windows.net/backups/db.bak?sv=2022-11-02&ss=b&srt=co&sp=rl"
        f"&se=2026-03-01T00:00:00Z&st=2026-01-01T00:00:00Z&spr=https&sig={sig}"
    )
    return f"azcopy copy '{url}' ./db.bak", [sig]


def _azure_conn(d: Draw) -> tuple[str, list[str]]:
    v = d.r(B64, 86) + "=="
    text = f"AZURE_STORAGE_CONNECTION_STRING=DefaultEndpointsProtocol=https;AccountName=acme;AccountKey={v};EndpointSuffix=core.windows.net"
    return text, [v]


def _netrc(d: Draw) -> tuple[str, list[str]]:
    v = d.password()
    return f"machine api.heroku.com\n  login {d.pick(USERS)}@acme.io\n  password {v}\n", [v]


def _netrc_line(d: Draw) -> tuple[str, list[str]]:
    v = d.password()
    return f"$ cat ~/.netrc\nmachine git.acme.io login {d.pick(USERS)} password {v}", [v]


def _pgpass(d: Draw) -> tuple[str, list[str]]:
    v = d.password("!$*#%&")
    return f"~/.pgpass:\n{d.pick(HOSTS)}:5432:prod:{d.pick(USERS)}:{v}\n*:*:*:postgres:{d.password()}", [v]


def _k8s(d: Draw) -> tuple[str, list[str]]:
    pw, tok = d.password(), d.r(AN, 32)
    a, b = b64(pw.encode()), b64(tok.encode())
    text = (
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db-credentials\n  namespace: prod\ntype: Opaque\n"
        f"data:\n  username: {b64(d.pick(USERS).encode())}\n  password: {a}\n  api-token: {b}\n"
    )
    return text, [a, b]


def _k8s_json(d: Draw) -> tuple[str, list[str]]:
    pw = d.password()
    a = b64(pw.encode())
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "app"}, "data": {"DB_PASS": a}}
    return "kubectl get secret app -o json\n" + json.dumps(secret, indent=2), [a]


def _dockerconfig(d: Draw) -> tuple[str, list[str]]:
    auth = b64(f"{d.pick(USERS)}:{d.password()}".encode())
    cfg = b64(json.dumps({"auths": {"registry.acme.io": {"auth": auth}}}).encode())
    text = f"kind: Secret\ntype: kubernetes.io/dockerconfigjson\ndata:\n  .dockerconfigjson: {cfg}\n"
    return text, [cfg]


def _basic_header(d: Draw) -> tuple[str, list[str]]:
    v = b64(f"{d.pick(USERS)}:{d.password()}".encode())
    return f'curl -H "Authorization: Basic {v}" https://jenkins.acme.io/api/json', [v]


def _b64_echo(d: Draw) -> tuple[str, list[str]]:
    v = b64(f"DB_PASSWORD={d.password()}\nAPI_TOKEN={d.r(AN, 24)}\n".encode())
    return f"echo '{v}' | base64 -d > .env", [v]


def _urlencoded_form(d: Draw) -> tuple[str, list[str]]:
    v = urllib.parse.quote(d.password("!$*#%&@"), safe="")
    return f'curl -X POST https://auth.acme.io/login -d "username={d.pick(USERS)}&password={v}&remember=1"', [v]


def _urlencoded_dsn(d: Draw) -> tuple[str, list[str]]:
    pw = d.password("!$*@")
    raw = f"postgresql://{d.pick(USERS)}:{urllib.parse.quote(pw, safe='')}@{d.pick(HOSTS)}:5432/prod"
    v = urllib.parse.quote(raw, safe="")
    enc_pw = urllib.parse.quote(urllib.parse.quote(pw, safe=""), safe="")
    return f"GET /admin/connect?dsn={v}&ssl=require HTTP/1.1", [enc_pw]


def _urlencoded_secret(d: Draw) -> tuple[str, list[str]]:
    v = urllib.parse.quote(d.r(AN, 20) + "/" + d.r(AN, 12) + "+" + d.r(AN, 8), safe="")
    return f"POST /oauth/token grant_type=client_credentials&client_id=web&client_secret={v}", [v]


def _wrapped(kind: str, width: int, lead: str = "", joiner: str = "\n") -> Maker:
    def make(d: Draw) -> tuple[str, list[str]]:
        v = PREFIXED[kind](d) if kind in PREFIXED else sts_token(d)
        lines = wrap(v, width)
        return lead + joiner.join(lines), [line for line in lines if len(line) >= 8]

    return make


def _wrapped_shell(d: Draw) -> tuple[str, list[str]]:
    v = sts_token(d)
    lines = wrap(v, 60)
    return "export AWS_SESSION_TOKEN=" + "\\\n".join(lines), [line for line in lines if len(line) >= 8]


def _wrapped_code(d: Draw) -> tuple[str, list[str]]:
    v = PREFIXED["openai-key"](d)
    a, b = v[:70], v[70:]
    return f'client = OpenAI(\n    api_key="{a}"\n    "{b}",\n)', [a, b]


def _pem_form(label: str, template: str) -> Maker:
    def make(d: Draw) -> tuple[str, list[str]]:
        v = pem(d, label)
        text = template.format(v=v if "\\n" not in template else v.replace("\n", "\\n"))
        return text, [line for line in v.splitlines() if not line.startswith("-----")]

    return make


def _jwt_cookie(d: Draw) -> tuple[str, list[str]]:
    v = jwt(d)
    return f"Cookie: theme=dark; access_token={v}; lang=en", [v]


def _bearer(d: Draw) -> tuple[str, list[str]]:
    v = d.r(AN, 40)
    return f"Authorization: Token {v}", [v]


def _mysql_dsn(d: Draw) -> tuple[str, list[str]]:
    v = d.password("!$*")
    return f"DATABASE_URL=mysql://{d.pick(USERS)}:{v}@{d.pick(HOSTS)}:3306/shop", [v]


def _redis_empty_user(d: Draw) -> tuple[str, list[str]]:
    v = d.password("!$*")
    return f"REDIS_URL=redis://:{v}@{d.pick(HOSTS)}:6379/0", [v]


def _sqlserver(d: Draw) -> tuple[str, list[str]]:
    v = d.password()
    return (
        f'"ConnectionStrings": {{ "Default": "Server=tcp:acme.database.windows.net,1433;Database=app;'
        f'User ID={d.pick(USERS)};Password={v};Encrypt=True;" }}',
        [v],
    )


def _tool_json(key: str, value: Callable[[Draw], str]) -> Maker:
    def make(d: Draw) -> tuple[str, list[str]]:
        v = value(d)
        inner = json.dumps({key: v, "expires_in": 3599, "scope": "read write"})
        return json.dumps({"type": "tool_result", "content": inner}), [v]

    return make


def _oauth_json(d: Draw) -> tuple[str, list[str]]:
    a, r = PREFIXED["google-oauth-token"](d), "1//0g" + d.r(URLSAFE, 98)
    body = json.dumps({"access_token": a, "expires_in": 3599, "refresh_token": r, "token_type": "Bearer"})
    return json.dumps({"tool": "WebFetch", "result": body}), [a, r]


# (kind, form, maker): each maker draws a new value every call.
MAKERS: tuple[tuple[str, str, Maker], ...] = (
    # assignments: lower and mixed case, names that hold a secret word inside them
    ("db-password", "env", _pw("DB_HOST={host}\ndb_password={v}\nDB_PORT=5432")),
    ("pgpassword", "shell", _pw("PGPASSWORD={v} psql -h {host} -U {user} prod")),
    ("encryption-key", "env", _encryption_key),
    ("django-secret-key", "code", _django),
    ("app-password", "yaml", _pw("spring:\n  datasource:\n    url: jdbc:postgresql://{host}/app\n    Password: {v}")),
    ("ini-password", "ini", _pw("[database]\nhost = {host}\nuser = {user}\npassword = {v}\n")),
    (
        "mixed-case-password",
        "code",
        _pw('```js\nconst dbConfig = {{ host: "{host}", user: "{user}", Password: "{v}" }};\n```'),
    ),
    ("sqlserver-password", "json", _sqlserver),
    ("smtp-password", "env", _pw("MAIL_HOST=smtp.mailgun.org\nmail_password={v}\nMAIL_PORT=587")),
    # command lines
    ("mysql-cli-password", "shell", _pw("mysql -h {host} -u {user} -p{v} shop < dump.sql")),
    ("sshpass-password", "shell", _pw("sshpass -p '{v}' ssh {user}@{host} 'sudo systemctl restart app'")),
    ("docker-login-password", "shell", _pw("docker login -u {user} -p {v} registry.acme.io")),
    ("htpasswd-password", "shell", _pw("htpasswd -b -c /etc/nginx/.htpasswd {user} {v}")),
    ("curl-user-password", "shell", _pw("curl -u {user}:{v} https://jenkins.acme.io/job/deploy/build")),
    ("mysqldump-password", "shell", _pw("mysqldump --user={user} --password='{v}' shop > shop.sql")),
    # .netrc and .pgpass
    ("netrc-password", "netrc", _netrc),
    ("netrc-line-password", "netrc", _netrc_line),
    ("pgpass-password", "netrc", _pgpass),
    # connection URLs
    ("postgres-url", "url", _pw("postgresql://{user}:{v}@{host}:5432/prod", "!$*")),
    ("redis-url", "url", _redis_empty_user),
    ("mysql-url", "env", _mysql_dsn),
    ("amqp-url", "url", _pw("broker_url = 'amqps://{user}:{v}@mq.acme.io/prod'", "!$*")),
    ("mongodb-url", "url", _pw("mongosh 'mongodb+srv://{user}:{v}@cluster0.ab1cd.mongodb.net/app'", "!$*")),
    # AWS
    ("aws-secret-key-csv", "csv", _aws_csv),
    ("aws-console-csv", "csv", _aws_console_csv),
    ("aws-secret-key-prose", "prose", _aws_prose),
    ("aws-session-token", "ini", _aws_credentials),
    ("aws-sts-json", "json", _sts_json),
    # prefixed tokens in their usual places
    ("telegram-token", "url", _telegram_url),
    (
        "stripe-webhook-secret",
        "prose",
        _prefixed("stripe-webhook-secret", "the signing secret is {v}, rotate it after"),
    ),
    ("vault-token", "shell", _prefixed("vault-token", "vault login {v}")),
    ("docker-pat", "shell", _prefixed("docker-pat", "echo {v} | docker login -u acme --password-stdin")),
    ("sentry-org-token", "prose", _prefixed("sentry-org-token", "sentry token: {v}")),
    ("sentry-user-token", "env", _prefixed("sentry-user-token", "SENTRY_AUTH_TOKEN={v}")),
    (
        "linear-api-key",
        "code",
        _prefixed("linear-api-key", '```ts\nconst linear = new LinearClient({{ apiKey: "{v}" }});\n```'),
    ),
    ("postman-api-key", "prose", _prefixed("postman-api-key", "my postman key {v} works again")),
    (
        "atlassian-api-token",
        "shell",
        _prefixed("atlassian-api-token", "curl -u me@acme.io:{v} https://acme.atlassian.net/rest/api/3/myself"),
    ),
    (
        "grafana-service-account-token",
        "yaml",
        _prefixed("grafana-service-account-token", "grafana:\n  url: https://grafana.acme.io\n  auth: {v}"),
    ),
    ("mailgun-key", "code", _prefixed("mailgun-key", 'requests.post(url, auth=("api", "{v}"), data=msg)')),
    ("mailgun-key-prose", "prose", _prefixed("mailgun-key", "mailgun gave me {v} for the sandbox domain")),
    ("discord-webhook", "prose", _discord_webhook),
    ("slack-webhook", "yaml", _slack_webhook),
    ("azure-sas", "url", _azure_sas),
    ("azure-storage-key", "env", _azure_conn),
    ("doppler-token", "shell", _prefixed("doppler-token", "doppler run --token {v} -- npm start")),
    (
        "newrelic-user-key",
        "json",
        _prefixed("newrelic-user-key", '{{"tool_input": {{"headers": {{"API-Key": "{v}"}}}}}}'),
    ),
    ("pulumi-token", "env", _prefixed("pulumi-token", "export PULUMI_ACCESS_TOKEN={v}")),
    ("planetscale-password", "prose", _prefixed("planetscale-password", "new branch password is {v}")),
    ("flyio-token", "shell", _prefixed("flyio-token", "FLY_API_TOKEN={v} flyctl deploy")),
    ("notion-token", "code", _prefixed("notion-token", "notion = Client(auth='{v}')")),
    ("perplexity-key", "prose", _prefixed("perplexity-key", "try it with {v} please")),
    ("sendinblue-key", "yaml", _prefixed("sendinblue-key", "brevo:\n  api_key: {v}")),
    (
        "terraform-cloud-token",
        "ini",
        _prefixed("terraform-cloud-token", 'credentials "app.terraform.io" {{\n  token = "{v}"\n}}'),
    ),
    ("heroku-key", "prose", _prefixed("heroku-key", "the heroku key is {v}")),
    ("github-pat", "url", _prefixed("github-pat", "git remote set-url origin https://{v}@github.com/acme/app.git")),
    ("github-fine-grained-pat", "env", _prefixed("github-fine-grained-pat", "GH_TOKEN={v}")),
    ("gitlab-pat", "header", _prefixed("gitlab-pat", "PRIVATE-TOKEN: {v}")),
    ("slack-bot-token", "prose", _prefixed("slack-bot-token", "the bot token is {v} (rotate later)")),
    ("openai-key", "code", _prefixed("openai-key", 'client = OpenAI(api_key="{v}")')),
    ("anthropic-key", "env", _prefixed("anthropic-key", "ANTHROPIC_API_KEY={v}")),
    ("huggingface-token", "shell", _prefixed("huggingface-token", "huggingface-cli login --token {v}")),
    (
        "google-api-key",
        "url",
        _prefixed("google-api-key", "https://maps.googleapis.com/maps/api/geocode/json?address=Berlin&key={v}"),
    ),
    ("npm-token", "ini", _prefixed("npm-token", "//registry.npmjs.org/:_authToken={v}")),
    ("pypi-token", "ini", _prefixed("pypi-token", "[pypi]\nusername = __token__\npassword = {v}")),
    ("sendgrid-key", "prose", _prefixed("sendgrid-key", "sendgrid key {v}")),
    ("stripe-secret-key", "code", _prefixed("stripe-secret-key", "stripe.api_key = '{v}'")),
    ("digitalocean-token", "shell", _prefixed("digitalocean-token", "doctl auth init -t {v}")),
    ("shopify-token", "header", _prefixed("shopify-token", "X-Shopify-Access-Token: {v}")),
    ("twilio-key", "prose", _prefixed("twilio-key", "twilio api key {v} with the account")),
    ("age-secret-key", "prose", _prefixed("age-secret-key", "the age identity: {v}")),
    ("google-oauth-token", "json", _oauth_json),
    ("jwt", "header", _jwt_cookie),
    ("auth-token-header", "header", _bearer),
    ("basic-auth", "base64", _basic_header),
    ("private-key", "code", _pem_form("RSA PRIVATE KEY", "```\n{v}\n```")),
    ("gcp-service-account", "json", _pem_form("PRIVATE KEY", '{{"type": "service_account", "private_key": "{v}\\n"}}')),
    ("access-token-json", "json", _tool_json("access_token", lambda d: d.r(AN, 48))),
    ("client-secret-json", "json", _tool_json("client_secret", lambda d: d.r(URLSAFE, 40))),
    # prose: a password said in a sentence
    ("prose-db-password", "prose", _pw("the db password is {v} btw")),
    ("prose-wifi-password", "prose", _pw("my wifi password is {v} if you need it")),
    ("prose-passphrase", "prose", _pw("The passphrase for the backup key: {v}")),
    ("prose-login", "prose", _pw("log in as {user} with password {v} and change it")),
    # wrapped over several lines
    ("wrapped-sts-token", "wrapped", _wrapped("sts", 76)),
    ("wrapped-sts-shell", "wrapped", _wrapped_shell),
    ("wrapped-atlassian", "wrapped", _wrapped("atlassian-api-token", 64, "JIRA_API_TOKEN=")),
    ("wrapped-anthropic", "wrapped", _wrapped("anthropic-key", 54, "key: ")),
    ("wrapped-openai", "wrapped", _wrapped_code),
    # URL-encoded
    ("urlencoded-form-password", "urlencoded", _urlencoded_form),
    ("urlencoded-dsn", "urlencoded", _urlencoded_dsn),
    ("urlencoded-client-secret", "urlencoded", _urlencoded_secret),
    # base64 in a Kubernetes Secret, and elsewhere
    ("k8s-secret", "base64", _k8s),
    ("k8s-secret-json", "base64", _k8s_json),
    ("dockerconfigjson", "base64", _dockerconfig),
    ("base64-env", "base64", _b64_echo),
)
