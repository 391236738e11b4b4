"""The PostgreSQL store: the same API, schema, immutability, digests and census as SQLite; many
processes recording at once; a server that goes away mid-recording."""

from __future__ import annotations

import multiprocessing
import os
import socket
import threading
import time

import pytest

from auto.census import census_store
from auto.errors import IngestError, StoreError
from auto.store import SCHEMA_VERSION, Store, new_span_id, new_trace_id
from auto.store import postgres as pgmod


def make_span(trace_id=None, **over) -> dict:
    s = {"trace_id": trace_id or new_trace_id(), "span_id": new_span_id(), "parent_span_id": None,
         "name": "triage", "kind": "task", "task": "triage", "site": None, "started_ns": time.time_ns(),
         "ended_ns": time.time_ns(), "status": "ok", "input": {"ticket": "refund please"}, "output": "billing",
         "error": None, "attributes": {"k": 1}}
    s.update(over)
    return s


def test_same_api_digests_and_immutability(pg_dsn, tmp_path):
    import psycopg

    spans = [make_span(input={"ticket": f"t{i % 4}"}, output=["bug", "billing"][i % 2], started_ns=1000 + i)
             for i in range(12)]
    with Store(pg_dsn) as pg, Store(tmp_path / "s.db") as lite:
        assert pg.schema_version == SCHEMA_VERSION and pg.dialect == "postgresql"
        assert "auto:auto@" not in pg.location and "auto@" in pg.location  # password removed
        for st in (pg, lite):
            assert st.ingest(spans) == {"spans": 12, "traces": 0, "unchanged": 0}
            assert st.ingest(spans[:3])["unchanged"] == 3
            with pytest.raises(IngestError, match="immutable"):
                st.ingest([dict(spans[0], status="error")])
        assert pg.spans() == lite.spans() and pg.digest() == lite.digest() and pg.digest("triage") == lite.digest("triage")
        assert [w.span_id for w in pg.witnesses("triage")] == [w.span_id for w in lite.witnesses("triage")]
        assert pg.tasks() == {"triage": 12} and pg.has_task("triage") and not pg.has_task("nope")
        assert census_store(pg, with_inputs=True).to_dict(True) == census_store(lite, with_inputs=True).to_dict(True)
        rid = pg.put_eval_run({"task": "triage", "verdict": "pass"})
        assert pg.get_eval_run(rid) == {"task": "triage", "verdict": "pass"}
        aid = pg.put_artifact(b"\0asm", {"generation": 1}, "triage", 1)
        assert pg.latest_artifact("triage").id == aid and pg.get_artifact(aid).wasm == b"\0asm"
        e1 = pg.add_ratchet_event("triage", "install", generation=1, artifact_id=aid, detail={"parent": None})
        assert pg.installed_generation("triage") == (1, aid)
        assert pg.add_ratchet_event("triage", "rollback", detail={"to": None}) > e1
        assert pg.installed_generation("triage") is None
        rep = pg.verify()
        assert rep.ok and rep.spans == 12 and rep.eval_runs == 1 and rep.artifacts == 1, rep.mismatches
        inc = pg.verify(task="triage", incremental=True)
        assert inc.ok and inc.spans == 12 and pg.verify(task="triage", incremental=True).spans == 0
        checked, lite_ws = pg.task_witnesses("triage", verify=True), lite.task_witnesses("triage", verify=True)
        assert [w.digest for w in checked[0]] == [w.digest for w in lite_ws[0]] and checked[1] == lite_ws[1]
    with psycopg.connect(pg_dsn, autocommit=True) as c:
        with pytest.raises(psycopg.Error, match="immutable"):
            c.execute("UPDATE spans SET status = 'error'")
        with pytest.raises(psycopg.Error, match="immutable"):
            c.execute("DELETE FROM payloads")
        c.execute("ALTER TABLE spans DISABLE TRIGGER spans_no_update")
        c.execute("UPDATE spans SET status = 'error' WHERE span_id = %s", [spans[5]["span_id"]])
    with Store(pg_dsn) as pg:
        rep = pg.verify()
        assert not rep.ok and {m["id"] for m in rep.mismatches} == {spans[5]["span_id"], "*"}


def test_compile_on_postgresql_emits_the_same_artifact_as_on_sqlite(pg_dsn, triage_store, tmp_path):
    from auto.compile import compile_task

    with Store(triage_store) as lite, Store(pg_dsn) as pg:
        spans = lite.spans()
        for k in range(0, len(spans), 500):
            pg.ingest(spans[k:k + 500])
        pg.ingest([], lite.traces())
        assert census_store(pg).to_dict() == census_store(lite).to_dict()
        a = compile_task(pg, "triage", out_path=tmp_path / "pg.wasm")
        b = compile_task(lite, "triage", out_path=tmp_path / "lite.wasm", generation=a.generation)
        assert a.artifact_id == b.artifact_id
        ws = pg.witness_set(a.manifest["provenance"]["witness_set"]["digest"])
        assert len(ws) == a.manifest["provenance"]["witnesses"] == 800


def _recorder(dsn: str, tag: int, n: int) -> None:
    import auto

    @auto.task("step")
    def step(i: int, tag: int) -> int:
        return i * 2

    with auto.recording(dsn) as rec:
        for i in range(n):
            step(i, tag)
    assert not rec.write_errors, rec.write_errors


def test_many_processes_record_at_once_and_lose_nothing(pg_dsn):
    Store(pg_dsn).close()
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_recorder, args=(pg_dsn, k, 60)) for k in range(8)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(180)
        assert p.exitcode == 0
    with Store(pg_dsn) as st:
        ws = st.witnesses("step")
        keys = [(w.input["tag"], w.input["i"]) for w in ws]
        assert len(keys) == len(set(keys)) == 8 * 60
        rep = st.verify()
        assert rep.ok and rep.spans == 480 and rep.traces == 480


