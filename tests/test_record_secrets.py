"""Secrets never reach the store: redacted by value and by pattern in every span the recorder
writes (task spans included), counted in the span's attributes, and never learned by a compile."""

from __future__ import annotations

from pathlib import Path

import pytest

import auto
from auto.compile.witnesses import WitnessSet, is_redacted
from auto.record.redact import REDACTED, Redactor, is_secret_name, may_hold_pattern, pattern_secrets
from auto.store import Store, Witness
from openai_mock import client, completion

# one sample of each well-known format (made up: none is a live credential)
FORMATS = {
    "openai-project": "sk-proj-Ab3dEf9hIjKlMnOpQrStUvWxYz0123456789",
    "openai-legacy": "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",
    "anthropic": "sk-ant-api03-abcDEF123456789012345678901234567890-xyzAA",
    "aws": "AKIAIOSFODNN7EXAMPLE",
    "github": "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    "slack": "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    "jwt": ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ."
            "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"),
    "pem": "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAz1x2y3\nq9w8e7r6t5y4\n-----END RSA PRIVATE KEY-----",
    "stripe": "sk_live_abcdefghijklmnopqrstuvwx",
    "openai-letters-only": "sk-abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMN",
}
BEARER = "Bearer abcdef0123456789abcdef0123456789"


def _blob(path: Path) -> bytes:
    from conftest import store_blob

    return store_blob(path)


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_each_well_known_format_is_redacted_by_pattern(name):
    secret = FORMATS[name]
    text, n = Redactor().redact_text(f"please use {secret} for the deploy")
    assert secret not in text and n == 1 and text == f"please use {REDACTED} for the deploy"


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_the_span_fast_path_misses_no_format_after_clean_strings(name):
    """A string remembered as clean never hides a secret in another string of the next span."""
    r = Redactor()
    system = "You are a helpful triage assistant; answer in JSON with a label and a reason."
    clean = {"name": "triage", "input": {"messages": [{"role": "system", "content": system}]}, "output": "ok"}
    assert r.redact_span(clean) is clean and r.redact_span(clean) is clean
    dirty = {"name": "triage", "input": {"messages": [{"role": "system", "content": system},
                                                      {"role": "user", "content": f"key {FORMATS[name]} here"}]},
             "output": "ok"}
    out = r.redact_span(dirty)
    assert FORMATS[name] not in str(out) and out["attributes"]["auto.redacted"] == ["input"]


def test_required_literals_are_in_every_match():
    import re

    from auto.record.redact import required_literals
    cases = {r"ab+cd": ("cd",), r"x(?:foo|barbaz)y": ("foo", "barbaz"), r"(?:a|b)zz[0-9]{2}": ("zz",),
             r"(q1w2)+e": ("q1w2",), r"k?longer": ("longer",), r"(?i)token": None, r"xx(?i:abc)y": ("xx",),
             r"[a-z]+": None, r"(?:pre|[0-9])fix": ("fix",)}
    for pat, want in cases.items():
        rx = re.compile(pat)
        got = required_literals(rx)
        assert (got if got is None else tuple(sorted(got))) == (want if want is None else tuple(sorted(want))), pat
    from auto.record.redact import prefiltered_patterns
    for rx, lits in prefiltered_patterns():  # every pattern's literals occur in what it matches
        for text in [f"use {v} now" for v in FORMATS.values()] + [BEARER]:
            m = rx.search(text)
            if m and lits is not None:
                assert any(lit in m.group(0) for lit in lits), (rx.pattern, text)


def test_the_prefiltered_patterns_find_what_the_patterns_find():
    texts = [f"use {v} now" for v in FORMATS.values()] + [
        f"header: {BEARER}", "db at https://bob:hunter2secret@db.example/x",
        "hooks at https://hooks.slack.com/services/T0123ABCD/B0123ABCD/abcdefghijklmnopqrstuvwx",
        "The app crashes on startup; sha256:" + "ab" * 32, "plain words and nothing else in them at all"]
    for t in texts:
        assert may_hold_pattern(t) == bool(pattern_secrets(t)), t


def test_an_environment_secret_set_after_a_write_is_redacted(monkeypatch):
    r = Redactor()
    span = {"name": "s", "input": {"note": "value Zq81xW0pLm29Nc47 in a prompt"}, "output": None}
    assert r.redact_span(span) is span
    monkeypatch.setenv("LATE_SERVICE_TOKEN", "Zq81xW0pLm29Nc47")
    assert r.redact_span(span)["input"] == {"note": f"value {REDACTED} in a prompt"}
    monkeypatch.delenv("LATE_SERVICE_TOKEN")
    assert r.redact_span(span) is span


