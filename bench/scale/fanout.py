"""``auto compile --all`` over many tasks: 2 Ray workers vs 1, and both against a serial run (bytes).

Builds a store of ``--tasks`` tasks (each 60 distinct inputs witnessed twice, labels decided by a
keyword: a program or a specialist compiles each in about a second), then compiles every task on
three copies of it: serially without Ray (``workers=0``), on a local Ray cluster of 1 CPU and of 2
CPUs. Wall times include starting and stopping the local cluster. Checks that the three runs
produced the same artifacts (ids = sha-256 of the bytes).

    python -m bench.scale.fanout --tasks 50
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

LABELS = ("billing", "bug", "feature")


def build(path: str, tasks: int, inputs: int = 60) -> None:
    from auto.store import Store, new_span_id, new_trace_id

    with Store(path) as st:
        spans = []
        for t in range(tasks):
            for rep in range(2):
                for i in range(inputs):
                    word = LABELS[(i + t) % 3]
                    ns = 1_600_000_000_000_000_000 + (t * 1000 + rep * 100 + i) * 1000
                    spans.append({"trace_id": new_trace_id(), "span_id": new_span_id(), "parent_span_id": None,
                                  "name": f"task{t:03d}", "kind": "task", "task": f"task{t:03d}", "site": None,
                                  "started_ns": ns, "ended_ns": ns + 10, "status": "ok",
                                  "input": {"text": f"case {i} of task {t} is about {word}, reference {i * 7 % 13}"},
                                  "output": word, "error": None, "attributes": {}})
        st.ingest(spans)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=50)
    ap.add_argument("--skip-serial", action="store_true")
    a = ap.parse_args(argv)
    from auto.distributed import compile_all

    d = tempfile.mkdtemp()
    base = os.path.join(d, "base.sqlite")
    build(base, a.tasks)
    out: dict = {"tasks": a.tasks, "cpus": os.cpu_count(), "runs": {}}
    ids = {}
    for name, workers in (("serial", 0), ("ray_1_worker", 1), ("ray_2_workers", 2)):
        if name == "serial" and a.skip_serial:
            continue
        work = os.path.join(d, f"{name}.sqlite")
        shutil.copyfile(base, work)
        load0 = os.getloadavg()[0]
        t0 = time.perf_counter()
        res = compile_all(work, out_dir=os.path.join(d, name), workers=workers)
        el = time.perf_counter() - t0
        ids[name] = [r.get("artifact_id") for r in res]
        out["runs"][name] = {"seconds": round(el, 1), "verdicts": {v: sum(1 for r in res if r["verdict"] == v)
                                                                   for v in ("pass", "refuse", "error")},
                             "load_before": round(load0, 2), "load_after": round(os.getloadavg()[0], 2)}
        print(json.dumps({name: out["runs"][name]}), file=sys.stderr, flush=True)
    first = next(iter(ids.values()))
    out["same_artifacts"] = all(v == first for v in ids.values())
    out["speedup_2_over_1"] = round(out["runs"]["ray_1_worker"]["seconds"] / out["runs"]["ray_2_workers"]["seconds"], 2)
    shutil.rmtree(d, ignore_errors=True)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
