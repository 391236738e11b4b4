"""``auto compile --all`` over many tasks and model-call sites: 2 Ray workers vs 1, and both
against a serial run (bytes).

Builds a store of ``--tasks`` tasks (each 60 distinct inputs witnessed twice, labels decided by a
keyword: a program or a specialist compiles each in about a second) and ``--sites`` model-call
sites (recorded ``chat.completions`` calls, no task spans: each site its own model and system
prompt, 60 distinct tickets asked twice, the answer decided by a keyword), then compiles every
task and site (:func:`auto.distributed.compilable_tasks`, the census's sites) on three copies of
it: serially without Ray (``workers=0``), on a local Ray cluster of 1 CPU and of 2 CPUs. Wall
times include starting and stopping the local cluster. Checks that the three runs produced the
same artifacts (ids = sha-256 of the bytes).

    python -m bench.scale.fanout --tasks 25 --sites 25 [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections import Counter

LABELS = ("billing", "bug", "feature")


def site_call(site: int, i: int, rep: int) -> dict:
    """One recorded chat completion of model-call site ``site`` on ticket ``i`` (asked twice:
    ``rep`` 0 and 1), answered by the keyword the ticket is about."""
    from auto.store import new_span_id, new_trace_id

    word = LABELS[(i + site) % 3]
    ns = 1_700_000_000_000_000_000 + (site * 1000 + rep * 100 + i) * 1000
    body = {"model": f"model-{site:03d}", "temperature": 0,
            "messages": [{"role": "system", "content": f"You are support desk {site}. Answer with one word: "
                                                       f"{', '.join(LABELS)}."},
                         {"role": "user", "content": f"Ticket {i} for desk {site}: this is about {word}, "
                                                     f"reference {i * 7 % 13}"}]}
    out = {"content": word, "tool_calls": None, "refusal": None, "finish_reason": "stop"}
    return {"trace_id": new_trace_id(), "span_id": new_span_id(), "parent_span_id": None, "name": "chat.completions",
            "kind": "llm", "task": None, "site": None, "started_ns": ns, "ended_ns": ns + 10, "status": "ok",
            "input": body, "output": out, "error": None, "attributes": {"gen_ai.request.model": body["model"]}}


def build(path: str, tasks: int, inputs: int = 60, sites: int = 0) -> None:
    from auto.store import Store, new_span_id, new_trace_id

    with Store(path) as st:
        spans = [site_call(k, i, rep) for k in range(sites) for rep in range(2) for i in range(inputs)]
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


def _run(base: str, d: str, name: str, workers: int) -> tuple[dict, list]:
    """One ``compile_all`` of a fresh copy of ``base``: wall time, verdicts, per-unit compile
    seconds, when results arrived (the first one follows the cluster's start and the workers'
    imports; after the last one the cluster stops) and the load average around it."""
    from auto.distributed import compile_all

    work = os.path.join(d, f"{name}.sqlite")
    shutil.copyfile(base, work)
    arrived: list[float] = []
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    res = compile_all(work, out_dir=os.path.join(d, name), workers=workers,
                      progress=lambda _r: arrived.append(time.perf_counter()))
    el = time.perf_counter() - t0
    per = {"site": [r["seconds"] for r in res if r["task"].startswith("site:") and "seconds" in r],
           "task": [r["seconds"] for r in res if not r["task"].startswith("site:") and "seconds" in r]}
    run = {"workers": workers, "seconds": round(el, 1),
           "verdicts": {v: sum(1 for r in res if r["verdict"] == v) for v in ("pass", "refuse", "error")},
           "compiled_as": dict(sorted(Counter(r.get("compiled_as") for r in res).items(), key=str)),
           "unit_seconds": {k: {"sum": round(sum(v), 1), "max": round(max(v), 2)} for k, v in per.items() if v},
           "first_result_s": round(arrived[0] - t0, 1) if arrived else None,
           "results_span_s": round(arrived[-1] - arrived[0], 1) if arrived else None,
           "after_last_result_s": round(t0 + el - arrived[-1], 1) if arrived else None,
           "load_before": round(load0, 2), "load_after": round(os.getloadavg()[0], 2)}
    shutil.rmtree(os.path.join(d, name), ignore_errors=True)
    os.remove(work)
    return run, [r.get("artifact_id") for r in res]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=25)
    ap.add_argument("--sites", type=int, default=25)
    ap.add_argument("--rounds", type=int, default=1, help="1-worker / 2-worker pairs, interleaved")
    ap.add_argument("--skip-serial", action="store_true")
    a = ap.parse_args(argv)
    from auto.distributed import compilable_tasks
    from auto.store import Store

    d = tempfile.mkdtemp()
    base = os.path.join(d, "base.sqlite")
    build(base, a.tasks, sites=a.sites)
    with Store(base) as st:
        units = compilable_tasks(st)
    out: dict = {"tasks": a.tasks, "sites": a.sites, "units": len(units),
                 "site_units": sum(1 for u in units if u.startswith("site:")), "cpus": os.cpu_count(), "runs": []}
    plan = ([] if a.skip_serial else [("serial", 0)]) + [(n, w) for _ in range(a.rounds)
                                                          for n, w in (("ray_1_worker", 1), ("ray_2_workers", 2))]
    ids = []
    for name, workers in plan:
        run, got = _run(base, d, name, workers)
        out["runs"].append({"run": name, **run})
        ids.append(got)
        print(json.dumps(out["runs"][-1]), file=sys.stderr, flush=True)
    out["same_artifacts"] = all(v == ids[0] for v in ids)
    ones = [r["seconds"] for r in out["runs"] if r["workers"] == 1]
    twos = [r["seconds"] for r in out["runs"] if r["workers"] == 2]
    out["speedup_2_over_1"] = [round(x / y, 2) for x, y in zip(ones, twos)]
    shutil.rmtree(d, ignore_errors=True)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
