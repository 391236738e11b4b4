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


def test_otlp_import_of_a_deep_document_is_one_line_and_writes_nothing(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    store = tmp_path / "s.sqlite"
    p = subprocess.run([sys.executable, "-m", "auto.cli", "store", "import", "--store", str(store), "--otlp", str(deep)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 1, p.stderr
    assert "Traceback" not in p.stderr and "deeper than" in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert not store.exists()


def test_receiver_refuses_a_deep_json_body_before_decoding_it():
    import pytest

    from auto.interchange.parquet import InterchangeError
    from auto.interchange.receiver import decode

    with pytest.raises(InterchangeError, match="deeper than"):
        decode(b'{"resourceSpans": ' + b"[" * 50_000 + b"]" * 50_000 + b"}", "application/json", "")
    assert decode(b'{"resourceSpans": []}', "application/json", "") == {"resourceSpans": []}
