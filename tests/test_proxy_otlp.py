"""``auto proxy``'s ``/v1/traces``: an OTLP/HTTP export sent to the proxy (a service whose
``OTEL_EXPORTER_OTLP_ENDPOINT`` points at it) is received into the store as ``auto receive``
receives it, and never forwarded upstream (span data may hold prompts)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

from auto.proxy import ProxyConfig, ProxyServer
from auto.sites import discover
from auto.store import Store

from test_receiver import SPANS_PER_REQUEST, _post, _request
from upstreams import ScriptedUpstream


def _proxy(upstream: str, store: Path) -> ProxyServer:
    return ProxyServer(ProxyConfig(upstream=upstream, store=str(store), port=0, rediscover_s=0.2,
                                   ratchet_options={"worker": "thread"}))


def test_traces_sent_to_the_proxy_land_in_the_store_and_never_reach_the_upstream(tmp_path):
    store = tmp_path / "p.db"
    with ScriptedUpstream("tickets") as up, _proxy(up.base_url, store) as px:
        endpoint = px.base_url.rsplit("/v1", 1)[0]  # what OTEL_EXPORTER_OTLP_ENDPOINT is set to
        codes = [_post(endpoint, _request(n), how) for n, how in enumerate(("protobuf", "json", "gzip"))]
        codes.append(_post(endpoint, _request(0), "json"))  # a trace seen before: spans only, no second trace row
        req = urllib.request.Request(endpoint + "/v1/traces", data=b"{", headers={"Content-Type": "application/json"})
        try:
            urllib.request.urlopen(req, timeout=30)
            bad = 200
        except urllib.error.HTTPError as e:
            bad = e.code
        try:
            urllib.request.urlopen(endpoint + "/v1/traces", timeout=30)
            get = 200
        except urllib.error.HTTPError as e:
            get = e.code
        assert px.proxy.recorder.flush()
        with urllib.request.urlopen(endpoint + "/auto/status", timeout=30) as r:
            otlp = json.loads(r.read()).get("otlp")
        seen = [r["path"] for r in up.requests]
    assert seen == []  # nothing of /v1/traces went upstream
    assert codes == [200, 200, 200, 200] and bad == 400 and get == 405
    assert otlp["requests"] == 4 and otlp["spans"] == 4 * SPANS_PER_REQUEST and otlp["refused"] == 1
    with Store(store) as st:
        assert st.counts()["traces"] == 3
        assert st.counts()["spans"] == 3 * SPANS_PER_REQUEST  # the repeat's spans are the same rows
        assert st.verify().ok
        (sid,) = discover(st.spans(kind="llm")).sites


def test_an_exporter_pointed_at_the_model_api_base_url_is_refused_never_forwarded(tmp_path):
    """``OTEL_EXPORTER_OTLP_ENDPOINT=http://proxy/v1`` (the model API's base URL) makes the
    exporter post to ``/v1/v1/traces``: that was forwarded upstream, prompts included."""
    with ScriptedUpstream("tickets") as up, _proxy(up.base_url, tmp_path / "p.db") as px:
        base = px.base_url.rsplit("/v1", 1)[0]
        answers = []
        for path in ("/v1/v1/traces", "/v1/otlp/traces"):
            req = urllib.request.Request(base + path, data=json.dumps(_request(0)).encode(),
                                         headers={"Content-Type": "application/json"})
            try:
                urllib.request.urlopen(req, timeout=30)
                answers.append((200, ""))
            except urllib.error.HTTPError as e:
                answers.append((e.code, json.loads(e.read())["error"]["message"]))
        seen = [r["path"] for r in up.requests]
    assert seen == []
    assert [code for code, _ in answers] == [404, 404]
    assert all("OTEL_EXPORTER_OTLP_ENDPOINT" in msg and "/v1/traces" in msg for _, msg in answers)


def test_a_proxy_killed_after_acknowledging_spans_loses_none_of_them(tmp_path):
    import re
    import signal
    import subprocess
    import sys
    import time

    store = tmp_path / "k.db"
    p = subprocess.Popen([sys.executable, "-m", "auto.cli", "proxy", "--store", str(store), "--upstream",
                          "http://127.0.0.1:9/v1", "--port", "0"], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                         text=True)
    try:
        m = re.search(r"http://127\.0\.0\.1:(\d+)", p.stderr.readline())
        assert m
        endpoint = f"http://127.0.0.1:{m.group(1)}"
        deadline = time.time() + 30
        while True:
            try:
                urllib.request.urlopen(endpoint + "/auto/health", timeout=5).close()
                break
            except urllib.error.URLError:
                assert time.time() < deadline
                time.sleep(0.1)
        assert [_post(endpoint, _request(n), "protobuf") for n in range(20)] == [200] * 20
    finally:
        p.send_signal(signal.SIGKILL)  # at once: what the writer had not committed is only journaled
        p.wait(timeout=30)
    deadline = time.time() + 60
    while True:  # (the writer process, in its own session, finishes what it was given)
        with Store(store) as st:  # opening replays the journal
            n = st.counts()["spans"]
        if n == 20 * SPANS_PER_REQUEST or time.time() > deadline:
            break
        time.sleep(0.5)
    assert n == 20 * SPANS_PER_REQUEST
