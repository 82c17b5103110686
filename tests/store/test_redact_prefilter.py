"""The one-pass rule selection of redaction: a rule's prefilter matches every text the rule
matches, a decode pass's trigger every text the pass decodes something in, and redaction finds the
same secrets whether hyperscan chooses the rules (ASCII texts) or each keyword is looked for on its
own (other texts, or no hyperscan)."""

from __future__ import annotations

import random
import re
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from feedback_store.redaction import decode, prefilter
from feedback_store.redaction.redactor import Redactor
from feedback_store.redaction.rules import load_rules
from tests.store.secret_corpus import cases
from tests.store.test_secret_corpus import stdlib_sample


def corpus_texts() -> list[str]:
    texts = [case.text for case in cases(seed=3, samples=1)]
    rng = random.Random(3)
    # The same secrets inside ordinary code, and in texts that are not ASCII (the fallback path).
    code = [p.read_text(encoding="utf-8", errors="replace")[:3000] for p in stdlib_sample()[:40]]
    texts += [f"{rng.choice(code)}\n{text}\n{rng.choice(code)}" for text in texts[::7]]
    texts += [f"résumé — {text} ✓" for text in texts[::5]]
    return texts


def test_each_prefilter_matches_every_text_its_rule_matches() -> None:
    rules = [rule for rule in load_rules() if rule.prefilter]
    assert len(rules) >= 8  # the anchored name rules and the keyword-less token rules
    texts = corpus_texts()
    matched = 0
    for rule in rules:
        pattern, prefilter = re.compile(rule.regex), re.compile(rule.prefilter)
        for text in texts:
            if pattern.search(text):
                matched += 1
                assert prefilter.search(text), f"{rule.id}: its prefilter misses {text[:200]!r}"
    assert matched > 1000  # the corpus exercised the rules


def token_shaped_texts() -> list[str]:
    """Near misses of the dotted tokens (Kubernetes' `id.secret`, Discord's three parts): parts one
    character short or long, in another case, joined by another separator, after or before
    characters that do or do not end a token."""
    rng = random.Random(5)
    edges = ["", " ", "\n", "\\n", "x", "-", "_", ".", "/", "é"]
    run = "q8w7e6r5t4y3u2i1MTIzNDU2Nzg5MDEyMzQ1Njc4-_Gh1jK2LmNoPqRsTuVwXyZ0a9b8c7d6e5f4"

    def part(n: int, lower: bool) -> str:
        at = rng.randrange(len(run) - 40)
        text = run[at : at + n + rng.choice((-1, 0, 0, 0, 1))]
        return text.lower().replace("-", "a").replace("_", "b") if lower else text

    texts = []
    for _ in range(20_000):
        kubernetes = [part(6, True), part(16, rng.random() < 0.8)]
        discord = [rng.choice("MNOPm") + part(24, False), part(6, False), part(27, False)]
        parts = kubernetes if rng.random() < 0.5 else discord
        joined = rng.choice([".", ".", ".", "-", ".."]).join(parts)
        texts.append(rng.choice(edges) + joined + rng.choice(edges))
    return texts


def test_each_prefilter_of_a_dotted_token_matches_every_text_its_rule_matches() -> None:
    texts = token_shaped_texts()
    for rule_id in ("kubernetes_bootstrap_token", "discord_bot_token"):
        rule = next(rule for rule in load_rules() if rule.id == rule_id)
        pattern, prefilter = re.compile(rule.regex), re.compile(rule.prefilter)
        matched = [text for text in texts if pattern.search(text)]
        assert len(matched) > 50, rule_id  # the shapes reach the rule
        missed = [text for text in matched if not prefilter.search(text)]
        assert not missed, f"{rule_id}: its prefilter misses {missed[:3]!r}"


