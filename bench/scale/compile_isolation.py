"""A task's compile in a store that also holds many other spans vs in a store holding only the task.

The task: the triage corpus's 400 training tickets answered with their labels, witnessed twice
(800 task spans). Store A holds only them; store B is a copy of a large store (e.g. 1M spans from
``bench.scale.make_store``) with the same 800 spans added. Each round compiles the task once in a
fresh copy of each (so every compile is a first compile: it verifies the task's rows), A and B
alternating, and reports the wall time of :func:`auto.compile.compile_task` (same artifact bytes
in both: checked).

    python -m bench.scale.compile_isolation --big /path/s1m.sqlite --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time


def task_spans(seed: int = 0) -> list[dict]:
    from auto.store import new_span_id, new_trace_id
    from bench.triage import corpus

    out = []
    for rep in range(2):
        for i, t in enumerate(corpus.default_corpus(seed=seed)["train"]):
            ns = 1_600_000_000_000_000_000 + (rep * 1000 + i) * 1_000_000
            out.append({"trace_id": new_trace_id(), "span_id": new_span_id(), "parent_span_id": None, "name": "triage",
                        "kind": "task", "task": "triage", "site": None, "started_ns": ns, "ended_ns": ns + 1000,
                        "status": "ok", "input": {"ticket": t.ticket}, "output": t.category, "error": None,
                        "attributes": {"auto.source": "bench.scale"}})
    return out


def copy_store(src: str, dst: str) -> None:
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(src + suffix):
            shutil.copyfile(src + suffix, dst + suffix)


def compile_once(path: str, out: str) -> tuple[float, str]:
    from auto.compile import compile_task
    from auto.store import Store

    with Store(path) as st:
        t0 = time.perf_counter()
        o = compile_task(st, "triage", out_path=out)
        return time.perf_counter() - t0, o.artifact_id


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--big", required=True, help="a large store (its spans are the 'other' spans)")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args(argv)
    from auto.store import Store

    tmp = tempfile.mkdtemp(dir=os.path.dirname(os.path.abspath(a.big)))
    spans = task_spans()
    alone, big = os.path.join(tmp, "alone.sqlite"), os.path.join(tmp, "big.sqlite")
    with Store(alone) as st:
        st.ingest(spans)
    copy_store(a.big, big)
    with Store(big) as st:
        st.ingest(spans)
        other = st.counts()["spans"] - len(spans)
    times: dict[str, list[float]] = {"alone": [], "big": []}
    ids = set()
    try:
        for r in range(a.rounds):
            for name, src in (("alone", alone), ("big", big)):
                work = os.path.join(tmp, f"{name}.run.sqlite")
                copy_store(src, work)
                el, aid = compile_once(work, os.path.join(tmp, f"{name}.wasm"))
                times[name].append(round(el, 3))
                ids.add(aid)
                for suffix in ("", "-wal", "-shm"):
                    if os.path.exists(work + suffix):
                        os.remove(work + suffix)
        res = {"witnesses": len(spans), "other_spans": other, "rounds": a.rounds, "seconds": times,
               "median_alone_s": statistics.median(times["alone"]), "median_big_s": statistics.median(times["big"]),
               "same_artifact": len(ids) == 1, "load": round(os.getloadavg()[0], 2)}
        res["ratio_big_over_alone"] = round(res["median_big_s"] / res["median_alone_s"], 3)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
