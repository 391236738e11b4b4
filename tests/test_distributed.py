"""`auto compile --all`: every task compiled, on Ray workers, the same bytes as serially; a worker
that dies is retried or reported."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from auto.distributed import artifact_name, compile_all, run_jobs
from auto.store import Store, new_span_id, new_trace_id

LABELS = ("billing", "bug", "feature")


def _store(path: Path, tasks: int = 3, inputs: int = 60) -> None:
    with Store(path) as st:
        spans = []
        for t in range(tasks):
            for rep in range(2):
                for i in range(inputs):
                    word = LABELS[(i + t) % 3]
                    spans.append({"trace_id": new_trace_id(), "span_id": new_span_id(), "parent_span_id": None,
                                  "name": f"task{t}", "kind": "task", "task": f"task{t}", "site": None,
                                  "started_ns": 10_000 * t + 100 * i + rep, "ended_ns": 10_000 * t + 100 * i + rep,
                                  "status": "ok", "input": {"text": f"case {i} is about {word} number {i * 7 % 13}"},
                                  "output": word, "error": None, "attributes": {}})
        st.ingest(spans)


def test_serial_compile_all_reports_every_task(tmp_path):
    _store(tmp_path / "s.db")
    res = compile_all(str(tmp_path / "s.db"), out_dir=tmp_path / "out", workers=0)
    assert [r["task"] for r in res] == ["task0", "task1", "task2"]
    assert all(r["verdict"] == "pass" for r in res), res
    for r in res:
        assert Path(r["artifact_path"]).name == artifact_name(r["task"], 1)
    p = subprocess.run([sys.executable, "-m", "auto.cli", "compile", "--store", str(tmp_path / "s.db"), "--all",
                        "--workers", "0", "--out-dir", str(tmp_path / "cli")], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert [r["generation"] for r in json.loads(p.stdout)] == [2, 2, 2]
    bad = subprocess.run([sys.executable, "-m", "auto.cli", "compile", "--store", str(tmp_path / "s.db"), "--all",
                          "--task", "task0"], capture_output=True, text=True)
    assert bad.returncode == 2 and "--all" in bad.stderr


def test_compile_all_compiles_model_call_sites_too(tmp_path):
    from site_fixtures import label_of, site_words, ticket_call

    from auto.distributed import compilable_tasks

    _store(tmp_path / "s.db")
    with Store(tmp_path / "s.db") as st:
        st.ingest([ticket_call(w, label_of(w)) for w in site_words() for _ in range(2)])
        names = compilable_tasks(st)
    sites = [n for n in names if n.startswith("site:")]
    assert len(sites) == 1 and {"task0", "task1", "task2"} <= set(names)
    res = compile_all(str(tmp_path / "s.db"), out_dir=tmp_path / "out", workers=0)
    assert [r["task"] for r in res] == sorted(names)
    (site,) = [r for r in res if r["task"] == sites[0]]
    assert site["verdict"] == "pass", site
    assert Path(site["artifact_path"]).name == artifact_name(sites[0], 1)


ray = pytest.importorskip("ray", reason="auto[distributed] (Ray) is not installed")


def test_two_ray_workers_give_the_bytes_of_a_serial_run(tmp_path):
    _store(tmp_path / "a.db")
    shutil.copy(tmp_path / "a.db", tmp_path / "b.db")
    serial = compile_all(str(tmp_path / "a.db"), out_dir=tmp_path / "serial", workers=0)
    par = compile_all(str(tmp_path / "b.db"), out_dir=tmp_path / "ray", workers=2)
    assert [r["verdict"] for r in par] == ["pass"] * 3, par
    assert [r["artifact_id"] for r in par] == [r["artifact_id"] for r in serial]
    for a, b in zip(serial, par):
        assert Path(a["artifact_path"]).read_bytes() == Path(b["artifact_path"]).read_bytes()
    assert len({r["pid"] for r in par} - {os.getpid()}) >= 1  # compiled in worker processes


def test_a_worker_that_dies_is_retried_and_one_that_keeps_dying_is_reported(tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir()

    def flaky(job: dict) -> dict:
        mark = Path(job["marks"]) / job["task"]
        if job["task"] == "always" or not mark.exists():
            mark.touch()
            os._exit(1)  # the worker process dies mid-job
        return {"task": job["task"], "verdict": "pass", "pid": os.getpid()}

    jobs = [{"task": t, "marks": str(marks)} for t in ("once-a", "always", "once-b")]
    t0 = time.time()
    res = run_jobs(flaky, jobs, workers=2, retries=1, name=lambda j: j["task"])
    assert [r["task"] for r in res] == ["once-a", "always", "once-b"]
    assert [r["verdict"] for r in res] == ["pass", "error", "pass"]
    assert "after 1 retry" in res[1]["reason"]
    assert time.time() - t0 < 120
