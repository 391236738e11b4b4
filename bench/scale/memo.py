"""The memo compile at 25,600 → 102,400 table entries: wall time, artifact size, no crash.

For each size N, a store of 2N task spans (N distinct ~90-byte tickets, each witnessed twice with
the same label) and one compile on the memo rung (``rungs=["memo"]``: the exact-match table), then
a second compile of the same store (its rows are verified already: the incremental check reads
nothing new).

    python -m bench.scale.memo --sizes 25600,51200,102400
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

LABELS = ("billing", "bug", "feature", "account", "shipping", "security")


def build(path: str, n: int) -> None:
    from auto.store import Store, new_span_id, new_trace_id

    with Store(path) as st:
        batch = []
        for rep in range(2):
            for i in range(n):
                ns = 1_600_000_000_000_000_000 + (rep * n + i) * 1000
                batch.append({"trace_id": new_trace_id(), "span_id": new_span_id(), "parent_span_id": None,
                              "name": "memo", "kind": "task", "task": "memo", "site": None, "started_ns": ns,
                              "ended_ns": ns + 10, "status": "ok",
                              "input": {"ticket": f"Ticket {i:07d}: my order arrived damaged and I want a refund please"},
                              "output": LABELS[(i * 7) % len(LABELS)], "error": None, "attributes": {}})
                if len(batch) >= 10_000:
                    st.ingest(batch)
                    batch = []
        if batch:
            st.ingest(batch)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="25600,51200,102400")
    a = ap.parse_args(argv)
    from auto.compile import compile_task
    from auto.errors import GateRefused
    from auto.store import Store

    rows = []
    for n in (int(x) for x in a.sizes.split(",")):
        d = tempfile.mkdtemp()
        path = os.path.join(d, "memo.sqlite")
        build(path, n)
        row: dict = {"entries": n, "load_before": round(os.getloadavg()[0], 2)}
        for label in ("first_compile", "second_compile"):
            with Store(path) as st:
                t0 = time.perf_counter()
                try:
                    o = compile_task(st, "memo", rungs=["memo"], out_path=os.path.join(d, f"{label}.wasm"))
                    row[label] = {"seconds": round(time.perf_counter() - t0, 2), "artifact_bytes": o.artifact_bytes,
                                  "timings_s": o.timings_s, "fuel_per_call": o.typed_manifest.fuel_per_call}
                except GateRefused as e:
                    row[label] = {"seconds": round(time.perf_counter() - t0, 2), "refused": e.reason}
        row["load_after"] = round(os.getloadavg()[0], 2)
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    print(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
