"""Every secret pattern the redactor claims is tested: each ``detect-secrets`` detector it names
exists in the installed package (none silently missing) and finds its sample, each pattern of
its own finds its sample, and the redactor removes each one, in context."""

from __future__ import annotations

import re

import pytest

from auto.record import redact
from auto.record.redact import DETECT_SECRETS_PLUGINS, PATTERNS, REDACTED, Redactor, pattern_secrets

# (text with the secret in context, the secret) per detector: made up, none is a live credential
PLUGIN_SAMPLES = {
    "AWSKeyDetector": [("aws id AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
                       ('aws_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"', "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")],
    "AzureStorageKeyDetector": [("DefaultEndpointsProtocol=https;AccountKey=" + "Zm9vYmFy" * 11,
                                 "AccountKey=" + "Zm9vYmFy" * 11)],
    "BasicAuthDetector": [("db at https://bob:hunter2-Url-Pass-9911@db.example/x", "hunter2-Url-Pass-9911")],
    "DiscordBotTokenDetector": [("bot MTAxMjM0NTY3ODkwMTIzNDU2.GaBcDe.abcdefghijklmnopqrstuvwxyz0",
                                 "MTAxMjM0NTY3ODkwMTIzNDU2.GaBcDe.abcdefghijklmnopqrstuvwxyz0")],
    "GitHubTokenDetector": [("token ghp_abcdefghijklmnopqrstuvwxyz0123456789", "ghp_abcdefghijklmnopqrstuvwxyz0123456789")],
    "GitLabTokenDetector": [("use glpat-abcdefghij0123456789 now", "glpat-abcdefghij0123456789")],
    "MailchimpDetector": [("mc 0123456789abcdef0123456789abcdef-us12", "0123456789abcdef0123456789abcdef-us12")],
    "NpmDetector": [("//registry.npmjs.org/:_authToken=npm_abcdefghijklmnopqrstuvwxyz0123456789",
                     "npm_abcdefghijklmnopqrstuvwxyz0123456789")],
    "OpenAIDetector": [("key 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",
                        "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")],
    "PypiTokenDetector": [("pypi-AgEIcHlwaS5vcmc" + "A1b2C3d4E5" * 7, "pypi-AgEIcHlwaS5vcmc" + "A1b2C3d4E5" * 7)],
    "SendGridDetector": [("SG.abcdefghijklmnopqrstuv.abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG",
                          "SG.abcdefghijklmnopqrstuv.abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG")],
    "SlackDetector": [("xoxb-123456789012-1234567890123-abcdefghijklmnopqrstuvwx",
                       "xoxb-123456789012-1234567890123-abcdefghijklmnopqrstuvwx"),
                      ("hook https://hooks.slack.com/services/T0123ABC/B0456DEF/abcdefghij0123456789",
                       "https://hooks.slack.com/services/T0123ABC/B0456DEF/abcdefghij0123456789")],
    "SquareOAuthDetector": [("sq0csp-" + "aB3dE" * 8 + "xyz", "sq0csp-" + "aB3dE" * 8 + "xyz")],
    "StripeDetector": [("sk_live_abcdefghijklmnopqrstuvwx", "sk_live_abcdefghijklmnopqrstuvwx")],
}

# per pattern of PATTERNS, in order: (text, secret) samples
PATTERN_SAMPLES = [
    [("my key sk-proj-Ab3dEf9hIjKlMnOpQrStUvWxYz0123456789 ok", "sk-proj-Ab3dEf9hIjKlMnOpQrStUvWxYz0123456789"),
     ("k=sk-ant-api03-abcDEF123456789012345678901234567890-xyzAA", "sk-ant-api03-abcDEF123456789012345678901234567890-xyzAA"),
     ("sk-abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMN", "sk-abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMN")],
    [("x -----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAz1x2y3\n-----END RSA PRIVATE KEY----- y",
      "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAz1x2y3\n-----END RSA PRIVATE KEY-----"),
     ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA")],
    [("PuTTY-User-Key-File-2: ssh-rsa\nPrivate-Lines: 1\nAAAAB3Nz\nPrivate-MAC: 0123abcd",
      "PuTTY-User-Key-File-2: ssh-rsa\nPrivate-Lines: 1\nAAAAB3Nz\nPrivate-MAC: 0123abcd")],
    [("t=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
      "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c")],
    [("Authorization: Bearer abcdef0123456789ABCDEF0123456789", "abcdef0123456789ABCDEF0123456789")],
    [("GH github_pat_11ABCDEFG0123456789abc_" + "aB1" * 19 + "xy", "github_pat_11ABCDEFG0123456789abc_" + "aB1" * 19 + "xy")],
    [("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
     ('{"SecretAccessKey": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}', "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
     ("export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")],
]


def _plugin(name: str):
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    return {c.__name__: c for c in get_mapping_from_secret_type_to_class().values()}.get(name)


def test_every_claimed_detector_exists_and_has_a_sample():
    missing = [n for n in DETECT_SECRETS_PLUGINS if _plugin(n) is None or not getattr(_plugin(n), "denylist", ())]
    assert missing == [], "detectors the redactor names but the installed detect-secrets lacks"
    assert sorted(PLUGIN_SAMPLES) == sorted(DETECT_SECRETS_PLUGINS)
    assert len(PATTERN_SAMPLES) == len(PATTERNS)


def _found_by(patterns, text: str) -> set[str]:
    out = set()
    for rx in patterns:
        for m in rx.finditer(text):
            out.add(redact._secret_of(m))
    return out


@pytest.mark.parametrize("name", sorted(PLUGIN_SAMPLES))
def test_each_detector_finds_its_sample_and_the_redactor_removes_it(name):
    for text, secret in PLUGIN_SAMPLES[name]:
        assert any(secret in s or s in secret for s in _found_by(_plugin(name).denylist, text)), (name, text)
        assert secret in pattern_secrets(text) or any(s in secret for s in pattern_secrets(text))
        out, n = Redactor().redact_text(text, [])
        assert n >= 1 and REDACTED in out
        core = secret.split("=", 1)[-1]  # the Azure sample's secret follows its name
        assert core not in out, (name, out)


@pytest.mark.parametrize("i", range(len(PATTERNS)))
def test_each_own_pattern_finds_its_samples_and_the_redactor_removes_them(i):
    for text, secret in PATTERN_SAMPLES[i]:
        assert secret in _found_by([PATTERNS[i]], text), (i, text, PATTERNS[i].pattern[:60])
        out, n = Redactor().redact_text(text, [])
        assert secret not in out and n >= 1


@pytest.mark.parametrize("text", [
    "sk-learn-compatible-estimators are fine", "the task took 1234567890 µs", "sha256:" + "ab" * 32,
    "https://example.com/v1/models?limit=20", "order A-1234 shipped", "Bearer of bad news",
    "aws_secret_access_key is documented in the AWS guide",
])
def test_ordinary_text_is_not_taken_for_a_secret(text):
    assert Redactor().redact_text(text, []) == (text, 0)


def test_no_pattern_needs_case_folding_the_prefilter_would_miss():
    # a pattern with required literals is only run where one of them occurs (a substring test):
    # every sample above still reaches its pattern through that prefilter
    for rx, lits in redact.prefiltered_patterns():
        if lits is None:
            continue
        samples = [t for ss in PLUGIN_SAMPLES.values() for t, _s in ss] + [t for ss in PATTERN_SAMPLES for t, _s in ss]
        for t in samples:
            if rx.search(t):
                assert any(lit in t for lit in lits), (rx.pattern[:60], t)
    assert all(isinstance(rx, re.Pattern) for rx in PATTERNS)


def test_anchors_bound_where_a_match_starts():
    from auto.record.redact import anchors, reach
    assert anchors(re.compile(r"[0-9a-z]{32}-us[0-9]{1,2}")) == (("-us", 32),)
    assert anchors(re.compile(r"(?<![\w-])sk-[\w-]{20,}")) == (("sk-", 0),)
    assert anchors(re.compile(r"x+yzw")) == (("yzw", None),)  # unbounded ahead of it: searched whole
    assert anchors(re.compile(r"[a-z]+")) is None
    assert reach(re.compile(r"ab(?!\w)")) == 4 and reach(re.compile(r"a(?=\w*)b")) is None


def _samples() -> list[str]:
    out = [t for ss in PLUGIN_SAMPLES.values() for t, _s in ss] + [t for ss in PATTERN_SAMPLES for t, _s in ss]
    out += ["A3T3BlbkFJ 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",  # anchors that overlap
            "AUTHORIZATION: BEARER abcdef0123456789ABCDEF0123456789", "Xoxb-123456789012-1234567890123-abc",
            "İstanbul bearer abcdef0123456789ABCDEF0123456789 ſk", "aws_key = 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY'"]
    return out


def test_one_scan_finds_what_each_pattern_finds():
    # the scanner (one scan for every pattern's anchors, patterns run near them) reports every
    # match each pattern's own finditer reports, in every sample and in each sample inside prose
    from auto.record.redact import scanner
    sc = scanner()
    prose = "The support ticket says the app crashes; see https://example.com/a.b?x=1 -- glad ghosts sk- " * 3
    for t in _samples():
        for text in (t, prose + t + prose, t + "\n" + t):
            want = {(m.start(), m.end()) for rx in sc.patterns for m in rx.finditer(text)}
            got = {(m.start(), m.end()) for m in sc.scan(text)}
            assert want <= got, (text[:80], want - got)
            assert all(m.re.match(text, m.start()) for m in sc.scan(text))  # nothing made up
            assert bool(sc.scan(text, first=True)) == bool(want)