def test_bearer_tokens_and_url_passwords_keep_their_context():
    r = Redactor()
    assert r.redact_text(f"header: {BEARER}")[0] == f"header: Bearer {REDACTED}"
    assert r.redact_text("db at https://bob:hunter2secret@db.example/x")[0] == f"db at https://bob:{REDACTED}@db.example/x"


def test_ordinary_text_ids_and_digests_are_left_alone():
    text = ("The app crashes on startup; desk-reservation-system-for-everyone task-abcdefghijklmnopqrstuvwxyz "
            "an sk-learn-compatible-estimator-pipeline-for-everyone "
            "sha256:" + "ab" * 32 + " trace 0af7651916cd43dd8448eb211c80319c span b7ad6b7169203331 "
            "triage/chat.completions/sha256:" + "0f" * 32)
    assert Redactor().redact_text(text) == (text, 0)


def test_secret_names():
    assert all(map(is_secret_name, ["OPENAI_API_KEY", "GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "PGPASSWORD",
                                    "my_db_password", "SERVICE_CREDENTIALS", "GPG_PASSPHRASE"]))
    assert not any(map(is_secret_name, ["PATH", "HOME", "PWD", "TOKENIZERS_PARALLELISM", "KEYBOARD_LAYOUT",
                                        "SSH_AUTH_SOCK", "OPENAI_BASE_URL"]))


