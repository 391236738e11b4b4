"""Offline (no GPU) compile check of the candidate kernels for sm_90 with Triton's own compiler.

    python -m bench.kernel_tuning.aot_check [--corpus seen|holdout] [--limit N] [--jobs J] [--out FILE]

For every distinct (kernel, constexprs, specialization) the plans of a corpus would launch, it
compiles to PTX/cubin for ``cuda:90`` (mirroring the JIT's specialization: 16-byte aligned
pointers, ints divisible by 16 marked, ints equal to 1 folded, ``do_not_specialize`` honoured),
then runs the bundled ``ptxas -v`` to read registers and spill bytes. Reports the shared memory
Triton allocated next to the legality formula, compile errors, and compile seconds. Needs triton
(a CPU-only install is enough); torch is not needed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from typing import Any

from . import advisor as A
from . import legality as L
from .workloads import Workload, corpus


def _int_sig(v: int, dns: bool) -> tuple[str, Any]:
    """(signature type, specialization): ('constexpr', 1) for 1, ('i32', 'D') if %16==0."""
    if dns:
        return "i32", None
    if v == 1:
        return "constexpr", 1
    return "i32", ("D" if v % 16 == 0 else None)


def variants_for(w: Workload, fam: str, cfg: dict[str, int]) -> list[dict[str, Any]]:
    """Kernel launches (name, args, constexprs, warps, stages) a candidate makes on ``w``."""
    m, n, k = w.m, w.n, w.k
    e = {"bf16": "bf16", "fp32": "fp32", "fp16": "fp16"}[w.dtype]
    out = []
    if fam in ("gemv_splitn", "gemv_splitk", "tc_gemm", "tc_gemm_splitk"):
        sk = cfg["SPLIT_K"]
        per = L.cdiv(L.cdiv(k, cfg["BLOCK_K"]), sk)
        yt = e if sk == 1 else "fp32"
        ints = [("M", m, True), ("N", n, False), ("K", k, False), ("stride_xm", k, False), ("stride_wn", k, False),
                ("stride_ym", n, False), ("stride_ys", 0 if sk == 1 else m * n, False), ("PER", per, True)]
        ptrs = [("x_ptr", e), ("w_ptr", e), ("y_ptr", yt)]
        cx = {kk: cfg[kk] for kk in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "SPLIT_K")}
        if fam.startswith("tc"):
            cx["GROUP_M"] = cfg["GROUP_M"]
        out.append({"kernel": "gemv_kernel" if fam.startswith("gemv") else "tc_gemm_kernel", "ptrs": ptrs,
                    "ints": ints, "floats": [], "constexprs": cx, "num_warps": cfg["num_warps"],
                    "num_stages": cfg["num_stages"]})
        if sk > 1:
            out.append({"kernel": "splitk_reduce_kernel", "ptrs": [("ws_ptr", "fp32"), ("y_ptr", e)],
                        "ints": [("MN", m * n, True)], "floats": [], "constexprs": {"SPLIT_K": sk, "BLOCK": 1024},
                        "num_warps": 4, "num_stages": 3})
    elif fam == "rmsnorm_rows":
        out.append({"kernel": "rmsnorm_kernel", "ptrs": [("x_ptr", e), ("w_ptr", e), ("y_ptr", e)],
                    "ints": [("R", m, True), ("D", n, False), ("stride", n, False)], "floats": [("eps", 1e-6)],
                    "constexprs": {"BLOCK_D": cfg["BLOCK_D"], "ROWS": cfg["ROWS"]}, "num_warps": cfg["num_warps"],
                    "num_stages": 3})
    elif fam == "softmax_onepass":
        out.append({"kernel": "softmax_onepass_kernel", "ptrs": [("x_ptr", e), ("y_ptr", e)],
                    "ints": [("C", n, False), ("stride", n, False)], "floats": [],
                    "constexprs": {"BLOCK": cfg["BLOCK"]}, "num_warps": cfg["num_warps"], "num_stages": 3})
    elif fam == "softmax_online":
        out.append({"kernel": "softmax_online_kernel", "ptrs": [("x_ptr", e), ("y_ptr", e)],
                    "ints": [("C", n, False), ("stride", n, False)], "floats": [],
                    "constexprs": {"BLOCK": cfg["BLOCK"]}, "num_warps": cfg["num_warps"],
                    "num_stages": cfg["num_stages"]})
    elif fam == "softmax_split":
        bpc = L.cdiv(L.cdiv(n, cfg["BLOCK"]), cfg["CHUNKS"])
        cx = {"BLOCK": cfg["BLOCK"], "CHUNKS": cfg["CHUNKS"]}
        out.append({"kernel": "softmax_split_stats_kernel", "ptrs": [("x_ptr", e), ("ws_ptr", "fp32")],
                    "ints": [("C", n, False), ("stride", n, False), ("blocks_per_chunk", bpc, False)], "floats": [],
                    "constexprs": cx, "num_warps": cfg["num_warps"], "num_stages": 3})
        out.append({"kernel": "softmax_split_write_kernel", "ptrs": [("x_ptr", e), ("y_ptr", e), ("ws_ptr", "fp32")],
                    "ints": [("C", n, False), ("stride", n, False), ("blocks_per_chunk", bpc, False)], "floats": [],
                    "constexprs": cx, "num_warps": cfg["num_warps"], "num_stages": 3})
    elif fam == "swiglu_2d":
        out.append({"kernel": "swiglu_kernel", "ptrs": [("gu_ptr", e), ("y_ptr", e)],
                    "ints": [("I", n, False), ("stride_gu", 2 * n, False), ("stride_y", n, False)], "floats": [],
                    "constexprs": {"BLOCK": cfg["BLOCK"]}, "num_warps": cfg["num_warps"], "num_stages": 3})
    return out


def vkey(v: dict[str, Any]) -> str:
    ints = [(nm, _int_sig(val, dns)) for nm, val, dns in v["ints"]]
    return json.dumps([v["kernel"], v["ptrs"], ints, sorted(v["constexprs"].items()), v["num_warps"],
                       v["num_stages"]], sort_keys=True)


def compile_variant(v: dict[str, Any]) -> dict[str, Any]:
    import triton
    from triton.backends.compiler import GPUTarget

    from . import kernels as KS

    fn = getattr(KS, v["kernel"])
    sig: dict[str, str] = {}
    constexprs: dict[str, Any] = dict(v["constexprs"])
    attrs: dict[tuple, list] = {}
    names = fn.arg_names
    for nm, t in v["ptrs"]:
        sig[nm] = "*" + t
        attrs[(names.index(nm),)] = [["tt.divisibility", 16]]
    for nm, val, dns in v["ints"]:
        t, spec = _int_sig(val, dns)
        if t == "constexpr":
            sig[nm] = "constexpr"
            constexprs[nm] = spec
        else:
            sig[nm] = t
            if spec == "D":
                attrs[(names.index(nm),)] = [["tt.divisibility", 16]]
    for nm, _ in v["floats"]:
        sig[nm] = "fp32"
    for nm in v["constexprs"]:
        sig[nm] = "constexpr"
    sig = {nm: sig[nm] for nm in names}
    src = triton.compiler.ASTSource(fn=fn, signature=sig, constexprs=constexprs, attrs=attrs)
    target = GPUTarget("cuda", 90, 32)
    backend = triton.compiler.make_backend(target)
    opts = backend.parse_options({"num_warps": v["num_warps"], "num_stages": v["num_stages"]})
    t = time.time()
    res: dict[str, Any] = {"kernel": v["kernel"], "constexprs": v["constexprs"], "num_warps": v["num_warps"],
                           "num_stages": v["num_stages"]}
    try:
        cc = triton.compile(src, target=target, options=opts.__dict__)
    except Exception as e:
        res.update(ok=False, error=f"{type(e).__name__}: {str(e).strip().splitlines()[-1][:300] if str(e).strip() else ''}",
                   compile_s=round(time.time() - t, 3))
        return res
    res.update(ok=True, compile_s=round(time.time() - t, 3), shared=int(cc.metadata.shared))
    ptx = cc.asm.get("ptx")
    ptxas = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "ptxas")
    if ptx and os.path.exists(ptxas):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "k.ptx")
            open(p, "w").write(ptx)
            r = subprocess.run([ptxas, "-arch=sm_90a", "-v", p, "-o", os.path.join(d, "k.cubin")],
                               capture_output=True, text=True)
            txt = r.stdout + r.stderr
            mreg = re.search(r"Used (\d+) registers", txt)
            msp = re.search(r"(\d+) bytes spill stores", txt)
            res["regs"] = int(mreg.group(1)) if mreg else None
            res["spill_bytes"] = int(msp.group(1)) if msp else None
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default="seen")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 4)
    ap.add_argument("--out", default=None)
    ap.add_argument("--extra", action="store_true", help="also compile the pruned TC configs (smem check)")
    args = ap.parse_args(argv)
    ws = corpus(args.corpus)
    todo: dict[str, tuple[dict[str, Any], str]] = {}
    for w in ws:
        plan = A.make_plan(w)
        cands = list(plan.candidates[1:])
        if args.extra:
            cands += [{"id": p["id"], "family": p["family"], "config": p["config"]} for p in plan.pruned
                      if p["family"].startswith("tc")]
        for c in cands:
            for v in variants_for(w, c["family"], c["config"]):
                kk = vkey(v)
                if kk not in todo:
                    todo[kk] = (v, c["id"])
    items = list(todo.values())
    if args.limit:
        items = items[: args.limit]
    print(f"{len(items)} distinct kernel variants", flush=True)
    import concurrent.futures as cf

    results = []
    t = time.time()
    with cf.ProcessPoolExecutor(max_workers=args.jobs) as ex:
        futs = {ex.submit(compile_variant, v): cid for v, cid in items}
        for f in cf.as_completed(futs):
            r = f.result()
            r["cand_id"] = futs[f]
            results.append(r)
    bad = [r for r in results if not r["ok"]]
    spills = [r for r in results if r.get("spill_bytes")]
    print(f"compiled {len(results)} in {time.time() - t:.1f}s: {len(bad)} failed, {len(spills)} spill; "
          f"sum compile_s {sum(r['compile_s'] for r in results):.1f}")
    for r in bad[:30]:
        print("FAIL", r["cand_id"], r["kernel"], r["error"])
    for r in sorted(spills, key=lambda r: -r["spill_bytes"])[:30]:
        print("SPILL", r["spill_bytes"], r["regs"], r["cand_id"], r["kernel"])
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
