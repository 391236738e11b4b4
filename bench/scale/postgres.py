"""PostgreSQL: many processes recording at once into one store; nothing lost or duplicated, the
store verifies, and its census equals SQLite's on the same traces.

``--recorders`` processes each make ``--calls`` triage calls (the agent against the simulator, a
separate process on loopback; every ticket is made unique per process and call) inside
``auto.recording(DSN)``. Then: every (process, call) is present exactly once, ``verify()`` passes,
and the census of the PostgreSQL store equals the census of an SQLite store holding a copy of
the same spans.

    python -m bench.scale.postgres --dsn postgresql://auto:auto@127.0.0.1:55432/bench --recorders 16 --calls 1000
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time


def recorder(dsn: str, base_url: str, k: int, calls: int, q: "multiprocessing.Queue") -> None:
    os.environ["OPENAI_BASE_URL"] = base_url
    os.environ["OPENAI_API_KEY"] = "sk-bench-not-a-key"
    import auto
    from bench.triage import agent, corpus

    agent.reset_client()
    tickets = [t.ticket for t in corpus.default_corpus(seed=0)["train"]]
    t0 = time.perf_counter()
    with auto.recording(dsn) as rec:
        for i in range(calls):
            agent.triage(f"{tickets[i % len(tickets)]} [recorder {k} call {i}]")
    q.put({"k": k, "seconds": time.perf_counter() - t0, "write_errors": len(rec.write_errors)})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dsn", required=True, help="an empty PostgreSQL database (its schema is created)")
    ap.add_argument("--recorders", type=int, default=16)
    ap.add_argument("--calls", type=int, default=1000)
    a = ap.parse_args(argv)
    from auto.census import census_store
    from auto.store import Store

    sim = subprocess.Popen([sys.executable, "-m", "bench.sim", "--port", "0"], stdout=subprocess.PIPE, text=True)
    url = sim.stdout.readline().strip().rsplit(" ", 1)[-1]
    try:
        Store(a.dsn).close()
        ctx = multiprocessing.get_context("spawn")
        q = ctx.Queue()
        t0 = time.perf_counter()
        procs = [ctx.Process(target=recorder, args=(a.dsn, url, k, a.calls, q)) for k in range(a.recorders)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        wall = time.perf_counter() - t0
        per = [q.get() for _ in procs]
    finally:
        sim.terminate()
        sim.wait(10)
    with Store(a.dsn) as pg:
        ws = pg.witnesses("triage", include_errors=True)
        keys = [w.input["ticket"].rsplit("[", 1)[-1] for w in ws]
        t1 = time.perf_counter()
        rep = pg.verify()
        verify_s = time.perf_counter() - t1
        d = tempfile.mkdtemp()
        with Store(os.path.join(d, "copy.sqlite")) as lite:
            spans = pg.spans()
            for k in range(0, len(spans), 5000):
                lite.ingest(spans[k:k + 5000])
            lite.ingest([], pg.traces())
            same = census_store(pg, with_inputs=True).to_dict(True) == census_store(lite, with_inputs=True).to_dict(True)
            same_digest = pg.digest() == lite.digest()
        out = {"recorders": a.recorders, "calls_per_recorder": a.calls, "exit_codes": [p.exitcode for p in procs],
               "wall_s": round(wall, 1), "calls_per_s": round(a.recorders * a.calls / wall, 1),
               "write_errors": sum(r["write_errors"] for r in per),
               "task_spans": len(ws), "distinct_calls": len(set(keys)),
               "lost": a.recorders * a.calls - len(set(keys)), "duplicated": len(keys) - len(set(keys)),
               "spans": rep.spans, "traces": rep.traces, "verify_ok": rep.ok, "verify_s": round(verify_s, 1),
               "census_equals_sqlite": same, "store_digest_equals_sqlite": same_digest,
               "load": round(os.getloadavg()[0], 2)}
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