def _echo(body, request):
    """The model answers with the last user message (a model that repeats what it was told)."""
    return completion({"content": body["messages"][-1]["content"]},
                      usage={"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10})


def test_secrets_are_redacted_in_every_span_and_counted(tmp_path, monkeypatch):
    typed = FORMATS["openai-project"]                    # a key a user typed in a message
    env_value = "tok-" + "7f3e9a1b2c4d5e6f" * 2           # an environment variable's value put in a prompt
    monkeypatch.setenv("MY_SERVICE_TOKEN", env_value)
    own_key = "local-gateway-Q7x9Z2w4R6t8Y1u3"         # the client's own key (no well-known format)
    org = "org-Qx7Fz0aBcDeFgHiJkLmNoPqR"
    c = client(_echo, api_key=own_key, organization=org)
    path = tmp_path / "s.db"

    @auto.task("leaky")
    def leaky(ticket: str, key: str) -> dict:
        r = c.chat.completions.create(model="gpt-4o", messages=[
            {"role": "system", "content": f"service token {env_value}"},
            {"role": "user", "content": ticket}])
        return {"answer": r.choices[0].message.content, "key": key}

    with auto.recording(path):
        out = leaky(f"my key is {typed}, deploy with {FORMATS['github']}", own_key)
    assert out["key"] == own_key  # the agent itself sees everything unchanged

    blob = _blob(path)
    for secret in (typed, env_value, own_key, org, FORMATS["github"]):
        assert secret.encode() not in blob
    with Store(path) as st:
        (llm,) = st.spans(kind="llm")
        (task,) = st.spans(kind="task")
    assert llm["input"]["messages"][0]["content"] == f"service token {REDACTED}"
    assert llm["input"]["messages"][1]["content"] == f"my key is {REDACTED}, deploy with {REDACTED}"
    assert llm["output"]["content"] == f"my key is {REDACTED}, deploy with {REDACTED}"
    assert llm["attributes"]["auto.redactions"] == 5 and llm["attributes"]["auto.redacted"] == ["input", "output"]
    # the account header is kept as a digest
    assert llm["attributes"]["auto.request.headers"]["openai-organization"].startswith("sha256:")
    # the task span: its argument and its result held the typed key and the client's own key
    assert task["input"] == {"ticket": f"my key is {REDACTED}, deploy with {REDACTED}", "key": REDACTED}
    assert task["output"] == {"answer": f"my key is {REDACTED}, deploy with {REDACTED}", "key": REDACTED}
    assert task["attributes"]["auto.redactions"] == 6 and task["attributes"]["auto.redacted"] == ["input", "output"]
    with Store(path) as st:
        assert st.verify().ok


def test_a_task_span_without_a_model_call_is_redacted_by_pattern(tmp_path):
    path = tmp_path / "s.db"

    @auto.task("plain")
    def plain(note: str) -> str:
        return note.upper()

    with auto.recording(path):
        plain(f"aws id {FORMATS['aws']} and {FORMATS['pem']}")
    with Store(path) as st:
        (w,) = st.witnesses("plain")
    assert w.input == {"note": f"aws id {REDACTED} and {REDACTED}"}
    assert FORMATS["aws"] not in str(w.output) and w.attributes["auto.redacted"] == ["input", "output"]
    assert FORMATS["aws"].encode() not in _blob(path)


def _witness(inp: dict, out, redacted=None) -> Witness:
    attrs = {"auto.redacted": redacted} if redacted else {}
    return Witness(input=inp, output=out, status="ok", error=None, trace_id="t", span_id="s", started_ns=0,
                   digest="d", attributes=attrs)


def test_a_compile_never_learns_a_redacted_witness():
    ws = [_witness({"q": "a"}, "x"), _witness({"q": f"key {REDACTED}"}, "y", ["input"]),
          _witness({"q": "b"}, REDACTED, ["output"]), _witness({"q": "c"}, "z", ["attributes"])]
    assert [is_redacted(w) for w in ws] == [False, True, True, False]
    s = WitnessSet.of("t", ws)
    assert s.redacted == 2 and len(s.witnesses) == 2
    assert [inp for inp, _out, _share in s.items] == [{"q": "a"}, {"q": "c"}]


def test_a_header_snapshot_reads_as_the_headers_do():
    import httpx2

    from auto.record.redact import header_items, sanitize_headers, secrets_of, snapshot_headers

    class Req:
        def __init__(self, headers):
            self.headers = headers

    for pairs in ([("Authorization", "Bearer tok-123456789"), ("X-A", "1"), ("x-a", "2"), ("X-A", "3")],
                  [(b"X-U", "é".encode()), (b"Api-Key", "k\u00e9y-123456".encode()), (b"host", b"h")],
                  [(b"cookie", b"a=123456789"), (b"Cookie", b"b=987654321")],
                  [("OpenAI-Organization", "org-1"), ("openai-organization", "org-2"), ("Host", "h")]):
        h = httpx2.Headers(pairs)
        snap = snapshot_headers(h)
        assert list(header_items(snap)) == list(h.items())
        assert sanitize_headers(snap) == sanitize_headers(h)
        assert secrets_of(Req(h), None, snap) == secrets_of(Req(h), None, list(h.items()))


def test_a_refusal_says_how_many_witnesses_were_left_out_as_redacted():
    from auto.errors import RungRefused
    from auto.compile.rungs.program import compile_rung
    from auto.gate import Contract

    ws = WitnessSet.of("t", [_witness({"q": f"key {REDACTED} {i}"}, "y", ["input"]) for i in range(30)])
    with pytest.raises(RungRefused) as refused:
        compile_rung(ws, Contract(task="t"), None)
    assert "only 0 distinct witnessed inputs" in str(refused.value)
    assert "30 witnesses left out because a secret was redacted" in str(refused.value)
    assert WitnessSet.of("t", [_witness({"q": "a"}, "x")]).redacted_note() == ""


def test_a_region_never_learns_a_run_with_a_redacted_step(tmp_path):
    from auto.compile.steps.traces import read_task_traces

    path = tmp_path / "r.sqlite"
    store = Store(path)

    @auto.tool("lookup")
    def lookup(query: str) -> dict:
        return {"result": f"found {query}"}

    @auto.task("agent")
    def agent(request: str) -> str:
        return lookup(query=request)["result"]

    with auto.recording(store):
        agent(request="where is order A-1")
        agent(request=f"my key is {FORMATS['github']}")  # redacted in the task's input
        agent(request="where is order B-2")
    traces, skipped = read_task_traces(store, "agent")
    assert sorted(t.input["request"] for t in traces) == ["where is order A-1", "where is order B-2"]
    assert skipped["redacted"] == 1
    store.close()


def test_credentials_learned_later_are_redacted_from_the_next_span_redacted():
    # a model call hands its request's headers over (one append on the agent's thread); whichever
    # thread redacts next works their secrets out first, so no span redacted after it keeps them
    r = Redactor()
    r.learn_later([("authorization", "Bearer Zq81xW0pLm29Nc47abcd"), ("x-trace", "t-1")], "opaque-client-key-77")
    span = {"name": "s", "input": {"a": "Zq81xW0pLm29Nc47abcd and opaque-client-key-77"}, "output": None}
    out = r.redact_span(span)
    assert "Zq81xW0pLm29Nc47abcd" not in repr(out) and "opaque-client-key-77" not in repr(out)
    assert out["attributes"]["auto.redactions"] == 2 and not r._later
