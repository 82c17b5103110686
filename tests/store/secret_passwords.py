"""Passwords a person made up, in the shapes people make them: words (from a list of the words
that lead password lists, or invented and pronounceable), digits (a year, a count), a symbol,
capitals, letters swapped for look-alike symbols, keyboard walks. None of them looks generated.
"""

from __future__ import annotations

import random
import string

WORDS = (
    "falcon maple summer winter autumn spring dragon shadow sunshine tiger river monkey princess football "
    "baseball master hunter ranger soccer charlie freedom thunder silver golden orange purple yellow coffee "
    "cookie banana cheese pepper ginger whisky rocket galaxy planet forest garden mountain ocean island "
    "harbor castle knight wizard pirate ninja panda koala eagle raven wolf bear lion phoenix jaguar "
    "london paris berlin tokyo boston denver dallas austin chelsea arsenal liverpool yankees"
).split()
MONTHS = "january february march april may june july august september october november december".split()
SEASONS = ("spring", "summer", "autumn", "fall", "winter")
SYMBOLS = "!@#$%&*?.-_+=~^"
LEET = str.maketrans({"a": "@", "o": "0", "e": "3", "i": "1", "s": "$", "t": "7"})
KEYBOARD_WALKS = ("qwerty", "asdfgh", "zxcvbn", "1qaz2wsx", "qazwsx", "1q2w3e4r", "poiuyt", "qwertyuiop")
CONSONANTS, VOWELS = "bcdfghjklmnprstvwz", "aeiou"


def made_up_word(rng: random.Random) -> str:
    """A pronounceable word that is in no list: two or three consonant-vowel syllables."""
    word = "".join(rng.choice(CONSONANTS) + rng.choice(VOWELS) for _ in range(rng.randrange(2, 4)))
    return word + (rng.choice(CONSONANTS) if rng.random() < 0.5 else "")


def word(rng: random.Random) -> str:
    return rng.choice(WORDS) if rng.random() < 0.7 else made_up_word(rng)


def digits(rng: random.Random) -> str:
    if rng.random() < 0.4:
        return str(rng.randrange(1960, 2031))  # a year
    return str(rng.randrange(10 ** rng.randrange(1, 5)))


def person_password(rng: random.Random) -> str:
    """One of the shapes of a made-up password, with random words, digits and symbols."""
    sym = rng.choice(SYMBOLS)
    shape = rng.randrange(8)
    if shape == 0:  # Falcon1234!
        return word(rng).capitalize() + digits(rng) + sym
    if shape == 1:  # Falcon1234!maplexY7: words, digits, a symbol and a few keystrokes more
        tail = "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(3))
        return word(rng).capitalize() + digits(rng) + sym + word(rng) + tail
    if shape == 2:  # maple#Tiger2019
        return word(rng) + sym + word(rng).capitalize() + digits(rng)
    if shape == 3:  # Summer2024! / October1987*
        return rng.choice(SEASONS + tuple(MONTHS)).capitalize() + str(rng.randrange(1970, 2031)) + sym
    if shape == 4:  # M@pl3Tr33#42: letters swapped for look-alikes
        return (word(rng).capitalize() + word(rng).capitalize()).translate(LEET) + sym + digits(rng)
    if shape == 5:  # correct-Horse-battery-42: a passphrase with separators
        sep = rng.choice("-_.")
        parts = [word(rng) for _ in range(rng.randrange(2, 5))]
        at = rng.randrange(len(parts))
        parts[at] = parts[at].capitalize()
        return sep.join([*parts, digits(rng)])
    if shape == 6:  # 1qaz@WSX / Qwerty123!: a keyboard walk
        walk = rng.choice(KEYBOARD_WALKS)
        half = len(walk) // 2
        return walk[:half] + sym + walk[half:].upper() if rng.random() < 0.5 else walk.capitalize() + digits(rng) + sym
    return word(rng).capitalize() + digits(rng) + word(rng)  # Falcon1234maple: no symbol at all


# (kind, the name it is kept under, how it sits in its own file, how curl sends it)
PASSWORD_NAMES = (
    ("person_smtp_password", "SMTP_PASSWORD", None, "--url smtps://mail.example.com --user 'alerts@example.com:{v}'"),
    ("person_password", "PASSWORD", None, "-u 'admin:{v}'"),
    ("person_postgres_password", "POSTGRES_PASSWORD", None, None),
    ("person_mysql_root_password", "MYSQL_ROOT_PASSWORD", None, None),
    ("person_ldap_bind_passwd", "LDAP_BIND_PASSWD", None, None),
    ("person_db_pwd", "DB_PWD", None, None),
    ("person_rabbitmq_pass", "RABBITMQ_DEFAULT_PASS", None, "-u 'guest:{v}'"),
    ("person_webhook_secret", "WEBHOOK_SECRET", None, None),
    ("person_gpg_passphrase", "GPG_PASSPHRASE", None, None),
    ("person_admin_password_camel", "adminPassword", None, None),
    (
        "person_twine_password",
        "TWINE_PASSWORD",
        "[distutils]\nindex-servers = pypi\n\n[pypi]\nusername = alice\npassword = {v}",
        "-u 'alice:{v}'",
    ),
    (
        "person_compose_password",
        "POSTGRES_PASSWORD",
        "services:\n  db:\n    environment:\n      - POSTGRES_PASSWORD={v}",
        None,
    ),
    ("person_spring_password", "SPRING_DATASOURCE_PASSWORD", "spring.datasource.password={v}", None),
    ("person_ini_pass", "DB_PASS", "[database]\nhost = db.internal\nuser = app\npass = {v}", None),
    ("person_netrc_password", "NETRC_PASSWORD", "machine mail.example.com login alice password {v}", None),
)
