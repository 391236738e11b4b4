"""Tests for auto.store: schema, ingest atomicity, immutability, verify, concurrency, crash safety."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from auto.canonical import digest
from auto.errors import IngestError, IntegrityError, NotAStore, SchemaTooNew
from auto.store import SCHEMA_VERSION, Store, new_span_id, new_trace_id, span_digest

REPO = Path(__file__).resolve().parents[1]


def make_span(trace_id: str | None = None, **over) -> dict:
    s = {
        "trace_id": trace_id or new_trace_id(), "span_id": new_span_id(), "parent_span_id": None,
        "name": "triage", "kind": "task", "task": "triage", "site": None,
        "started_ns": time.time_ns(), "ended_ns": time.time_ns(), "status": "ok",
        "input": {"ticket": "refund please"}, "output": "billing", "error": None, "attributes": {"k": 1},
    }
    s.update(over)
    return s


def make_trace(span: dict) -> dict:
    return {"trace_id": span["trace_id"], "name": span["name"], "started_ns": span["started_ns"],
            "ended_ns": span["ended_ns"], "status": span["status"], "attributes": {}}


def count(path: Path, table: str) -> int:
    con = sqlite3.connect(path)
    try:
        return con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    finally:
        con.close()


def test_create_open_and_schema_version(tmp_path):
    p = tmp_path / "s.db"
    with Store(p) as st:
        assert st.schema_version == SCHEMA_VERSION
        assert st.spans() == [] and st.traces() == []
    with Store(p) as st:  # reopen
        assert st.schema_version == SCHEMA_VERSION
    con = sqlite3.connect(p)
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    con.close()


def test_not_sqlite_file_raises_not_a_store(tmp_path):
    p = tmp_path / "notes.txt"
    p.write_text("this is not a database\n" * 10)
    with pytest.raises(NotAStore, match="not an SQLite database"):
        Store(p)
    assert p.read_text().startswith("this is not")  # untouched


def test_foreign_sqlite_db_raises_not_a_store(tmp_path):
    p = tmp_path / "other.db"
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE customers (id INTEGER)")
    con.commit()
    con.close()
    with pytest.raises(NotAStore, match="not an Auto store"):
        Store(p)


def test_newer_schema_raises_schema_too_new(tmp_path):
    p = tmp_path / "s.db"
    Store(p).close()
    con = sqlite3.connect(p)
    con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION + 1)])
    con.commit()
    con.close()
    with pytest.raises(SchemaTooNew, match="schema version"):
        Store(p)


def test_ingest_roundtrip_and_digest(tmp_path):
    with Store(tmp_path / "s.db") as st:
        s = make_span()
        res = st.ingest([s], [make_trace(s)])
        assert res == {"spans": 1, "traces": 1, "unchanged": 0}
        (got,) = st.spans()
        assert got["input"] == {"ticket": "refund please"} and got["output"] == "billing"
        assert got["digest"] == span_digest(s)
        (w,) = st.witnesses("triage")
        assert w.input == {"ticket": "refund please"} and w.output == "billing" and w.status == "ok"
        assert w.trace_id == s["trace_id"] and w.span_id == s["span_id"]
        assert st.spans(trace_id=s["trace_id"])[0]["span_id"] == s["span_id"]
        assert st.spans(task="other") == []
        assert st.tasks() == {"triage": 1}


def test_failing_batch_leaves_nothing(tmp_path):
    p = tmp_path / "s.db"
    with Store(p) as st:
        good1, good2 = make_span(), make_span()
        bad = make_span(kind="banana")
        with pytest.raises(IngestError, match="kind"):
            st.ingest([good1, good2, bad], [make_trace(good1)])
        assert st.spans() == [] and st.traces() == []
        # a conflict with an existing row, discovered inside the transaction, also rolls back
        st.ingest([good1])
        changed = dict(good1, output="bug")
        with pytest.raises(IngestError, match="immutable"):
            st.ingest([good2, changed], [make_trace(good2)])
        assert [s["span_id"] for s in st.spans()] == [good1["span_id"]]
        assert st.traces() == []
        # not canonical JSON (NaN) is rejected before anything is written
        with pytest.raises(IngestError):
            st.ingest([good2, make_span(output=float("nan"))])
        assert len(st.spans()) == 1


def test_immutable_insert_only(tmp_path):
    p = tmp_path / "s.db"
    with Store(p) as st:
        s = make_span()
        st.ingest([s])
        assert st.ingest([s]) == {"spans": 0, "traces": 0, "unchanged": 1}  # same content: no-op
        with pytest.raises(IngestError, match="different content"):
            st.ingest([dict(s, status="error")])
    con = sqlite3.connect(p)
    with pytest.raises(sqlite3.DatabaseError, match="immutable"):
        con.execute("UPDATE spans SET status = 'error'")
    with pytest.raises(sqlite3.DatabaseError, match="immutable"):
        con.execute("DELETE FROM spans")
    con.close()


def test_verify_catches_tampered_row(tmp_path):
    p = tmp_path / "s.db"
    with Store(p) as st:
        spans = [make_span() for _ in range(3)]
        st.ingest(spans, [make_trace(s) for s in spans])
        st.put_eval_run({"task": "triage", "verdict": "pass", "n": 3})
        st.put_artifact(b"\0asm-bytes", {"task": "triage"}, "triage", 1)
        rep = st.verify()
        assert rep.ok and rep.spans == 3 and rep.traces == 3 and rep.eval_runs == 1 and rep.artifacts == 1
        rep.raise_for_mismatch()  # no-op
    con = sqlite3.connect(p)
    con.execute("DROP TRIGGER spans_no_update")
    con.execute("UPDATE spans SET status = 'error' WHERE span_id = ?", [spans[1]["span_id"]])
    con.commit()
    con.close()
    with Store(p) as st:
        rep = st.verify()
        assert not rep.ok
        # the edited row, and the dropped immutability trigger
        assert [m["id"] for m in rep.mismatches] == [spans[1]["span_id"], "*"]
        assert "spans_no_update" in rep.mismatches[1]["stored"]
        with pytest.raises(IntegrityError):
            rep.raise_for_mismatch()


def test_verify_catches_deleted_rows(tmp_path):
    p = tmp_path / "s.db"
    with Store(p) as st:
        spans = [make_span() for _ in range(4)]
        st.ingest(spans, [make_trace(s) for s in spans])
        assert st.verify().ok
    con = sqlite3.connect(p)
    for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
        con.execute(f"DROP TRIGGER {name}")
    con.execute("DELETE FROM spans WHERE span_id = ?", [spans[2]["span_id"]])
    con.commit()
    con.close()
    with Store(p) as st:
        rep = st.verify()
        assert not rep.ok
        assert any(m["table"] == "spans" and "4 rows ingested" in m["stored"] and "3 rows present" in m["derived"]
                   for m in rep.mismatches)


def test_eval_runs_and_artifacts(tmp_path):
    with Store(tmp_path / "s.db") as st:
        rec = {"task": "triage", "verdict": "pass", "parity": 0.97}
        rid = st.put_eval_run(rec)
        assert rid == digest(rec) and st.put_eval_run(rec) == rid
        assert st.get_eval_run(rid) == rec and st.get_eval_run("sha256:nope") is None
        a1 = st.put_artifact(b"gen1", {"generation": 1}, "triage", 1)
        a2 = st.put_artifact(b"gen2", {"generation": 2}, "triage", 2)
        assert a1.startswith("sha256:") and a1 != a2
        assert st.get_artifact(a1).wasm == b"gen1"
        latest = st.latest_artifact("triage")
        assert latest.id == a2 and latest.manifest == {"generation": 2} and latest.generation == 2
        assert st.latest_artifact("other") is None


def test_eval_runs_and_ratchet_events_are_typed(tmp_path):
    from auto.store import EventKind, RatchetEvent, StoredEvalRun

    with Store(tmp_path / "s.db") as st:
        rid = st.put_eval_run({"task": "triage", "verdict": "refuse", "n": 3})
        (run,) = st.eval_runs("triage")
        assert isinstance(run, StoredEvalRun) and run.id == rid and run.verdict == "refuse"
        assert run.task == "triage" and run.record == {"task": "triage", "verdict": "refuse", "n": 3}
        aid = st.put_artifact(b"gen1", {}, "triage", 1)
        st.add_ratchet_event("triage", EventKind.INSTALL, generation=1, artifact_id=aid, detail={"parent": None})
        st.add_ratchet_event("triage", "rollback", generation=1, detail={"to": None})
        install, rollback = st.ratchet_events("triage")
        assert isinstance(install, RatchetEvent) and install.kind is EventKind.INSTALL
        assert (install.generation, install.artifact_id, install.detail) == (1, aid, {"parent": None})
        assert rollback.kind is EventKind.ROLLBACK and rollback.id > install.id
        assert st.installed_generation("triage") is None
        with pytest.raises(IngestError, match="ratchet event kind 'deploy' is not one of"):
            st.add_ratchet_event("triage", "deploy")
        assert len(st.ratchet_events("triage")) == 2


def test_every_read_takes_the_read_barrier(tmp_path):
    """A recorder's writer registers its flush as a read barrier: every read, artifacts
    included, must call it first (or it reads what the process recorded only after a flush)."""
    calls = []
    with Store(tmp_path / "s.db") as st:
        s = make_span()
        st.ingest([s], [make_trace(s)])
        rid = st.put_eval_run({"task": "triage", "verdict": "pass"})
        aid = st.put_artifact(b"gen1", {}, "triage", 1)
        st.add_read_barrier(lambda: calls.append(1))
        reads = {
            "artifacts": lambda: st.artifacts(), "get_artifact": lambda: st.get_artifact(aid),
            "latest_artifact": lambda: st.latest_artifact("triage"), "eval_runs": lambda: st.eval_runs(),
            "get_eval_run": lambda: st.get_eval_run(rid), "ratchet_events": lambda: st.ratchet_events("triage"),
            "installed_generation": lambda: st.installed_generation("triage"), "spans": lambda: st.spans(),
            "traces": lambda: st.traces(), "witnesses": lambda: st.witnesses("triage"),
            "task_witnesses": lambda: st.task_witnesses("triage"), "tasks": lambda: st.tasks(),
            "census_site_rows": lambda: st.census_site_rows(), "digest": lambda: st.digest(),
        }
        missed = []
        for name, read in reads.items():
            before = len(calls)
            read()
            if len(calls) == before:
                missed.append(name)
        assert missed == []


def test_store_digest_independent_of_insert_order(tmp_path):
    spans = [make_span(started_ns=1000 + i) for i in range(5)]
    with Store(tmp_path / "a.db") as a, Store(tmp_path / "b.db") as b:
        a.ingest(spans)
        for s in reversed(spans):
            b.ingest([s])
        assert a.digest() == b.digest() == digest([span_digest(s) for s in spans])
        assert a.digest(task="triage") == a.digest()


def test_add_witness(tmp_path):
    with Store(tmp_path / "s.db") as st:
        sid = st.add_witness("triage", {"ticket": "x"}, "bug", attributes={"auto.source": "deopt"})
        (w,) = st.witnesses("triage")
        assert w.span_id == sid and w.output == "bug" and w.attributes["auto.source"] == "deopt"
        st.add_witness("triage", {"ticket": "y"}, None, status="error", error={"type": "X", "message": "m"})
        assert len(st.witnesses("triage")) == 1
        assert len(st.witnesses("triage", include_errors=True)) == 2
        assert len(st.traces()) == 2 and st.verify().ok


def _writer(path: str, n: int, tag: int) -> None:
    st = Store(path)
    tid = new_trace_id()
    for i in range(n):
        st.ingest([make_span(trace_id=tid, input={"ticket": f"p{tag}-{i}"})])
    st.close()


def test_two_processes_writing_concurrently_lose_nothing(tmp_path):
    p = str(tmp_path / "s.db")
    Store(p).close()
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(p, 150, k)) for k in range(3)]
    for pr in procs:
        pr.start()
    for pr in procs:
        pr.join(60)
        assert pr.exitcode == 0
    with Store(p) as st:
        inputs = {w.input["ticket"] for w in st.witnesses("triage")}
        assert len(inputs) == 450
        assert st.verify().ok


KILL_SCRIPT = textwrap.dedent("""
    import sys, time
    import auto
    from auto.record.core import active_recorder
    @auto.task("step")
    def step(i: int) -> int:
        if i == 5:
            assert active_recorder().wait_durable(30)  # the spans that ended are journaled
            print("hanging", flush=True)
            time.sleep(60)          # killed in here: this span never ends
        return i * 2
    with auto.recording(sys.argv[1]):
        for i in range(10):
            step(i)
