"""A generated corpus of credentials, each written in every form a transcript carries them.

Built from the public formats (prefix, alphabet and length, as vendors document them and as
gitleaks' rules describe them) with random values; it never reads the redaction rules. A kind
says how its value is made and which part of it is the secret; a context (tests/store/secret_contexts.py)
says how the value is written: an `.env` line, a `read_file` result, a diff, a tool call's JSON
arguments, a name/value list, a base64 or percent-encoded copy... Besides the providers' formats,
passwords a person made up (tests/store/secret_passwords.py) under names that say they are passwords.
"""

from __future__ import annotations

import base64
import json
import random
import string
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from tests.store.secret_contexts import READERS, forms
from tests.store.secret_passwords import PASSWORD_NAMES, person_password

LOWER, UPPER, DIGITS = string.ascii_lowercase, string.ascii_uppercase, string.digits
ALNUM = LOWER + UPPER + DIGITS
HEX = "0123456789abcdef"
B64 = ALNUM + "+/"
URLSAFE = ALNUM + "-_"
PASSWORD = ALNUM + "!#%*+-.^_~"

Made = str | tuple[str, list[str]]  # the value as written, or (value, the secret parts in it)


def r(rng: random.Random, n: int, alphabet: str = ALNUM) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def pem(rng: random.Random, label: str, lines: int = 12) -> tuple[str, list[str]]:
    body = [r(rng, 64, B64) for _ in range(lines)]
    header = f"-----BEGIN {label}-----"
    return "\n".join([header, *body, header.replace("BEGIN", "END")]), body


def jwt(rng: random.Random) -> str:
    head = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    claims = b64url(
        json.dumps(
            {"sub": r(rng, 12, DIGITS), "name": r(rng, 8, LOWER), "iat": rng.randrange(10**9, 2 * 10**9)}
        ).encode()
    )
    return f"{head}.{claims}.{b64url(rng.randbytes(32))}"


def url_with_password(scheme: str, user: str, host: str) -> Callable[[random.Random], Made]:
    def make(rng: random.Random) -> Made:
        password = r(rng, rng.randrange(12, 28))
        return f"{scheme}://{user}:{password}@{host}", [password]

    return make


def azure_connection(rng: random.Random) -> Made:
    key = b64(rng.randbytes(64))
    return (
        f"DefaultEndpointsProtocol=https;AccountName=acct{r(rng, 6, LOWER + DIGITS)};AccountKey={key};"
        "EndpointSuffix=core.windows.net",
        [key],
    )


def service_bus(rng: random.Random) -> Made:
    key = b64(rng.randbytes(32))
    return (
        f"Endpoint=sb://ns-{r(rng, 6, LOWER)}.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;"
        f"SharedAccessKey={key}",
        [key],
    )


def sas_url(rng: random.Random) -> Made:
    sig = b64(rng.randbytes(32)).replace("+", "%2B").replace("/", "%2F").replace("=", "%3D")
    return (
        f"https://acct.blob.core.windows.net/backups/db.tar?sv=2022-11-02&ss=b&srt=o&sp=r"
        f"&se=2026-01-01T00:00:00Z&spr=https&sig={sig}",
        [sig],
    )


def gcp_service_account(rng: random.Random) -> Made:
    key, body = pem(rng, "PRIVATE KEY", 8)
    key_id = r(rng, 40, HEX)
    text = json.dumps(
        {
            "type": "service_account",
            "project_id": "demo-123",
            "private_key_id": key_id,
            "private_key": key + "\n",
            "client_email": "ci@demo-123.iam.gserviceaccount.com",
        }
    )
    return text, body  # the key id names the key; it is not secret


def basic(rng: random.Random) -> Made:
    token = b64(f"{r(rng, 6, LOWER)}:{r(rng, 16, PASSWORD)}".encode())
    return f"Basic {token}", [token]


def bearer(rng: random.Random) -> Made:
    token = r(rng, rng.randrange(32, 64), ALNUM + "-._~")
    return f"Bearer {token}", [token]


def docker_auth(rng: random.Random) -> Made:
    token = b64(f"{r(rng, 6, LOWER)}:{r(rng, 20)}".encode())
    return f'{{"auths": {{"https://index.docker.io/v1/": {{"auth": "{token}"}}}}}}', [token]