def test_a_server_that_cannot_be_reached_is_one_clear_error():
    with pytest.raises(StoreError, match="cannot connect to the PostgreSQL store postgresql://auto@127.0.0.1:1/"):
        Store("postgresql://auto:secret@127.0.0.1:1/auto")


class _Proxy:
    """A loopback TCP proxy to the test server whose connections can be cut (a server restart
    as the client sees it)."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.open = threading.Event()
        self.open.set()
        self.conns: list[socket.socket] = []
        self.lock = threading.Lock()
        self.stop = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stop:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            if not self.open.is_set():
                c.close()
                continue
            u = socket.create_connection(self.target)
            with self.lock:
                self.conns += [c, u]
            for a, b in ((c, u), (u, c)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def cut(self, seconds: float) -> None:
        self.open.clear()
        with self.lock:
            for s in self.conns:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self.conns = []
        time.sleep(seconds)
        self.open.set()

    def close(self) -> None:
        self.stop = True
        self.sock.close()


def test_a_server_restart_mid_recording_loses_nothing_and_doubles_nothing(pg_dsn):
    from urllib.parse import urlsplit

    u = urlsplit(pg_dsn)
    proxy = _Proxy(u.hostname, u.port)
    try:
        dsn = pg_dsn.replace(f"{u.hostname}:{u.port}", f"127.0.0.1:{proxy.port}")
        st = Store(dsn)
        tid = new_trace_id()
        sent = []
        cut = threading.Thread(target=lambda: (time.sleep(0.3), proxy.cut(1.5)))
        cut.start()
        t0 = time.time()
        while time.time() - t0 < 3.0:
            s = make_span(trace_id=tid, input={"ticket": f"n{len(sent)}"})
            st.ingest([s])  # retried on a new connection while the server is away
            sent.append(s["span_id"])
        cut.join()
        st.close()
        with Store(pg_dsn) as direct:
            got = [s["span_id"] for s in direct.spans()]
            assert sorted(got) == sorted(sent) and len(got) == len(set(got))
            assert direct.verify().ok
    finally:
        proxy.close()


def test_a_server_gone_past_the_retry_deadline_is_one_clear_error(pg_dsn, monkeypatch):
    from urllib.parse import urlsplit

    u = urlsplit(pg_dsn)
    proxy = _Proxy(u.hostname, u.port)
    try:
        st = Store(pg_dsn.replace(f"{u.hostname}:{u.port}", f"127.0.0.1:{proxy.port}"))
        monkeypatch.setattr(pgmod, "RETRY_DEADLINE_S", 0.5)
        threading.Thread(target=proxy.cut, args=(3.0,), daemon=True).start()
        time.sleep(0.1)
        with pytest.raises(StoreError, match="unreachable.*nothing of this write was kept"):
            st.ingest([make_span()])
        st.close()
        with Store(pg_dsn) as direct:
            assert direct.spans() == []
    finally:
        proxy.close()


def test_the_ratchet_serves_and_restarts_on_a_postgresql_store(pg_dsn):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from test_ratchet import Counting, drive, stream

    from auto.ratchet import CompilePolicy, Ratchet

    def make(ref):
        return Ratchet(ref, pg_dsn, "triage", worker="process", audit_rate=0.2, programs=False,
                       policy=CompilePolicy(first_at=45, min_new=15, growth=0.3))

    r = make(Counting())
    res = drive(r, stream(120))
    gen, aid = r.generation, r.status()["artifact_id"]
    assert gen is not None and [x.tier for x in res][-20:].count("tier-1") >= 10
    r.close()
    ref = Counting()
    r2 = make(ref)
    assert r2.generation == gen and r2.status()["artifact_id"] == aid  # restart from the log in PostgreSQL
    assert r2.call_result(stream(120)[5]).tier == "tier-1" and ref.calls == 0
    r2.close()
    with Store(pg_dsn) as st:
        assert st.installed_generation("triage") == (gen, aid) and st.verify().ok


def test_the_cli_takes_a_postgresql_uri_wherever_it_takes_a_store(pg_dsn, tmp_path):
    import json
    import subprocess
    import sys

    def auto(*args, code=0):
        p = subprocess.run([sys.executable, "-m", "auto.cli", *args], capture_output=True, text=True)
        assert p.returncode == code, p.stderr
        return p

    agent = tmp_path / "agent.py"
    agent.write_text("import auto\n@auto.task('double')\ndef double(x: int) -> int:\n    return 2 * x\n"
                     "for i in range(30):\n    double(i % 10)\n")
    auto("record", "--store", pg_dsn, "--", sys.executable, str(agent))
    census = json.loads(auto("census", "--store", pg_dsn, "--json").stdout)
    assert census["spans"] == 30 and census["deterministic_spans"] == 30
    info = json.loads(auto("store", "info", "--store", pg_dsn).stdout)
    assert info["tasks"] == {"double": 30} and info["schema_version"] == SCHEMA_VERSION
    assert "verified" in auto("store", "verify", "--store", pg_dsn).stderr
    out = tmp_path / "pq"
    auto("store", "export", "--store", pg_dsn, "--format", "parquet", "--out", str(out))
    assert json.loads(auto("census", "--parquet", str(out), "--json").stdout) == census
    bad = auto("census", "--store", "postgresql://auto:pw@127.0.0.1:1/none", code=1)
    assert bad.stderr.count("\n") == 1 and "cannot connect" in bad.stderr and "pw" not in bad.stderr