""")


def test_killed_process_keeps_completed_spans(tmp_path):
    p = tmp_path / "s.db"
    script = tmp_path / "agent.py"
    script.write_text(KILL_SCRIPT)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, str(script), str(p)], stdout=subprocess.PIPE, env=env, text=True)
    try:
        line = proc.stdout.readline()
        assert line.strip() == "hanging"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    with Store(p) as st:
        ws = st.witnesses("step")
        assert sorted(w.input["i"] for w in ws) == [0, 1, 2, 3, 4]
        assert [w.output for w in sorted(ws, key=lambda w: w.input["i"])] == [0, 2, 4, 6, 8]
        assert len(st.traces()) == 5
        assert st.verify().ok


def test_add_witness_from_capture_record(tmp_path):
    with Store(tmp_path / "s.db") as st:
        st.add_witness({"task": "triage", "input": {"ticket": "t"}, "output": "bug", "reason": "novelty",
                        "artifact_id": "sha256:ab", "generation": 2, "latency_us": 812.5})
        (w,) = st.witnesses("triage")
        assert w.output == "bug"
        assert w.attributes["auto.source"] == "capture"
        assert w.attributes["auto.capture.reason"] == "novelty" and w.attributes["auto.capture.generation"] == 2
        with pytest.raises(IngestError):
            st.add_witness({"task": "triage"})