def client_key_data(rng: random.Random) -> Made:
    key, _ = pem(rng, "RSA PRIVATE KEY", 10)
    data = b64(key.encode())
    return data, [data[i : i + 40] for i in range(0, len(data) - 40, 40)]


def bootstrap_token(rng: random.Random) -> Made:
    return f"{r(rng, 6, LOWER + DIGITS)}.{r(rng, 16, LOWER + DIGITS)}"


def pypi(rng: random.Random) -> Made:
    return "pypi-AgEIcHlwaS5vcmc" + r(rng, rng.randrange(70, 180), URLSAFE)


@dataclass(frozen=True)
class Kind:
    name: str
    env: str  # the variable it is kept in
    make: Callable[[random.Random], Made]
    curl: str | None = "-H 'Authorization: Bearer {v}'"  # how curl sends it; None: it is not sent by curl
    bare: bool = True  # recognisable by its own shape, with no name next to it
    line: str | None = None  # how it sits in its own config file, when not `ENV=value`


def placed_password(
    name: str, env: str, line: str, *, lengths: tuple[int, int] = (10, 20), alphabet: str = PASSWORD
) -> Kind:
    """A password with no recognisable shape, known only by where `line` puts it; never sent by curl."""
    low, high = lengths
    return Kind(name, env, lambda g: r(g, g.randrange(low, high), alphabet), None, bare=False, line=line)


