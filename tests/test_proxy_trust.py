"""``auto proxy`` trust boundaries: who may get a tier-1 answer (a verified key), what shadow
audits send upstream (the operator's audit key, never a caller's), paths that would leave the
upstream's base path, and the upstream URL's password never shown."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx2
import openai
import pytest

from auto.proxy import ProxyConfig, ProxyServer
from auto.proxy.keys import KeyGate, request_key
from auto.proxy.upstream import PathRefused, Upstream, mask_url, safe_rest

from site_fixtures import compiled_site, label_of, site_words, ticket_messages
from upstreams import ScriptedUpstream

KEY = "sk-proxy-test-secret-0123456789"
AUDIT_KEY = "sk-operator-audit-key-9876543210"


def proxy(upstream: str, store: Path, **kw) -> ProxyServer:
    kw.setdefault("ratchet_options", {"worker": "thread"})
    return ProxyServer(ProxyConfig(upstream=upstream, store=str(store), port=0, rediscover_s=0.2, **kw))


def chat(px: ProxyServer, word: str, key: str | None) -> tuple[int, dict[str, str], bytes]:
    body = json.dumps({"model": "m-1", "messages": ticket_messages(word)}).encode()
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    r = httpx2.post(px.base_url + "/chat/completions", content=body, headers=headers, timeout=30)
    return r.status_code, {k.lower(): v for k, v in r.headers.items()}, r.content


@pytest.fixture()
def compiled(tmp_path):
    return compiled_site(tmp_path)


# ----------------------------------------------------------------------------- who may get an answer


def test_no_key_or_a_wrong_key_is_never_answered_at_tier1(compiled):
    store, sid, _ = compiled
    w = site_words()[0]
    with ScriptedUpstream("tickets", require_key=KEY) as up, proxy(up.base_url, store, audit_rate=0.0) as px:
        for bad in (None, "nope", "sk-someone-else-0123456789abcdef"):
            status, headers, _ = chat(px, w, bad)
            assert status == 401 and headers.get("x-auto-tier") == "0", (bad, status, headers)
        assert len(up.requests) == 3  # each went upstream, which refused it
        status, headers, body = chat(px, w, KEY)  # first call of a good key: the upstream decides
        assert status == 200 and headers["x-auto-tier"] == "0" and len(up.requests) == 4
        status, headers, body = chat(px, w, KEY)  # accepted a moment ago: answered at tier-1
        assert status == 200 and headers["x-auto-tier"] == "1" and len(up.requests) == 4
        assert json.loads(body)["choices"][0]["message"]["content"] == label_of(w)
        status, headers, _ = chat(px, w, "nope")  # still refused after a good key was seen
        assert status == 401 and headers["x-auto-tier"] == "0"
        assert px.proxy.sites.status()[sid]["counters"]["unverified_key"] == 5
        held = px.proxy.keys.digests()
        assert held and all(KEY.encode() not in d for d in held)


def test_client_keys_are_answered_at_once_and_only_they_with_ttl_zero(compiled):
    store, sid, _ = compiled
    w = site_words()[0]
    with ScriptedUpstream("tickets") as up, proxy(up.base_url, store, audit_rate=0.0, client_keys=("listed-key-0123456789",),
                                                   key_ttl_s=0.0) as px:
        assert chat(px, w, "listed-key-0123456789")[1]["x-auto-tier"] == "1" and len(up.requests) == 0
        for _ in range(2):  # the upstream accepts anything, but with ttl 0 only the list counts
            assert chat(px, w, KEY)[1]["x-auto-tier"] == "0"
        assert len(up.requests) == 2


def test_key_gate_expiry_and_revocation():
    now = [0.0]
    gate = KeyGate(["listed-key-01"], ttl_s=10.0, clock=lambda: now[0])
    assert gate.admits("listed-key-01") and not gate.admits(None) and not gate.admits("")
    assert not gate.admits("k-abcdef")
    gate.saw("k-abcdef", 500)
    assert not gate.admits("k-abcdef")  # an error is no acceptance
    gate.saw("k-abcdef", 200)
    assert gate.admits("k-abcdef")
    now[0] = 9.9
    assert gate.admits("k-abcdef")
    now[0] = 10.0
    assert not gate.admits("k-abcdef")  # expired
    gate.saw("k-abcdef", 200)
    gate.saw("k-abcdef", 401)
    assert not gate.admits("k-abcdef")  # revoked: refused by the upstream
    assert request_key({"authorization": "Bearer  tok-1 "}) == "tok-1"
    assert request_key({"api-key": "azure-1"}) == "azure-1" and request_key({}) is None


def test_shadow_audits_use_the_operator_audit_key_never_a_callers(compiled):
    store, sid, _ = compiled
    words = site_words()
    for audit_key, want in ((AUDIT_KEY, f"Bearer {AUDIT_KEY}"), (None, None)):
        with ScriptedUpstream("tickets") as up, proxy(up.base_url, store, audit_rate=1.0, client_keys=(KEY,), audit_key=audit_key,
                                                       ratchet_options={"worker": "thread", "audit_hit_rate": 1.0,
                                                                        "repeat_audit_budget": None}) as px:
            status, headers, _ = chat(px, "refund never seen", KEY)  # a deopt: the caller's key went upstream
            assert headers["x-auto-tier"] == "0"
            assert chat(px, words[0], KEY)[1]["x-auto-tier"] == "1"
            deadline = time.time() + 30
            while time.time() < deadline and len(up.requests) < 2:
                px.proxy.sites.wait_idle(5)
                time.sleep(0.05)
            assert len(up.requests) >= 2, "the audit was not sent"
            audits = up.requests[1:]
            assert all(_auth(r) == want for r in audits), [r["headers"] for r in audits]
            assert _auth(up.requests[0]) == f"Bearer {KEY}"


def _auth(request: dict) -> str | None:
    return {k.lower(): v for k, v in request["headers"].items()}.get("authorization")


# ----------------------------------------------------------------------------- paths


def _raw_get(url: str, path: str) -> tuple[int, bytes]:
    host, port = url.split("//")[1].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.putrequest("GET", path, skip_accept_encoding=True)
    conn.endheaders()
    r = conn.getresponse()
    out = r.status, r.read()
    conn.close()
    return out


@pytest.mark.parametrize("path", ["/v1/../../admin", "/v1/%2e%2e/%2e%2e/admin", "/v1/models/..%2f..%2fadmin",
                                  "/v1/%252e%252e/admin", "/v1/models/%5c..%5cadmin", "/v1/./models"])
def test_paths_outside_the_upstream_base_are_refused(tmp_path, path):
    with ScriptedUpstream("tickets") as up, proxy(up.base_url, tmp_path / "p.sqlite", answer=False) as px:
        status, body = _raw_get(px.url, path)
        assert status == 400 and b"leaves the upstream's base path" in body
        assert len(body.splitlines()) == 1
        assert up.requests == []
        status, _ = _raw_get(px.url, "/v1/models")
        assert status == 200 and [r["path"] for r in up.requests] == ["/v1/models"]


def test_safe_rest_and_url_for():
    up = Upstream("http://svc:pw-0123456789@h:1/v1")
    assert str(up.url_for("/v1/chat/completions")) == "http://svc:pw-0123456789@h:1/v1/chat/completions"
    assert up.url_for("/v1/files/a%3Fb").raw_path == "/v1/files/a%253Fb"  # stays in the path
    assert up.url_for("/v1/a?b").raw_path == "/v1/a%3Fb"  # a decoded "?" is not a query
    for bad in ("/v1/..", "/../admin", "/v1/a/%2E%2E/b", "/v1/%25252e%25252e/x", "/v1/a\x00b"):
        with pytest.raises(PathRefused):
            safe_rest(bad)
    assert safe_rest("/v1/files/file-...abc") == "/v1/files/file-...abc"


# ----------------------------------------------------------------------------- the upstream's password

PW = "pw-s3cret-XYZ-0123456789"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_upstream_password_is_never_shown(tmp_path):
    assert mask_url(f"http://svc:{PW}@h/v1") == "http://svc:***@h/v1" and mask_url("http://h/v1") == "http://h/v1"
    store = tmp_path / "pw.sqlite"
    dead = f"http://svc:{PW}@127.0.0.1:{_closed_port()}/v1"
    with proxy(dead, store, answer=False, timeout_s=5) as px:
        health = httpx2.get(px.url + "/auto/health").text
        assert PW not in health and "svc:***@" in health
        for path, body in (("/chat/completions", b'{"model": "m", "messages": []}'), ("/models", None)):
            r = httpx2.request("POST" if body else "GET", px.base_url + path, content=body,
                               headers={"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"})
            assert r.status_code == 502 and PW not in r.text and "***" in r.text, r.text
        assert PW not in repr(px.proxy.config)
    with ScriptedUpstream("tickets") as up:
        live = up.base_url.replace("http://", f"http://svc:{PW}@")
        with proxy(live, store, answer=False) as px:
            assert httpx2.get(px.base_url + "/models").status_code == 200
            openai.OpenAI(base_url=px.base_url, api_key=KEY, max_retries=0).chat.completions.create(
                model="m-1", messages=ticket_messages(f"my password is {PW}"))
            px.proxy.recorder.flush()
    from conftest import store_blob

    raw = store_blob(store)
    assert raw and PW.encode() not in raw


def test_the_start_line_masks_the_upstream_password(tmp_path):
    port = _closed_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    p = subprocess.Popen([sys.executable, "-m", "auto.cli", "proxy", "--upstream", f"http://svc:{PW}@127.0.0.1:9/v1",
                          "--store", str(tmp_path / "s.sqlite"), "--port", str(port), "--record-only"],
                         stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env)
    try:
        line = ""
        deadline = time.time() + 60
        while time.time() < deadline and "auto proxy on" not in line:
            line = p.stderr.readline()
            if not line and p.poll() is not None:
                break
        assert "auto proxy on" in line and PW not in line and "svc:***@" in line, line
    finally:
        p.terminate()
        p.wait(timeout=60)
