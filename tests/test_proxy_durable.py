"""``auto proxy`` killed with -9 under load: every call it answered has its span (journaled before
the answer was sent, replayed by the next open of the store)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

from auto.store import Store

from upstreams import ScriptedUpstream


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _answered_then_kill(store: str, upstream: str, clients: int = 8, kill_after: int = 240) -> set[str]:
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, "-m", "auto.cli", "proxy", "--upstream", upstream, "--store", store,
                             "--port", str(port), "--record-only"], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            text=True, env=env)
    deadline = time.time() + 60
    line = ""
    while time.time() < deadline and "auto proxy on" not in line:
        line = proc.stderr.readline()
    assert "auto proxy on" in line, line
    answered: set[str] = set()
    lock = threading.Lock()
    stop = threading.Event()

    def client(k: int) -> None:
        i = 0
        while not stop.is_set():
            tag = f"call-{k}-{i}"
            i += 1
            body = json.dumps({"model": "m", "messages": [{"role": "user", "content": tag}], "stream": i % 3 == 0}).encode()
            req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", data=body,
                                         headers={"Content-Type": "application/json", "Authorization": "Bearer k-0123456789"})
            try:
                with urllib.request.urlopen(req, timeout=10) as r:
                    data = r.read()
                    if r.status == 200 and (b"[DONE]" in data if i % 3 == 0 else b"choices" in data):
                        with lock:
                            answered.add(tag)
            except OSError:
                if stop.is_set():
                    return
                time.sleep(0.01)

    threads = [threading.Thread(target=client, args=(k,), daemon=True) for k in range(clients)]
    for t in threads:
        t.start()
    while time.time() < deadline + 60:
        with lock:
            if len(answered) >= kill_after:
                break
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)  # mid-load: requests in flight
    proc.wait(30)
    stop.set()
    for t in threads:
        t.join(30)
    return answered


def test_kill_9_under_load_loses_no_answered_call(tmp_path):
    store = str(tmp_path / "k.sqlite")
    with ScriptedUpstream("echo-headers") as up:
        answered = _answered_then_kill(store, up.base_url)
    assert len(answered) >= 240
    time.sleep(1.0)  # the orphaned writer process ends once it read its pipe
    with Store(store) as st:  # opening it replays the killed proxy's journal
        recorded = set()
        for sp in st.spans(kind="llm"):
            for m in (sp["input"] or {}).get("messages") or []:
                recorded.add(m.get("content"))
        assert st.verify().ok
    missing = sorted(answered - recorded)
    assert missing == [], f"{len(missing)} of {len(answered)} answered calls have no span: {missing[:5]}"


def test_the_proxy_recorder_writes_the_lists_a_complete_fills(tmp_path):
    # a model-call attempt hands over an empty span list that its complete fills (on the sender
    # thread): the proxy's recorder queues the lists as they are, so the span is written
    import time as _time

    from auto.proxy.recording import QueuedRecorder
    from auto.store import new_span_id, new_trace_id

    rec = QueuedRecorder(str(tmp_path / "q.sqlite"))
    spans: list[dict] = []
    sid, tid = new_span_id(), new_trace_id()

    def complete() -> None:
        now = _time.time_ns()
        spans.append({"trace_id": tid, "span_id": sid, "parent_span_id": None, "name": "t", "kind": "task",
                      "task": "t", "site": None, "started_ns": now, "ended_ns": now, "status": "ok",
                      "input": {}, "output": "y", "error": None, "attributes": {}})

    rec.write(spans, [], complete)
    assert rec.flush(30)
    rec.close()
    with Store(str(tmp_path / "q.sqlite")) as st:
        assert [s["span_id"] for s in st.spans()] == [sid]


def test_the_writer_child_does_not_import_modules_from_the_working_directory(tmp_path, monkeypatch):
    """``python -m`` puts the working directory first on ``sys.path``: a ``secrets.py`` there (a
    standard-library name) ran inside the writer child. It is started with ``-P`` now."""
    from auto.proxy import ProxyConfig, ProxyServer
    from upstreams import ScriptedUpstream

    (tmp_path / "secrets.py").write_text("open('IMPORTED', 'w').write('x')\nfrom os import urandom as token_bytes\n")
    monkeypatch.chdir(tmp_path)
    with ScriptedUpstream("tickets") as up, ProxyServer(ProxyConfig(upstream=up.base_url, store=str(tmp_path / "p.db"),
                                                                    port=0)) as px:
        assert px.proxy.recorder.flush()
    assert not (tmp_path / "IMPORTED").exists()