BEARER = "-H 'Authorization: Bearer {v}'"
KINDS = [
    Kind("openai_project", "OPENAI_API_KEY", lambda g: f"sk-proj-{r(g, 74, URLSAFE)}T3BlbkFJ{r(g, 74, URLSAFE)}"),
    Kind(
        "openai_service_account",
        "OPENAI_API_KEY",
        lambda g: f"sk-svcacct-{r(g, 58, URLSAFE)}T3BlbkFJ{r(g, 58, URLSAFE)}",
    ),
    Kind("openai_admin", "OPENAI_ADMIN_KEY", lambda g: f"sk-admin-{r(g, 58, URLSAFE)}T3BlbkFJ{r(g, 58, URLSAFE)}"),
    Kind("openai_legacy", "OPENAI_API_KEY", lambda g: f"sk-{r(g, 20)}T3BlbkFJ{r(g, 20)}"),
    Kind("anthropic_api", "ANTHROPIC_API_KEY", lambda g: f"sk-ant-api03-{r(g, 93, URLSAFE)}AA", "-H 'x-api-key: {v}'"),
    Kind(
        "anthropic_admin",
        "ANTHROPIC_ADMIN_KEY",
        lambda g: f"sk-ant-admin01-{r(g, 93, URLSAFE)}AA",
        "-H 'x-api-key: {v}'",
    ),
    Kind(
        "aws_access_key_id",
        "AWS_ACCESS_KEY_ID",
        lambda g: "AKIA" + r(g, 16, UPPER + "234567"),
        "-H 'Authorization: AWS4-HMAC-SHA256 Credential={v}/20250101/us-east-1/s3/aws4_request'",
    ),
    Kind(
        "aws_session_key_id",
        "AWS_ACCESS_KEY_ID",
        lambda g: "ASIA" + r(g, 16, UPPER + "234567"),
        "-H 'Authorization: AWS4-HMAC-SHA256 Credential={v}/20250101/us-east-1/s3/aws4_request'",
    ),
    Kind(
        "aws_secret_access_key",
        "AWS_SECRET_ACCESS_KEY",
        lambda g: r(g, 40, B64),
        "--aws-sigv4 'aws:amz:us-east-1:s3' --user 'AKIAZ7LQ4DXMPL3EXAMQ:{v}'",
        bare=False,
    ),
    Kind("github_pat", "GITHUB_TOKEN", lambda g: "ghp_" + r(g, 36), "-H 'Authorization: token {v}'"),
    Kind("github_oauth", "GITHUB_TOKEN", lambda g: "gho_" + r(g, 36)),
    Kind("github_user_to_server", "GITHUB_TOKEN", lambda g: "ghu_" + r(g, 36)),
    Kind("github_server_to_server", "GH_TOKEN", lambda g: "ghs_" + r(g, 36)),
    Kind("github_refresh", "GITHUB_REFRESH_TOKEN", lambda g: "ghr_" + r(g, 36)),
    Kind("github_fine_grained", "GITHUB_TOKEN", lambda g: f"github_pat_{r(g, 22)}_{r(g, 59)}"),
    Kind("gitlab_pat", "GITLAB_TOKEN", lambda g: "glpat-" + r(g, 20, URLSAFE), "-H 'PRIVATE-TOKEN: {v}'"),
    Kind(
        "gitlab_pat_routable",
        "GITLAB_TOKEN",
        lambda g: f"glpat-{r(g, 36, URLSAFE)}.01.{r(g, 9, LOWER + DIGITS)}",
        "-H 'PRIVATE-TOKEN: {v}'",
    ),
    Kind(
        "gitlab_pipeline_trigger", "CI_TRIGGER_TOKEN", lambda g: "glptt-" + r(g, 40, HEX), "-F 'token={v}' -F ref=main"
    ),
    Kind("gitlab_runner", "RUNNER_TOKEN", lambda g: "glrt-" + r(g, 20, URLSAFE)),
    Kind("gitlab_runner_registration", "REGISTRATION_TOKEN", lambda g: "GR1348941" + r(g, 20, URLSAFE)),
    Kind("gitlab_deploy", "DEPLOY_TOKEN", lambda g: "gldt-" + r(g, 20, URLSAFE)),
    Kind("gitlab_feed", "GITLAB_FEED_TOKEN", lambda g: "glft-" + r(g, 20, URLSAFE)),
    Kind("gitlab_oauth_secret", "GITLAB_APP_SECRET", lambda g: "gloas-" + r(g, 64, URLSAFE)),
    Kind("gitlab_scim", "GITLAB_SCIM_TOKEN", lambda g: "glsoat-" + r(g, 20, URLSAFE)),
    Kind("gitlab_ci_job", "CI_JOB_TOKEN", lambda g: f"glcbt-{r(g, 3)}_{r(g, 20, URLSAFE)}"),
    Kind("npm_token", "NPM_TOKEN", lambda g: "npm_" + r(g, 36), line="//registry.npmjs.org/:_authToken={v}"),
    Kind(
        "npmrc_legacy_token",
        "NPM_TOKEN",
        lambda g: str(uuid.UUID(int=g.getrandbits(128), version=4)),
        bare=False,
        line="//registry.npmjs.org/:_authToken={v}",
    ),
    Kind(
        "pypi_upload_token",
        "TWINE_PASSWORD",
        pypi,
        "-u '__token__:{v}'",
        line="[pypi]\nusername = __token__\npassword = {v}",
    ),
    Kind(
        "pypirc_password",
        "TWINE_PASSWORD",
        lambda g: r(g, 18, PASSWORD),
        "-u 'alice:{v}'",
        bare=False,
        line="[testpypi]\nrepository = https://test.pypi.org/legacy/\nusername = alice\npassword = {v}",
    ),
    Kind("dockerhub_pat", "DOCKERHUB_TOKEN", lambda g: "dckr_pat_" + r(g, 27, URLSAFE)),
    Kind("dockerhub_org_token", "DOCKERHUB_TOKEN", lambda g: "dckr_oat_" + r(g, 32, URLSAFE)),
    Kind("docker_config_auth", "DOCKER_AUTH_CONFIG", docker_auth, None),
    Kind("sendgrid", "SENDGRID_API_KEY", lambda g: f"SG.{r(g, 22, URLSAFE)}.{r(g, 43, URLSAFE)}"),
    Kind("twilio_api_key", "TWILIO_API_KEY", lambda g: "SK" + r(g, 32, HEX), "-u '{v}:x'"),
    Kind(
        "twilio_auth_token",
        "TWILIO_AUTH_TOKEN",
        lambda g: r(g, 32, HEX),
        "-u 'AC0f1e2d3c4b5a69788796a5b4c3d2e1f0:{v}'",
        bare=False,
    ),
    Kind("mailgun_private", "MAILGUN_API_KEY", lambda g: "key-" + r(g, 32, HEX), "--user 'api:{v}'"),
    Kind(
        "mailgun_signing",
        "MAILGUN_WEBHOOK_SIGNING_KEY",
        lambda g: f"{r(g, 32, HEX)}-{r(g, 8, HEX)}-{r(g, 8, HEX)}",
        None,
        bare=False,
    ),
    Kind(
        "mailchimp", "MAILCHIMP_API_KEY", lambda g: f"{r(g, 32, HEX)}-us{g.randrange(1, 21)}", "--user 'anystring:{v}'"
    ),
    Kind("datadog_api_key", "DD_API_KEY", lambda g: r(g, 32, HEX), "-H 'DD-API-KEY: {v}'", bare=False),
    Kind("datadog_app_key", "DD_APP_KEY", lambda g: r(g, 40, HEX), "-H 'DD-APPLICATION-KEY: {v}'", bare=False),
    Kind(
        "shopify_access", "SHOPIFY_ACCESS_TOKEN", lambda g: "shpat_" + r(g, 32, HEX), "-H 'X-Shopify-Access-Token: {v}'"
    ),
    Kind("shopify_shared_secret", "SHOPIFY_API_SECRET", lambda g: "shpss_" + r(g, 32, HEX)),
    Kind("shopify_custom_app", "SHOPIFY_TOKEN", lambda g: "shpca_" + r(g, 32, HEX), "-H 'X-Shopify-Access-Token: {v}'"),
    Kind(
        "shopify_private_app",
        "SHOPIFY_PASSWORD",
        lambda g: "shppa_" + r(g, 32, HEX),
        "-H 'X-Shopify-Access-Token: {v}'",
    ),
    Kind("square_access", "SQUARE_ACCESS_TOKEN", lambda g: "EAAA" + r(g, 60, URLSAFE)),
    Kind("square_legacy_access", "SQUARE_ACCESS_TOKEN", lambda g: "sq0atp-" + r(g, 22, URLSAFE)),
    Kind("square_oauth_secret", "SQUARE_APP_SECRET", lambda g: "sq0csp-" + r(g, 43, URLSAFE), None),
    Kind("vault_service", "VAULT_TOKEN", lambda g: "hvs." + r(g, 95, URLSAFE), "-H 'X-Vault-Token: {v}'"),
    Kind("vault_batch", "VAULT_TOKEN", lambda g: "hvb." + r(g, 140, URLSAFE), "-H 'X-Vault-Token: {v}'"),
    Kind("vault_legacy", "VAULT_TOKEN", lambda g: "s." + r(g, 24), "-H 'X-Vault-Token: {v}'", bare=False),
    Kind("heroku", "HEROKU_API_KEY", lambda g: "HRKU-AA" + r(g, 58, URLSAFE)),
    Kind("heroku_legacy", "HEROKU_API_KEY", lambda g: str(uuid.UUID(int=g.getrandbits(128), version=4)), bare=False),
    Kind("azure_storage_connection", "AZURE_STORAGE_CONNECTION_STRING", azure_connection, None),
    Kind("azure_service_bus_connection", "SERVICEBUS_CONNECTION_STR", service_bus, None),
    Kind("azure_sas_url", "BACKUP_URL", sas_url, "-o db.tar '{v}'"),
    Kind(
        "azure_ad_client_secret",
        "AZURE_CLIENT_SECRET",
        lambda g: f"{r(g, 3, ALNUM + '_~.')}{g.randrange(10)}Q~{r(g, 34, ALNUM + '_~.-')}",
        "-d 'client_secret={v}'",
    ),
    Kind("slack_bot", "SLACK_BOT_TOKEN", lambda g: f"xoxb-{r(g, 12, DIGITS)}-{r(g, 13, DIGITS)}-{r(g, 24)}"),
    Kind(
        "slack_user",
        "SLACK_USER_TOKEN",
        lambda g: f"xoxp-{r(g, 12, DIGITS)}-{r(g, 12, DIGITS)}-{r(g, 13, DIGITS)}-{r(g, 32, HEX)}",
    ),
    Kind(
        "slack_app",
        "SLACK_APP_TOKEN",
        lambda g: f"xapp-1-A{r(g, 10, UPPER + DIGITS)}-{r(g, 13, DIGITS)}-{r(g, 64, HEX)}",
    ),
    Kind("slack_config_refresh", "SLACK_CONFIG_REFRESH_TOKEN", lambda g: f"xoxe-1-{r(g, 146, UPPER + DIGITS)}"),
    Kind(
        "slack_webhook",
        "SLACK_WEBHOOK_URL",
        lambda g: (
            f"https://hooks.slack.com/services/T{r(g, 10, UPPER + DIGITS)}/B{r(g, 10, UPPER + DIGITS)}/{(s := r(g, 24))}",
            [s],
        ),
        "-X POST -d 'payload={{}}' {v}",
    ),
    Kind("stripe_live", "STRIPE_SECRET_KEY", lambda g: "sk_live_" + r(g, 99), "-u '{v}:'"),
    Kind("stripe_restricted", "STRIPE_KEY", lambda g: "rk_live_" + r(g, 24), "-u '{v}:'"),
    Kind("stripe_test", "STRIPE_SECRET_KEY", lambda g: "sk_test_" + r(g, 24), "-u '{v}:'"),
    Kind(
        "google_api_key",
        "GOOGLE_API_KEY",
        lambda g: "AIza" + r(g, 35, URLSAFE),
        "'https://maps.googleapis.com/maps/api/geocode/json?address=Paris&key={v}'",
    ),
    Kind("gcp_service_account", "GOOGLE_CREDENTIALS", gcp_service_account, None),
    Kind(
        "google_oauth_client_secret",
        "GOOGLE_CLIENT_SECRET",
        lambda g: "GOCSPX-" + r(g, 28, URLSAFE),
        "-d 'client_secret={v}'",
    ),
    Kind("google_oauth_access_token", "GOOGLE_ACCESS_TOKEN", lambda g: "ya29." + r(g, 120, URLSAFE)),
    Kind("huggingface", "HF_TOKEN", lambda g: "hf_" + r(g, 34, LOWER + UPPER)),
    Kind("huggingface_org", "HF_API_TOKEN", lambda g: "api_org_" + r(g, 34, LOWER + UPPER)),
    Kind("jwt", "SESSION_JWT", jwt),
    Kind("rsa_private_key", "SSH_PRIVATE_KEY", lambda g: pem(g, "RSA PRIVATE KEY"), None),
    Kind("ec_private_key", "TLS_KEY", lambda g: pem(g, "EC PRIVATE KEY", 4), None),
    Kind("openssh_private_key", "DEPLOY_KEY", lambda g: pem(g, "OPENSSH PRIVATE KEY", 7), None),
    Kind("pkcs8_private_key", "SIGNING_KEY", lambda g: pem(g, "PRIVATE KEY", 16), None),
    Kind("encrypted_private_key", "TLS_PRIVATE_KEY", lambda g: pem(g, "ENCRYPTED PRIVATE KEY", 16), None),
    Kind("pgp_private_key", "GPG_PRIVATE_KEY", lambda g: pem(g, "PGP PRIVATE KEY BLOCK", 20), None),
    Kind("basic_auth_header", "UPSTREAM_AUTHORIZATION", basic, "-H 'Authorization: {v}'"),
    Kind("bearer_header", "UPSTREAM_AUTHORIZATION", bearer, "-H 'Authorization: {v}'"),
    Kind(
        "kubeconfig_token",
        "KUBE_TOKEN",
        bootstrap_token,
        bare=False,
        line="users:\n- name: admin\n  user:\n    token: {v}",
    ),
    Kind(
        "kubeconfig_client_key_data",
        "KUBE_CLIENT_KEY_DATA",
        client_key_data,
        None,
        line="users:\n- name: admin\n  user:\n    client-certificate-data: LS0tLS1DRVJU\n    client-key-data: {v}",
    ),
    Kind("redis_url", "REDIS_URL", url_with_password("redis", "", "cache.internal:6379/0"), None),
    Kind("postgres_url", "DATABASE_URL", url_with_password("postgres", "app", "db.internal:5432/app"), None),
    Kind("mysql_url", "DATABASE_URL", url_with_password("mysql", "root", "10.0.0.5:3306/shop"), None),
    Kind("mongodb_url", "MONGO_URI", url_with_password("mongodb+srv", "svc", "cluster0.ab1cd.mongodb.net/prod"), None),
    Kind("amqp_url", "BROKER_URL", url_with_password("amqp", "worker", "mq.internal:5672/%2F"), None),
    Kind(
        "https_url_password",
        "GIT_REMOTE",
        url_with_password("https", "deploy", "git.example.com/team/app.git"),
        "-O {v}",
    ),
    Kind(
        "sentry_dsn",
        "SENTRY_DSN",
        lambda g: ((k := r(g, 32, HEX)) and f"https://{k}@o{r(g, 6, DIGITS)}.ingest.sentry.io/{r(g, 7, DIGITS)}", [k]),
        None,
    ),
    Kind("sentry_user_token", "SENTRY_AUTH_TOKEN", lambda g: "sntryu_" + r(g, 64, HEX)),
    Kind(
        "discord_bot",
        "DISCORD_TOKEN",
        lambda g: f"M{r(g, 23)}.{r(g, 6, URLSAFE)}.{r(g, 27, URLSAFE)}",
        "-H 'Authorization: Bot {v}'",
    ),
    Kind("telegram_bot", "TELEGRAM_BOT_TOKEN", lambda g: f"{r(g, 10, DIGITS)}:AA{r(g, 33, URLSAFE)}", None),
    Kind("linear", "LINEAR_API_KEY", lambda g: "lin_api_" + r(g, 40), "-H 'Authorization: {v}'"),
    Kind("notion", "NOTION_TOKEN", lambda g: f"ntn_{r(g, 11, DIGITS)}{r(g, 35)}"),
    Kind("postman", "POSTMAN_API_KEY", lambda g: f"PMAK-{r(g, 24, HEX)}-{r(g, 34, HEX)}", "-H 'X-Api-Key: {v}'"),
    Kind("pulumi", "PULUMI_ACCESS_TOKEN", lambda g: "pul-" + r(g, 40, HEX)),
    Kind("doppler", "DOPPLER_TOKEN", lambda g: "dp.pt." + r(g, 43)),
    Kind("digitalocean", "DIGITALOCEAN_TOKEN", lambda g: "dop_v1_" + r(g, 64, HEX)),
    Kind("databricks", "DATABRICKS_TOKEN", lambda g: "dapi" + r(g, 32, HEX)),
    Kind("grafana_service_account", "GRAFANA_TOKEN", lambda g: f"glsa_{r(g, 32)}_{r(g, 8, HEX)}"),
    Kind("new_relic_user_key", "NEW_RELIC_API_KEY", lambda g: "NRAK-" + r(g, 27, UPPER + DIGITS), "-H 'Api-Key: {v}'"),
    Kind("planetscale", "PLANETSCALE_TOKEN", lambda g: "pscale_tkn_" + r(g, 43, URLSAFE)),
    Kind(
        "age_secret_key",
        "SOPS_AGE_KEY",
        lambda g: "AGE-SECRET-KEY-1" + r(g, 58, "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"),
        None,
    ),
    Kind("alibaba_access_key_id", "ALIBABA_CLOUD_ACCESS_KEY_ID", lambda g: "LTAI" + r(g, 20), None),
    Kind("rubygems", "GEM_HOST_API_KEY", lambda g: "rubygems_" + r(g, 48, HEX), "-H 'Authorization: {v}'"),
    Kind(
        "dynatrace",
        "DT_API_TOKEN",
        lambda g: f"dt0c01.{r(g, 24, UPPER + DIGITS)}.{r(g, 64, UPPER + DIGITS)}",
        "-H 'Authorization: Api-Token {v}'",
    ),
    Kind("replicate", "REPLICATE_API_TOKEN", lambda g: "r8_" + r(g, 37)),
    Kind("groq", "GROQ_API_KEY", lambda g: "gsk_" + r(g, 52)),
    Kind("perplexity", "PERPLEXITY_API_KEY", lambda g: "pplx-" + r(g, 48)),
    Kind("xai", "XAI_API_KEY", lambda g: "xai-" + r(g, 80)),
    Kind("langsmith", "LANGSMITH_API_KEY", lambda g: f"lsv2_pt_{r(g, 32, HEX)}_{r(g, 10, HEX)}", "-H 'x-api-key: {v}'"),
    Kind("tailscale", "TS_AUTHKEY", lambda g: f"tskey-auth-{r(g, 12)}-{r(g, 33)}"),
    Kind("supabase", "SUPABASE_ACCESS_TOKEN", lambda g: "sbp_" + r(g, 40, HEX)),
    Kind("clojars", "CLOJARS_TOKEN", lambda g: "CLOJARS_" + r(g, 60, LOWER + DIGITS), "-u 'alice:{v}'"),
    Kind("atlassian", "JIRA_API_TOKEN", lambda g: "ATATT3" + r(g, 186, URLSAFE), "-u 'me@example.com:{v}'"),
    Kind("openshift", "OC_TOKEN", lambda g: "sha256~" + r(g, 43, URLSAFE)),
    Kind(
        "cloudflare_origin_ca",
        "CF_ORIGIN_CA_KEY",
        lambda g: f"v1.0-{r(g, 24, HEX)}-{r(g, 146, HEX)}",
        "-H 'X-Auth-User-Service-Key: {v}'",
    ),
    Kind("onepassword_service_account", "OP_SERVICE_ACCOUNT_TOKEN", lambda g: "ops_eyJ" + r(g, 300, B64)),
    Kind("okta", "OKTA_API_TOKEN", lambda g: "00" + r(g, 40, URLSAFE), "-H 'Authorization: SSWS {v}'", bare=False),
    Kind("azure_devops_pat", "AZURE_DEVOPS_EXT_PAT", lambda g: r(g, 52, LOWER + "234567"), "-u ':{v}'", bare=False),
    Kind(
        "generic_password", "DB_PASSWORD", lambda g: r(g, g.randrange(12, 25), PASSWORD), "-u 'admin:{v}'", bare=False
    ),
    Kind("generic_secret", "APP_SECRET", lambda g: r(g, 32), bare=False),
    Kind("generic_token", "SERVICE_TOKEN", lambda g: r(g, 40, URLSAFE), bare=False),
    Kind("generic_api_key", "PAYMENTS_API_KEY", lambda g: r(g, 32), "-H 'X-API-Key: {v}'", bare=False),
    Kind(
        "generic_client_secret",
        "OAUTH_CLIENT_SECRET",
        lambda g: r(g, 40, URLSAFE),
        "-d 'client_secret={v}'",
        bare=False,
    ),
    Kind("generic_passphrase", "SIGNING_PASSPHRASE", lambda g: r(g, 20, PASSWORD), bare=False),
    # Passwords known by their place in a file or on a command line, not by a name beside them.
    placed_password("netrc_password", "NETRC_PASSWORD", "machine api.example.com login alice password {v}"),
    placed_password(
        "netrc_password_lines", "NETRC_PASSWORD", "machine git.example.com\n  login deploy\n  password {v}"
    ),
    placed_password(
        "mysql_cli_password",
        "MYSQL_PWD",
        "mysqldump -h db.internal -u root -p{v} shop > backup.sql",
        alphabet=ALNUM + "_.^~",
    ),
    Kind("pgpassword", "PGPASSWORD", lambda g: r(g, g.randrange(12, 20), PASSWORD), None, bare=False),
    placed_password("sshpass_password", "SSHPASS", "sshpass -p '{v}' ssh deploy@web1.internal uptime"),
    placed_password(
        "redis_cli_password",
        "REDISCLI_AUTH",
        "redis-cli -h cache.internal -a {v} --no-auth-warning ping",
        lengths=(16, 32),
        alphabet=ALNUM,
    ),
    placed_password("htpasswd_password", "HTPASSWD_PASSWORD", "htpasswd -b -c /etc/nginx/.htpasswd alice {v}"),
    # Passwords a person made up, known by a name that says they are passwords.
    *(Kind(name, env, person_password, curl, bare=False, line=line) for name, env, line, curl in PASSWORD_NAMES),
]


@dataclass(frozen=True)
class Case:
    kind: str
    context: str
    text: str
    secrets: list[str]  # the parts that must not survive redaction
    reader: Callable[[str], str] | None = None  # how the redacted text is read before they are sought


def cases(seed: int = 0, samples: int = 2) -> Iterator[Case]:
    """Every kind in every context that applies to it, `samples` random values each."""
    rng = random.Random(seed)
    for kind in KINDS:
        for _ in range(samples):
            new, old = (_made(kind.make(rng)) for _ in range(2))
            for context, (text, secrets) in forms(kind, rng, new, old).items():
                yield Case(kind.name, context, text, secrets, READERS.get(context))


def _made(made: Made) -> tuple[str, list[str]]:
    if isinstance(made, tuple):
        return made[0], list(made[1])
    return made, [made]
