"""The illegal memory access of the end-to-end runs, reproduced in isolation (needs a CUDA GPU).

    python -m bench.kernel_tuning.workspace_repro --out DIR [--file workspace_repro.json]

Each variant runs in its own process (an illegal memory access ends the CUDA context):

1. graph A captures the eager step's GEMMs (``F.linear``, cuBLAS; M = 1 and 8 at Qwen3-1.7B's
   shapes), replays once, and is deleted (its private memory pool dies);
2. graph B captures the same GEMMs and replays once (checked against an fp32 reference);
3. the cuBLAS workspaces are cleared and the allocator's cache emptied, either by what the e2e
   run did (``trees``: a ``torch.compile(mode="reduce-overhead")`` function records its CUDA-graph
   tree, which clears them, then another graph is captured, whose ``torch.cuda.graph`` entry empties
   the cache) or directly (``manual``: ``torch._C._cuda_clearCublasWorkspaces()`` +
   ``torch.cuda.empty_cache()``);
4. B's output is NaN-poisoned and B replays again: ``ok`` when every output is written and within
   the bf16 tolerance (rel err ≤ 1e-2) of the reference, else the error (an illegal memory access
   expected where B baked in A's workspace).

``shared`` captures as this package did before (``graphs.capture_step(own_workspace=False)``),
``own`` with the workspaces cleared around each capture (the fix). Writes ``DIR/<file>``:
``{"schema", "env", "variants": {name: {"ok", "error", "rel_err", "reserved_mib", "wall_s", "rc"}}}``.
Exit 0 when every variant reported (whatever its outcome), 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

SCHEMA = "auto.kt.workspace_repro.v1"
VARIANTS = ("shared_trees", "own_trees", "shared_manual", "own_manual")
# (M, N, K): Qwen3-1.7B's o_proj, gate_up, down and lm_head at batch 1 and 8 (decoder.CONFIGS)
SHAPES = ((1, 2048, 2048), (1, 12288, 2048), (1, 2048, 6144), (1, 151936, 2048),
          (8, 2048, 2048), (8, 12288, 2048), (8, 2048, 6144), (8, 151936, 2048))


def child(variant: str) -> dict[str, Any]:
    """One variant in this process; returns its row (never raises for a CUDA error)."""
    import gc

    import torch
    import torch.nn.functional as F

    from .graphs import capture_step

    own = variant.startswith("own")
    t0 = time.time()
    row: dict[str, Any] = {"variant": variant, "own_workspace": own, "clear": variant.split("_", 1)[1],
                           "ok": False, "error": None, "rel_err": None, "reserved_mib": {}}

    def mib(tag: str) -> None:
        row["reserved_mib"][tag] = round(torch.cuda.memory_reserved() / 2**20, 1)

    try:
        g = torch.Generator(device="cuda")
        g.manual_seed(5)
        xs = {m: torch.randn(m, max(k for _, _, k in SHAPES), device="cuda", generator=g, dtype=torch.bfloat16)
              for m in (1, 8)}
        ws = {(n, k): torch.randn(n, k, device="cuda", generator=g, dtype=torch.bfloat16) * k ** -0.5
              for _, n, k in SHAPES}
        refs = [xs[m][:, :k].float() @ ws[(n, k)].float().T for m, n, k in SHAPES]

        def forward():
            return [F.linear(xs[m][:, :k], ws[(n, k)]) for m, n, k in SHAPES]

        def check(outs) -> float:
            errs = []
            for o, r in zip(outs, refs):
                if not bool(torch.isfinite(o).all()):
                    return float("inf")
                errs.append(float(torch.linalg.vector_norm(o.float() - r) / torch.linalg.vector_norm(r)))
            return max(errs)

        mib("start")
        ga, oa = capture_step(forward, own_workspace=own)
        ga.replay()
        torch.cuda.synchronize()
        row["rel_err_a"] = check(oa)
        del ga, oa
        gc.collect()
        mib("a_deleted")
        gb, ob = capture_step(forward, own_workspace=own)
        gb.replay()
        torch.cuda.synchronize()
        row["rel_err_b_first"] = check(ob)
        mib("b_captured")
        if row["clear"] == "trees":
            f = torch.compile(lambda a, b: F.linear(a, b) * 2.0, mode="reduce-overhead")
            for _ in range(3):  # warm-up, record, replay
                f(xs[8][:, :2048], ws[(2048, 2048)])
            torch.cuda.synchronize()
            mib("tree_recorded")
            y = torch.ones(4, device="cuda")
            gc_, _ = capture_step(lambda: y * 2.0, own_workspace=own)  # torch.cuda.graph's entry empties the cache
            del gc_
        else:
            torch._C._cuda_clearCublasWorkspaces()
            torch.cuda.empty_cache()
        mib("cleared")
        for o in ob:
            o.fill_(float("nan"))
        gb.replay()
        torch.cuda.synchronize()
        row["rel_err"] = check(ob)
        row["ok"] = bool(row["rel_err"] <= 1e-2)
        if not row["ok"]:
            row["error"] = f"output not written or wrong (rel err {row['rel_err']})"
    except Exception as e:  # the outcome being measured
        row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
    for k in [k for k in row if k.startswith("rel_err")]:
        if row[k] is not None and row[k] == float("inf"):
            row[k], row[k + "_unwritten"] = None, True  # a non-finite output (JSON has no inf)
    row["wall_s"] = round(time.time() - t0, 2)
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.kernel_tuning.workspace_repro")
    ap.add_argument("--out", default=None)
    ap.add_argument("--file", default="workspace_repro.json")
    ap.add_argument("--child", default=None, choices=VARIANTS, help=argparse.SUPPRESS)
    ap.add_argument("--timeout-s", type=float, default=150.0)
    args = ap.parse_args(argv)
    if args.child:
        print("ROW " + json.dumps(child(args.child)), flush=True)
        return 0
    if not args.out:
        print("error: --out DIR is required", file=sys.stderr)
        return 1
    os.makedirs(args.out, exist_ok=True)
    t0 = time.time()
    procs = {v: subprocess.Popen([sys.executable, "-m", "bench.kernel_tuning.workspace_repro", "--child", v],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for v in VARIANTS}
    rows: dict[str, Any] = {}
    for v, p in procs.items():
        try:
            out, _ = p.communicate(timeout=max(1.0, args.timeout_s - (time.time() - t0)))
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
        line = next((ln for ln in reversed(out.splitlines()) if ln.startswith("ROW ")), None)
        rows[v] = json.loads(line[4:]) if line else {"variant": v, "ok": False, "error": "no row: " + out[-300:]}
        rows[v]["rc"] = p.returncode
        print(f"[workspace_repro] {v:14s} ok={rows[v].get('ok')} rel_err={rows[v].get('rel_err')} "
              f"error={rows[v].get('error')} reserved_mib={rows[v].get('reserved_mib')}", flush=True)
    env: dict[str, Any] = {}
    try:
        import torch

        env = {"torch": torch.__version__, "cuda": torch.version.cuda,
               "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}
    except Exception as e:
        env = {"error": f"{type(e).__name__}: {e}"}
    res = {"schema": SCHEMA, "env": env, "shapes_mnk": [list(s) for s in SHAPES], "variants": rows,
           "wall_s": round(time.time() - t0, 2),
           "argv": ["$OUT" if a == args.out else a for a in (sys.argv[1:] if argv is None else argv)]}
    with open(os.path.join(args.out, args.file), "w") as f:
        json.dump(res, f, indent=1, sort_keys=True)
    return 0 if all("no row" not in str(r.get("error")) for r in rows.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
