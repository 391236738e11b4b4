"""Bad input gets one line and the right status: deeply nested JSON (``auto run --input``,
``auto proxy``), a lone surrogate (stored and read back, not lost)."""

from __future__ import annotations

import subprocess
import sys

import httpx2

from auto.jsonlimits import MAX_JSON_DEPTH
from auto.proxy import ProxyConfig, ProxyServer
from auto.store import Store, new_span_id, new_trace_id

from site_fixtures import compiled_site
from upstreams import ScriptedUpstream


def test_auto_run_deep_input_is_one_usage_line(tmp_path):
    _, _, out = compiled_site(tmp_path)
    for text in ("[" * 5000 + "]" * 5000, '{"ticket": ' + "[" * 100_000, '{"a":' * 3000):
        p = subprocess.run([sys.executable, "-m", "auto.cli", "run", str(out.artifact_path), "--input", text],
                           capture_output=True, text=True, timeout=120)
        lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
        assert p.returncode == 2 and len(lines) == 1 and "Traceback" not in p.stderr, p.stderr[-500:]
        assert f"deeper than {MAX_JSON_DEPTH}" in lines[0]


def test_proxy_deep_model_call_is_400_in_one_line_and_not_forwarded(tmp_path):
    with ScriptedUpstream("tickets") as up, ProxyServer(ProxyConfig(upstream=up.base_url, store=str(tmp_path / "d.sqlite"),
                                                                     port=0, answer=False)) as px:
        body = b'{"model": "m", "messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
        r = httpx2.post(px.base_url + "/chat/completions", content=body, headers={"Content-Type": "application/json"})
        assert r.status_code == 400 and len(r.text.splitlines()) == 1 and "deeper than" in r.json()["error"]["message"]
        assert up.requests == []
        ok = httpx2.post(px.base_url + "/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        assert ok.status_code == 200


def test_a_lone_surrogate_is_stored_not_lost(tmp_path):
    span = {"trace_id": new_trace_id(), "span_id": new_span_id(), "name": "x", "kind": "task", "task": "t",
            "started_ns": 1, "ended_ns": 2, "status": "ok", "input": {"a": "bad \ud800 text"}, "output": "o\udfff"}
    with Store(tmp_path / "s.sqlite") as st:
        st.ingest([span])
        (row,) = st.spans()
        assert row["input"] == {"a": "bad \ud800 text"} and row["output"] == "o\udfff"
        assert st.verify().ok
