"""``auto receive``: OTLP/HTTP ``POST /v1/traces`` (protobuf and JSON) into a store; nothing
acknowledged is lost, under 16 concurrent exporters or when the receiver is killed."""

from __future__ import annotations

import copy
import gzip
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from auto.interchange.receiver import ReceiverServer, status_bytes
from auto.sites import discover
from auto.store import Store

FIXTURES = Path(__file__).parent / "dialects"
AUTO = [sys.executable, "-m", "auto.cli"]
BASE = json.loads((FIXTURES / "otlp-openllmetry.json").read_text())  # json_format output: base64 ids
SPANS_PER_REQUEST = sum(len(ss["spans"]) for rs in BASE["resourceSpans"] for ss in rs["scopeSpans"])


def _request(n: int) -> dict:
    """The fixture with ids of its own (request ``n``): trace ``n``, spans ``n``-0 … ``n``-9."""
    import base64

    doc = copy.deepcopy(BASE)
    k = 0
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for sp in ss["spans"]:
                sp["traceId"] = base64.b64encode((n + 1).to_bytes(16, "big")).decode()
                sp["spanId"] = base64.b64encode(((n + 1) * 100 + k).to_bytes(8, "big")).decode()
                k += 1
    return doc


def _post(endpoint: str, doc: dict, how: str) -> int:
    if how == "json":
        data, ctype = json.dumps(doc).encode(), "application/json"
    else:
        data, ctype = json_format.ParseDict(doc, ExportTraceServiceRequest()).SerializeToString(), "application/x-protobuf"
    headers = {"Content-Type": ctype}
    if how == "gzip":
        data = gzip.compress(data)
        headers["Content-Encoding"] = "gzip"
    req = urllib.request.Request(endpoint + "/v1/traces", data=data, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_sixteen_concurrent_exporters_lose_nothing(tmp_path):
    per_exporter = 6
    codes: list[int] = []
    lock = threading.Lock()
    with ReceiverServer(Store(tmp_path / "r.db")) as rx:
        def exporter(e: int) -> None:
            for i in range(per_exporter):
                n = e * per_exporter + i
                c = _post(rx.endpoint, _request(n), ("protobuf", "json", "gzip")[n % 3])
                with lock:
                    codes.append(c)

        threads = [threading.Thread(target=exporter, args=(e,)) for e in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        counters = dict(rx.receiver.counters)
    assert codes == [200] * (16 * per_exporter)
    assert counters["requests"] == 16 * per_exporter and counters["skipped"] == 0
    with Store(tmp_path / "r.db") as st:
        assert st.counts()["spans"] == 16 * per_exporter * SPANS_PER_REQUEST
        assert st.counts()["traces"] == 16 * per_exporter
        assert st.verify().ok
        (sid,) = discover(st.spans(kind="llm")).sites  # the one ticket site, from every request
    assert not any(p.stat().st_size for p in (tmp_path / "r.db.journal").glob("*.journal"))


def test_bad_bodies_are_refused_and_nothing_is_kept(tmp_path):
    with ReceiverServer(Store(tmp_path / "r.db")) as rx:
        for data, ctype, code in ((b"\xff\x00garbage", "application/x-protobuf", 400), (b"{", "application/json", 400),
                                  (b"x", "text/plain", 415), (b'{"resourceSpans": ["x"]}', "application/json", 400),
                                  (b'{"resourceSpans": [{"scopeSpans": 5}]}', "application/json", 400)):
            req = urllib.request.Request(rx.endpoint + "/v1/traces", data=data, headers={"Content-Type": ctype})
            with pytest.raises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(req, timeout=30)
            assert e.value.code == code
        assert rx.receiver.counters["refused"] == 5
    with Store(tmp_path / "r.db") as st:
        assert st.counts()["spans"] == 0
    assert status_bytes(3, "é") == b"\x08\x03\x12\x02\xc3\xa9"  # google.rpc.Status{code: 3, message: "é"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_killed_receiver_loses_nothing_it_acknowledged(tmp_path):
    port = _free_port()
    store = tmp_path / "k.db"
    p = subprocess.Popen([*AUTO, "receive", "--store", str(store), "--port", str(port)], stderr=subprocess.PIPE,
                         text=True)
    try:
        assert "auto receive on http://127.0.0.1:" in p.stderr.readline()
        endpoint = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:  # the announce line comes just before uvicorn listens
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline
                time.sleep(0.05)
        assert [_post(endpoint, _request(n), "protobuf") for n in range(20)] == [200] * 20
    finally:
        os.kill(p.pid, signal.SIGKILL)  # at once: whatever the writer had not committed is only journaled
        p.wait(timeout=30)
    with Store(store) as st:
        assert st.counts()["spans"] == 20 * SPANS_PER_REQUEST


def test_a_taken_port_is_one_line_and_creates_no_store(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = str(s.getsockname()[1])
        for args in (["receive", "--store", str(tmp_path / "a.db"), "--port", port],
                     ["proxy", "--store", str(tmp_path / "b.db"), "--upstream", "http://127.0.0.1:9/v1", "--port", port]):
            p = subprocess.run([*AUTO, *args], capture_output=True, text=True, timeout=120)
            lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
            assert p.returncode == 1 and len(lines) == 1 and "cannot listen" in lines[0], p.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["receive", "proxy"])
def test_port_0_announces_the_port_it_listens_on(tmp_path, command):
    """``--port 0`` (any free port): the announced address is the one bound, and it answers."""
    import re

    args = (["receive", "--store", str(tmp_path / "a.db")] if command == "receive" else
            ["proxy", "--store", str(tmp_path / "b.db"), "--upstream", "http://127.0.0.1:9/v1"])
    proc = subprocess.Popen([*AUTO, *args, "--port", "0"], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    try:
        line = proc.stderr.readline()
        m = re.search(r"http://127\.0\.0\.1:(\d+)", line)
        assert m and m.group(1) != "0", line
        deadline = time.time() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{m.group(1)}/auto/health", timeout=5) as r:
                    assert json.loads(r.read())["ok"] is True
                break
            except urllib.error.URLError:
                assert time.time() < deadline, line
                time.sleep(0.1)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
