"""The official ``opentelemetry-instrumentation-openai-v2`` and LiteLLM, live and replayed.

The replay tests post the export requests the SDK's OTLP/HTTP exporter really sent
(``tests/dialects/live-openai-v2/*.pb``, package versions in its README) to ``auto receive`` and
to ``auto proxy``'s ``/v1/traces``; they need nothing beyond Auto's own dependencies. The live
test at the end runs the instrumented ``openai`` client and LiteLLM (``tests/dialects/
live_agent.py``) with the interpreter named by ``AUTO_DIALECT_PYTHON`` and is skipped without it.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from auto.census import census_store
from auto.compile import compile_task
from auto.interchange.otlp import MODEL_CALL_SPAN, prepare, doc_spans
from auto.interchange.receiver import ReceiverServer, decode
from auto.proxy import ProxyConfig, ProxyServer
from auto.sites import Site, discover
from auto.store import TIER1_SPAN, Store

from site_fixtures import chat_span

DIALECTS = Path(__file__).parent / "dialects"
LIVE = DIALECTS / "live-openai-v2"
sys.path.insert(0, str(DIALECTS))
import make_fixtures  # noqa: E402  (the loopback upstream the payloads were recorded against)

PROTOBUF = "application/x-protobuf"


def _bodies(client: str = "openai") -> list[dict]:
    return json.loads((DIALECTS / "requests.json").read_text())[client]["tickets"]


def _proxy_site() -> str:
    """The site ``auto proxy`` finds for the ten ticket calls as the ``openai`` client sends them."""
    spans = []
    for b in _bodies():
        s = chat_span(b["messages"], "x")
        s["input"] = b
        spans.append(s)
    (sid,) = discover(spans).sites
    return sid


def _post(endpoint: str, data: bytes, ctype: str = PROTOBUF, path: str = "/v1/traces") -> tuple[int, bytes]:
    req = urllib.request.Request(endpoint + path, data=data, headers={"Content-Type": ctype})
    with urllib.request.urlopen(req, timeout=60) as r:
        return r.status, r.read()


def _llm_census(st: Store) -> list:
    return [s for s in census_store(st).sites if s.kind == "llm"]


def test_the_payloads_hold_nothing_of_the_machine_that_made_them():
    for f in LIVE.glob("*.pb"):
        raw = f.read_bytes()
        assert not re.search(rb"/(tmp|home|root|work|Users)/", raw), f.name
        doc = decode(raw, PROTOBUF, "")
        keys = {a["key"] for rs in doc["resourceSpans"] for a in rs["resource"]["attributes"]}
        assert keys == {"telemetry.sdk.language", "telemetry.sdk.name", "telemetry.sdk.version", "service.instance.id",
                        "service.name"}, f.name  # no host.* or process.* resource attributes


def test_the_exported_spans_land_on_the_proxy_s_site_and_compile(tmp_path):
    """``content.pb`` posted as the exporter posted it: 20 spans, the proxy's site, a memo that
    answers the same tickets as LangChain and LiteLLM write them."""
    with ReceiverServer(Store(tmp_path / "rx.db")) as rx:
        assert _post(rx.endpoint, (LIVE / "content.pb").read_bytes())[0] == 200
        counters = dict(rx.receiver.counters)
    assert counters["spans"] == 20 and counters["skipped"] == 0 and counters["without_messages"] == 0
    with Store(tmp_path / "rx.db") as st:
        llm = st.spans(kind="llm")
        assert {s["name"] for s in llm} == {MODEL_CALL_SPAN}
        assert {s["attributes"]["auto.otlp.span_name"] for s in llm} == {"chat gpt-4o-mini"}
        (row,) = _llm_census(st)
        assert row.site == _proxy_site() and row.distinct_inputs == 10 and row.spans == 20
        out = compile_task(st, row.site, rungs=["memo"], out_path=tmp_path / "site.wasm")
    from auto_runtime import Artifact

    art = Artifact.load(out.wasm)
    site = Site.from_manifest(out.manifest["site"])
    for client in ("openai", "langchain", "litellm"):
        got = [art.call(site.extract(b))["answer"] for b in _bodies(client)]
        want = ["billing" if any(w in b["messages"][-1]["content"] for w in make_fixtures.BILLING) else "bug"
                for b in _bodies(client)]
        assert got == want, client


def test_spans_without_content_are_no_witnesses_and_say_so_in_one_line(tmp_path, capsys):
    """Without ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` the spans carry no messages:
    they used to be kept as ten calls of one empty request, which the census then called one input
    answered the same way ten times (10 of 10 spans witnessed-deterministic)."""
    with ReceiverServer(Store(tmp_path / "rx.db")) as rx:
        assert _post(rx.endpoint, (LIVE / "no-content.pb").read_bytes())[0] == 200
        counters = dict(rx.receiver.counters)
    (line,) = [ln for ln in capsys.readouterr().err.splitlines() if "message content" in ln]
    assert "cannot become a witness" in line and "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY" in line
    assert counters["without_messages"] == 10 and counters["spans"] == 0
    with Store(tmp_path / "rx.db") as st:
        assert st.counts()["spans"] == 0
        assert census_store(st).sites == []
    f = tmp_path / "bare.json"  # the same spans as an OTLP/JSON file: nothing to import, exit 1, one line
    f.write_text(json.dumps(decode((LIVE / "no-content.pb").read_bytes(), PROTOBUF, "")))
    p = subprocess.run([sys.executable, "-m", "auto.cli", "store", "import", "--store", str(tmp_path / "i.db"),
                        "--otlp", str(f)], capture_output=True, text=True)
    assert p.returncode == 1 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "10 model-call span(s) carry no message content" in p.stderr and "cannot become a witness" in p.stderr
    assert not (tmp_path / "i.db").exists()


def test_tier1_answers_seen_by_the_instrumentation_are_not_witnesses():
    """``through-proxy.pb``: the client's spans of calls the proxy forwarded (16) and of calls it
    answered at tier-1 (4, fingerprint ``auto-overlay``), which must never be the model's evidence."""
    raw = decode((LIVE / "through-proxy.pb").read_bytes(), PROTOBUF, "")
    batch = prepare(list(doc_spans(raw, "through-proxy.pb")), "through-proxy.pb")
    names = [s["name"] for s in batch.spans]
    assert names.count(MODEL_CALL_SPAN) == 16 and names.count(TIER1_SPAN) == 4
    (sid,) = discover(batch.spans).sites
    assert sid == _proxy_site()


def _proxy(upstream: str, store: Path, answer: bool = True) -> ProxyServer:
    return ProxyServer(ProxyConfig(upstream=upstream, store=str(store), port=0, answer=answer, rediscover_s=0.2,
                                   ratchet_options={"worker": "thread"}))


def test_a_call_the_proxy_forwarded_is_one_witness_when_its_span_is_exported_to_the_proxy_too(tmp_path):
    """A service calling through ``auto proxy`` with its exporter pointed at the proxy: each call
    is recorded by the proxy and again by the instrumentation (same ``gen_ai.response.id``). The
    second view is counted, not written. Before, each input asked once read as witnessed twice
    (the live run: 10 of 10 inputs 'witnessed-deterministic' after one round)."""
    up = make_fixtures.Upstream()  # answers chatcmpl-1, -2, … as when the payload was recorded
    store = tmp_path / "p.db"
    try:
        with _proxy(up.base_url, store, answer=False) as px:
            for _ in range(2):
                for b in _bodies():
                    _post(px.base_url, json.dumps(b).encode(), "application/json", "/chat/completions")
            endpoint = px.base_url.rsplit("/v1", 1)[0]
            assert _post(endpoint, (LIVE / "content.pb").read_bytes())[0] == 200
            assert px.proxy.recorder.flush()
            counters = dict(px.proxy.otlp.counters)
    finally:
        up.server.shutdown()
    assert len(up.bodies) == 20
    with Store(store) as st:
        assert st.counts()["spans"] == 20  # the proxy's own, one per upstream call (40 before)
        (row,) = _llm_census(st)
        assert row.site == _proxy_site() and row.spans == 20 and row.distinct_inputs == 10
    assert counters["already_recorded"] == 20 and counters["spans"] == 0


# ----------------------------------------------------------------------------- live

AGENT_PY = os.environ.get("AUTO_DIALECT_PYTHON")


def _has(py: str, module: str) -> bool:
    return subprocess.run([py, "-c", f"import {module}"], capture_output=True).returncode == 0


live = pytest.mark.skipif(not AGENT_PY or not _has(AGENT_PY, "opentelemetry.instrumentation.openai_v2"),
                          reason="AUTO_DIALECT_PYTHON names no interpreter with opentelemetry-instrumentation-openai-v2")


def _agent(*args: str) -> dict:
    p = subprocess.run([AGENT_PY, str(DIALECTS / "live_agent.py"), *args], capture_output=True, text=True,
                       timeout=300, env={**os.environ, "PYTHONPATH": ""})
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def _serve(*args: str) -> tuple[subprocess.Popen, str]:
    """``auto receive`` / ``auto proxy`` on a free port: the process and its base (``http://host:port``)."""
    p = subprocess.Popen([sys.executable, "-m", "auto.cli", *args, "--port", "0"], stderr=subprocess.PIPE,
                         stdout=subprocess.DEVNULL, text=True)
    m = re.search(r"http://127\.0\.0\.1:(\d+)", p.stderr.readline())
    assert m
    base = f"http://127.0.0.1:{m.group(1)}"
    deadline = time.time() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", int(m.group(1))), timeout=1).close()
            return p, base
        except OSError:
            assert time.time() < deadline
            time.sleep(0.1)


def _stop(p: subprocess.Popen) -> None:
    p.terminate()
    p.wait(timeout=60)


@live
def test_live_instrumented_openai_and_litellm_get_tier1_answers(tmp_path):
    up = make_fixtures.Upstream()
    try:
        rx, base = _serve("receive", "--store", str(tmp_path / "rx.db"))
        try:
            got = _agent("--base-url", up.base_url, "--otlp", base, "--capture", str(tmp_path / "cap"), "--rounds", "2")
        finally:
            _stop(rx)
        assert len(up.bodies) == 20 and got["versions"]["opentelemetry-instrumentation-openai-v2"]
        with Store(tmp_path / "rx.db") as st:
            (row,) = _llm_census(st)
            assert row.site == _proxy_site() and row.spans == 20
            compile_task(st, row.site, rungs=["memo"], out_path=tmp_path / "site.wasm")
        px, base = _serve("proxy", "--store", str(tmp_path / "rx.db"), "--upstream", up.base_url,
                          "--client-key", "sk-fixture-not-a-key")
        try:
            deadline = time.time() + 60  # the proxy adopts the compiled generation on its discovery thread
            while True:
                with urllib.request.urlopen(base + "/auto/status", timeout=30) as r:
                    if json.loads(r.read())["sites"] or time.time() > deadline:
                        break
                time.sleep(0.2)
            asked = len(up.bodies)
            for client in ("openai", "litellm"):
                if client == "litellm" and not _has(AGENT_PY, "litellm"):
                    continue
                out = _agent("--client", client, "--base-url", base + "/v1")
                assert out["tiers"] == ["1"] * 10, (client, out["tiers"])
                assert out["answers"] == got["answers"][:10], client
            assert len(up.bodies) == asked  # nothing went upstream
        finally:
            _stop(px)
    finally:
        up.server.shutdown()


@live
def test_live_export_to_the_proxy_and_litellm_through_it_give_one_site_one_witness_per_call(tmp_path):
    """The instrumented ``openai`` client through ``auto proxy --record-only`` with its exporter
    pointed at the proxy, then LiteLLM through it: one site (the ``openai`` client's), each
    upstream call one span."""
    up = make_fixtures.Upstream()
    try:
        px, base = _serve("proxy", "--record-only", "--store", str(tmp_path / "p.db"), "--upstream", up.base_url)
        try:
            _agent("--base-url", base + "/v1", "--otlp", base)
            if _has(AGENT_PY, "litellm"):
                _agent("--client", "litellm", "--base-url", base + "/v1")
            with urllib.request.urlopen(base + "/auto/status", timeout=30) as r:
                otlp = json.loads(r.read())["otlp"]
        finally:
            _stop(px)
        assert otlp["already_recorded"] == 10 and otlp["spans"] == 0
        with Store(tmp_path / "p.db") as st:
            (row,) = _llm_census(st)
            assert row.site == _proxy_site() and row.spans == len(up.bodies) and row.distinct_inputs == 10
    finally:
        up.server.shutdown()
