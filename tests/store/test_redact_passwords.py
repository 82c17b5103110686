"""Passwords a person made up, known by a name that says they are passwords, in every assignment
syntax and in name/value lists; what stands in for one, refers to one, or is code is left alone.

Every secret here is assembled at run time, so no secret-looking literal sits in the repository.
"""

from __future__ import annotations

import hashlib
import json
import string

from feedback_store.redaction.redactor import Redactor
from tests.store.test_redact import chars

MADE_UP = ["Falcon1234!maplexY7", "maple#Tiger2019", "Summer2024!", "M@pl3Tr33#42", "correct-Horse-battery-42"]


def made_up_password(seed: str) -> str:
    """A made-up password with a random middle, so that no literal of it sits in the repository."""
    word = MADE_UP[int(hashlib.sha256(seed.encode()).hexdigest(), 16) % len(MADE_UP)]
    return word[:4] + chars(3, seed, string.ascii_lowercase) + word[4:]


def password_assignments(pw: str) -> list[str]:
    """One password in the assignment syntaxes of env files, shells, code and config formats."""
    return [
        f"SMTP_PASSWORD={pw}",
        f"export DB_PASSWORD='{pw}'",
        f'$ export TWINE_PASSWORD="{pw}"',
        f'client.login(user="alice", password="{pw}")',
        f'{{"user": "app", "password": "{pw}"}}',
        f"[pypi]\nusername = alice\npassword = {pw}\n",
        f"db:\n  passwd: {pw}\n  pwd: '{pw}'\n",
        f'settings["password"] = "{pw}"',
        f"$config = ['db_pass' => '{pw}'];",
        f'pw := "{pw}"',
        f"spring.datasource.password={pw}",
        f'const opts = {{ adminPassword: "{pw}" }};',
        f"ENV PGPASSWORD={pw}",
        f"docker run -e MYSQL_ROOT_PASSWORD={pw} mysql:8",
        f'$env:SERVICE_PASSWORD = "{pw}"',
        f"WEBHOOK_SECRET={pw}",
        f"GPG_PASSPHRASE={pw}",
        f"<server><id>corp</id><password>{pw}</password></server>",
        f"CREATE USER app IDENTIFIED BY '{pw}';",
        f"curl -u alice:{pw} https://api.example.com/",
        f"tool --password {pw} --verbose",
        f"- name: SMTP_PASSWORD\n  value: {pw}\n",
        f'{{"DB_PASSWORD": {{"value": "{pw}"}}}}',
        f"define('DB_PASSWORD', '{pw}');",
        f"connect(:host => 'db', :password => '{pw}')",
        f"Server=db;User Id=sa;Password={pw};Encrypt=true",
        f"jdbc:postgresql://db/app?user=app&password={pw}&ssl=true",
        f'smtp_password = os.getenv("SMTP_PASSWORD", "{pw}")',
    ]


def test_made_up_passwords_under_password_names_in_every_syntax() -> None:
    for i in range(len(password_assignments(""))):
        pw = made_up_password(f"syntax{i}")
        text = password_assignments(pw)[i]
        for form in (text, json.dumps({"content": text}), f" 12| {text}", f"+{text}"):
            out = Redactor(env={}).redact(form)
            assert pw not in out and "[REDACTED:" in out, (form, out)


PLACEHOLDERS_AND_CODE = [
    "SMTP_PASSWORD=changeme",
    "DB_PASSWORD=<password>",
    "password: xxx",
    'password = "your-password-here"',
    "PASSWORD=***",
    "password: ${DB_PASSWORD}",
    "export PGPASSWORD=$PGPASSWORD",
    'password = os.environ["DB_PASSWORD"]',
    'password = os.getenv("DB_PASSWORD")',
    "password: process.env.DB_PASSWORD,",
    "password: {{ .Values.db.password }}",
    'password: "{{ .Values.db.password }}"',
    "password=",
    'password = ""',
    "password=password",
    "password=self.password",
    "password=get_pw()",
    "password: str",
    "def connect(host: str, password: str | None = None) -> None:",
    "password: Optional[str] = None",
    "password=None",
    "password=True",
    "passwd = passwd + 'anonymous@'",
    'password = "%s"',
    'password = "{}".format(pw)',
    'password = f"{pw}"',
    "secret = secrets.token_hex(16)",
    "pwd = os.getcwd()",
    "OLDPWD=/home/alice/src",
    "if password == stored:",
    "bypass = True",
    "password_hash = make_hash(password)",
    "password_min_length = 12",
    'prompt = "Password for the account"',
    'password = "Password for the account"',
    "Password: !Ref DbPassword",
    '"Resource": "arn:aws:secretsmanager:*:*:secret:rds-db-credentials/*"',
    "- name: DB_PASSWORD\n  valueFrom:\n    secretKeyRef:\n      name: db\n      key: password\n",
    "- name: LOG_LEVEL\n  value: debug\n",
    "machine api.example.com login alice password $NETRC_PASSWORD",
    'fields = ("username", "password", "confirm_password")',
    'password = os.environ.get("DB_PASSWORD", "")',
    'password = "DB_PASSWORD"',
    "def unix_getpass(prompt='Password: ', stream=None):",
    "label = 'Password: ' + user + ' (again)'",
]


def test_placeholders_references_and_code_under_password_names_are_left_alone() -> None:
    redactor = Redactor(env={})
    for text in PLACEHOLDERS_AND_CODE:
        for form in (text, json.dumps({"content": text})):
            assert redactor.redact(form) == form, form
    assert redactor.total == 0


def test_name_value_lists_split_over_lines_and_entries() -> None:
    token = chars(32, "ddkey", "0123456789abcdef")
    pw = made_up_password("list")
    for secret, name in ((token, "DATADOG_API_KEY"), (pw, "SMTP_PASSWORD")):
        yaml_list = f'env:\n  - name: LOG_LEVEL\n    value: info\n  - name: {name}\n    value: "{secret}"\n'
        for text in (
            yaml_list,
            "".join(f"{n:>2}| {line}\n" for n, line in enumerate(yaml_list.splitlines(), 1)),  # read_file
            "".join(f"+{line}\n" for line in yaml_list.splitlines()),  # a diff
            json.dumps({"path": "deploy.yaml", "new_text": yaml_list}),  # edit arguments
            json.dumps({"environment": [{"name": "LOG_LEVEL", "value": "info"}, {"name": name, "value": secret}]}),
            json.dumps([{"key": name, "value": secret, "target": ["production"]}], indent=2),
            json.dumps([{"ParameterKey": "".join(p.capitalize() for p in name.split("_")), "ParameterValue": secret}]),
            f"envVars:\n  - key: {name}\n    value: {secret}\n",
            f"--container-definitions 'environment=[{{name={name},value={secret}}}]'",
        ):
            out = Redactor(env={}).redact(text)
            assert secret not in out and "[REDACTED:" in out, (text, out)