@pytest.mark.skipif(prefilter.hyperscan is None, reason="hyperscan is not installed")
def test_hyperscan_selection_redacts_exactly_what_checking_each_rule_does(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = corpus_texts() + token_shaped_texts()[::4]
    env = {"DEPLOY_TOKEN": "Zq8#mW2!pL5x-envvalue", "HOME": "/home/someone"}
    texts += [f"echo {env['DEPLOY_TOKEN']} > out", 'log: {"token": "Zq8#mW2!pL5x-envvalue"}']
    fast = Redactor(env=env)
    fast_out = [fast.redact(text) for text in texts]
    monkeypatch.setattr(prefilter, "hyperscan", None)
    slow = Redactor(env=env)
    assert slow._selector._database is None
    slow_out = [slow.redact(text) for text in texts]
    differ = [(a, b) for a, b in zip(fast_out, slow_out) if a != b]
    assert not differ, differ[:3]
    assert fast.counts == slow.counts and fast.counts["env_value"] == 2


@pytest.mark.skipif(prefilter.hyperscan is None, reason="hyperscan is not installed")
def test_a_text_with_nothing_to_look_for_tries_no_rule() -> None:
    selector = Redactor(env={})._selector
    assert selector.select("def add(a, b):\n    return a + b\n") is prefilter.NOTHING
    chosen = selector.select("export GITHUB_TOKEN=ghp_" + "a1B2" * 9)
    assert {c.rule.id for c in chosen.tokens} >= {"github_token"}
    assert "generic_secret" in {c.rule.id for c in chosen.others}
    # A credential word with no value after it is no reason to try the name rules.
    assert "generic_secret" not in {c.rule.id for c in selector.select("the api_key argument").others}


def encoded_texts() -> list[str]:
    """The corpus, and random strings of encoded characters, quotes, separators and word characters."""
    rng = random.Random(11)
    pieces = ["a", "Z", "7", " ", "\n", '"', "'", "<", "\\", "%", "%41", "%0a", "%02", "%2D", "=", "/", "é"]
    pieces += ["\\u0041", "\\\\u0042", "\\x41", "\\x00", "\\ufffe", "\\u00e9", "\\n", "\\t"]
    texts = ["".join(rng.choice(pieces) for _ in range(rng.randrange(1, 40))) for _ in range(20_000)]
    return corpus_texts() + texts


def test_each_decode_trigger_matches_every_text_its_pass_decodes() -> None:
    percent, escapes, base64 = (
        re.compile(t) for t in (decode.PERCENT_TRIGGER, decode.ESCAPE_TRIGGER, decode.BASE64_TRIGGER)
    )
    decoded = {"percent": 0, "escapes": 0, "base64": 0}
    for text in encoded_texts():
        words = [w for w in text.split() if len(w) >= decode.MIN_BASE64]
        for name, trigger, args in (
            ("percent", percent, ([], True, False)),
            ("escapes", escapes, ([], False, True)),
            ("base64", base64, (words, False, False)),
        ):
            if next(decode.segments(text, *args), None) is not None:
                decoded[name] += 1
                assert trigger.search(text), f"{name}: its trigger misses {text[:200]!r}"
    assert min(decoded.values()) > 300, decoded  # each pass decoded something


@pytest.mark.skipif(prefilter.hyperscan is None, reason="hyperscan is not installed")
def test_encoded_characters_too_short_to_hold_a_secret_are_no_reason_to_decode() -> None:
    selector = Redactor(env={})._selector
    codec_table = "".join(f"    '\\x{i:02x}'     #  0x{i:02X} -> CHARACTER\n" for i in range(0xA0, 0x100))
    assert selector.select(codec_table) is prefilter.NOTHING
    assert selector.select("print('%2d items' % n)") is prefilter.NOTHING
    assert selector.select("name = 'caf\\u00e9'").escapes
    assert selector.select("q=caf%C3%A9").percent


def test_threads_redacting_at_once_find_what_one_thread_finds() -> None:
    """Each thread scans with a scratch space of its own; sharing one would mix their matches."""
    texts = corpus_texts()[:600]
    alone = Redactor(env={})
    expected = [alone.redact(text) for text in texts]
    shared = Redactor(env={})
    barrier = threading.Barrier(4)

    def redact_all(offset: int) -> list[str]:
        barrier.wait()
        order = texts[offset:] + texts[:offset]
        out = [shared.redact(text) for text in order]
        return out[len(texts) - offset :] + out[: len(texts) - offset]

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(redact_all, (0, 150, 300, 450)))
    assert sum(out != text for out, text in zip(expected, texts)) > 100  # secrets were found
    for result in results:
        assert result == expected


@pytest.mark.skipif(prefilter.hyperscan is None, reason="hyperscan is not installed")
def test_keywords_are_found_in_a_text_that_is_not_ascii(monkeypatch: pytest.MonkeyPatch) -> None:
    """Such a text's keywords are searched in its UTF-8 (a lone surrogate included), and choose
    what looking for each keyword alone chooses."""
    env = {"DEPLOY_TOKEN": "pässwört-Zq8#mW2!pL5x"}
    texts = [
        f"{prefix}{text}{suffix}" for text in corpus_texts()[::9] for prefix, suffix in (("é ", ""), ("\ud800", "✓"))
    ]
    texts += ["déploy: pässwört-Zq8#mW2!pL5x", "SK_LIVE_ \ud83d", "ghp_" + "é" * 40]
    fast = Redactor(env=env)
    held = fast._selector._held("x ghp_é sk-\ud800 aws", ("ghp_", "sk-", "aws", "hf_"))
    assert held >= {"ghp_", "sk-", "aws"} and "hf_" not in held
    fast_out = [fast.redact(text) for text in texts]
    monkeypatch.setattr(prefilter, "hyperscan", None)
    slow = Redactor(env=env)
    assert [slow.redact(text) for text in texts] == fast_out
    assert fast.counts == slow.counts and fast.counts["env_value"] == 1 and fast.total > 100
