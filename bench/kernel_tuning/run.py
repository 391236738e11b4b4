"""Driver: run the reference agent over a corpus and append one record per workload.

    python -m bench.kernel_tuning.run --pass pass1 --out DIR [--ops gemm,softmax] [--limit-s 450]
    python -m bench.kernel_tuning.run --env-only --out DIR        # env.json (+ copy bandwidth)

Writes ``DIR/<pass>.jsonl`` (appended and flushed per workload; workloads already in the file are
skipped, so a run cut short resumes), ``DIR/<pass>.log`` and ``DIR/env.json``. It stops cleanly
before ``--limit-s`` (predicting each next workload's cost from the ones already done) and exits:
0 = corpus complete, 2 = stopped by the time limit, 3 = the CUDA context was lost (restart the
process; it resumes after the lost workload), 1 = error.

Corpora: pass1/pass2/... → the seen corpus; rerecord1/rerecord2 → its 64 RMSNorm, SwiGLU and
softmax workloads (re-recorded with torch.compile's kernel among the candidates and P2 deciding);
holdout → the novel-shape holdout; faults → the
bad-case demonstrations (unsupported shape, no legal candidate, OutOfResources, NaN-leaving kernel,
invalid LLM advice, lost GPU last).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from . import advisor as A
from . import record as R
from .workloads import Workload, corpus, select

T_START = time.time()


def log(fh, msg: str) -> None:
    line = f"[{time.time() - T_START:7.1f}s] {msg}"
    print(line, flush=True)
    if fh:
        fh.write(line + "\n")
        fh.flush()


def faults_corpus() -> list[tuple[Workload, list[dict[str, Any]], Any]]:
    """(workload, injected candidates, llm) for the bad-case demonstrations; lost GPU last."""
    g = Workload("gemm", 1, 2048, 2048, "bf16", "Qwen3-1.7B", "o_proj", "decode", 1, "x_rowmajor,w_NK")
    nan_cand = {"family": "fault_skip_tail", "BLOCK_M": 1, "BLOCK_N": 16, "BLOCK_K": 512, "SPLIT_K": 1,
                "num_warps": 4, "num_stages": 1, "_bypass_legality": True}
    oor_cand = {"family": "tc_gemm", "BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 128, "GROUP_M": 8, "SPLIT_K": 1,
                "num_warps": 8, "num_stages": 4, "_bypass_legality": True}
    illegal_cand = {"family": "tc_gemm", "BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 128, "GROUP_M": 8,
                    "SPLIT_K": 1, "num_warps": 8, "num_stages": 4}  # pruned by legality (262,144 B smem)
    unsup = Workload("gemm", 1, 2048, 2050, "bf16", "synthetic", "k_not_multiple_of_8", "decode", 1, "x_rowmajor,w_NK")
    nolegal = Workload("rmsnorm", 4, 40960, 0, "bf16", "synthetic", "wide_norm", "decode", 4, "x_rowmajor,w_D")
    llm_w = Workload("gemm", 2, 4096, 2048, "bf16", "Qwen3-1.7B", "qkv", "decode", 2, "x_rowmajor,w_NK")
    bad_llm = A.LLMAdvisor(transport=lambda prompt: json.dumps({
        "labels": ["decode_gemv"], "family_priority": ["gemv_splitn", "vendor"], "param_hints": {},
        "candidates": [{"family": "gemv_splitn", "BLOCK_M": 2, "BLOCK_N": 3, "BLOCK_K": 512, "SPLIT_K": 1,
                        "num_warps": 4, "num_stages": 1}],
        "risks": [], "fallback": "vendor"}))
    lost_w = Workload("gemm", 1, 4096, 2048, "bf16", "Qwen3-1.7B", "qkv", "decode", 1, "x_rowmajor,w_NK")
    return [
        (g, [nan_cand, oor_cand, illegal_cand], None),
        (unsup, [], None),
        (nolegal, [], None),
        (llm_w, [], bad_llm),
        (lost_w, [{"family": "fault_oob", "_bypass_legality": True}], None),
    ]


def tiny_corpus() -> list[Workload]:
    """Small shapes for a CPU dry run under TRITON_INTERPRET=1 (``--device cpu``)."""
    def g(m, n, k):
        return Workload("gemm", m, n, k, "bf16", "tiny", "gemm", "decode" if m <= 8 else "prefill", m, "x_rowmajor,w_NK")
    return [g(1, 256, 512), g(3, 128, 256), g(64, 128, 256),
            Workload("rmsnorm", 4, 256, 0, "bf16", "tiny", "norm", "decode", 4, "x_rowmajor,w_D"),
            Workload("softmax", 2, 3000, 0, "fp32", "tiny", "softmax", "decode", 2, "x_rowmajor"),
            Workload("swiglu", 2, 512, 0, "bf16", "tiny", "swiglu", "decode", 2, "gu_rowmajor_[g|u]")]


def _precompile_worker(tasks: list[tuple[dict, str, dict]], device: str = "cuda") -> list[tuple[str, bool, str | None, float]]:
    import torch

    from . import kernels as KN

    cuda = device == "cuda"
    out = []
    for wj, fam, cfg in tasks:
        w = Workload.from_json(wj)
        t = time.time()
        try:
            p = KN.Problem(w, device=device, seed=0, with_ref=False)
            run = KN.build(fam, cfg, w, device=device)
            run(p.args, p.out)
            if cuda:
                torch.cuda.synchronize()
            out.append((A.cand_id(fam, cfg), True, None, time.time() - t))
        except Exception as e:
            out.append((A.cand_id(fam, cfg), False, f"{type(e).__name__}: {str(e)[:200]}", time.time() - t))
            try:
                if cuda:
                    torch.cuda.synchronize()
            except Exception:
                break
    return out


def precompile(ws: list[Workload], jobs: int, top_k: int | None, budget_s: float, fh,
               device: str = "cuda") -> dict[str, Any]:
    """Compile every distinct Triton candidate of the pass in ``jobs`` processes (fills the
    on-disk Triton cache; the pass then loads them). Uses the smallest workload per id."""
    rep: dict[tuple[str, str], tuple[int, Workload, str, dict]] = {}
    for w in ws:
        plan = A.make_plan(w, top_k=top_k)
        size = w.m * max(w.n, 1) + max(w.n, 1) * max(w.k, 1)
        for c in plan.candidates[1:]:
            key = (c["id"], w.op) if c["family"] != "inductor" else (c["id"], w.key)  # Inductor compiles per shape
            if key not in rep or size < rep[key][0]:
                rep[key] = (size, w, c["family"], c["config"])
    items = sorted(rep.values(), key=lambda t: (t[2], json.dumps(t[3], sort_keys=True)))
    return precompile_items([(w, fam, cfg) for _, w, fam, cfg in items], jobs, budget_s, fh, device)


def precompile_items(items: list[tuple[Workload, str, dict]], jobs: int, budget_s: float, fh,
                     device: str = "cuda") -> dict[str, Any]:
    """Compile ``(workload, family, config)`` variants in ``jobs`` spawned processes (each runs the
    variant once on a fresh problem, filling the on-disk Triton cache); stops at ``budget_s``."""
    import concurrent.futures as cf
    import multiprocessing as mp

    chunks = [[] for _ in range(jobs)]
    for i, (w, fam, cfg) in enumerate(items):
        chunks[i % jobs].append((w.to_json(), fam, cfg))
    t = time.time()
    ok = fail = 0
    errs: list[str] = []
    ctx = mp.get_context("spawn")
    # each worker compiles torch.compile candidates in-process (the workers are the parallelism);
    # the variable is read when a worker imports torch; restored once the workers exist
    prev = os.environ.get("TORCHINDUCTOR_COMPILE_THREADS")
    os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
    ex = cf.ProcessPoolExecutor(max_workers=jobs, mp_context=ctx)
    try:
        futs = [ex.submit(_precompile_worker, ch, device) for ch in chunks if ch]
        for f in cf.as_completed(futs, timeout=budget_s):
            for cid, good, err, _ in f.result():
                ok += good
                fail += not good
                if err:
                    errs.append(f"{cid}: {err}")
    except Exception as e:  # timeout or a dead worker: the rest compiles lazily in the pass
        log(fh, f"precompile: stopped ({type(e).__name__}); the rest compiles lazily")
    finally:
        if prev is None:
            os.environ.pop("TORCHINDUCTOR_COMPILE_THREADS", None)
        else:
            os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = prev
        procs = list(getattr(ex, "_processes", {}).values())
        ex.shutdown(wait=False, cancel_futures=True)
        for p in procs:
            try:
                p.kill()
            except Exception:
                pass
    res = {"variants": len(items), "ok": ok, "failed": fail, "seconds": round(time.time() - t, 2),
           "errors": errs[:20], "jobs": jobs}
    log(fh, f"precompile: {res['variants']} variants, {ok} ok, {fail} failed in {res['seconds']} s with {jobs} jobs")
    return res


def env_only(out: str, copy_bw: bool) -> dict[str, Any]:
    from . import kernels as KN

    env = KN.env_probe()
    if copy_bw:
        env["copy_bandwidth"] = KN.copy_bandwidth()
    env["env_hash"] = R.env_hash(env)
    env["hw_summary_for_advisor"] = A.H200
    env["probed_at_unix"] = int(time.time())
    path = os.path.join(out, "env.json")
    if os.path.exists(path):  # keep earlier calls' probes (each device call may be a fresh machine)
        try:
            old = json.load(open(path))
            prev = old.pop("previous", [])
            env["previous"] = prev + [old]
        except Exception:
            pass
    with open(path, "w") as f:
        json.dump(env, f, indent=1, sort_keys=True)
    return env


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.kernel_tuning.run")
    ap.add_argument("--pass", dest="pass_name", default="pass1")
    ap.add_argument("--out", required=True)
    ap.add_argument("--corpus", default=None, help="seen | holdout | faults (default from --pass)")
    ap.add_argument("--ops", default=None, help="comma list of ops to keep")
    ap.add_argument("--max-m", type=int, default=None, help="drop workloads with M above this")
    ap.add_argument("--limit-s", type=float, default=450.0)
    ap.add_argument("--top-k", type=int, default=None)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--precompile-jobs", type=int, default=0)
    ap.add_argument("--precompile-budget-s", type=float, default=90.0)
    ap.add_argument("--env-only", action="store_true")
    ap.add_argument("--copy-bw", action="store_true")
    ap.add_argument("--no-p2", action="store_true")
    ap.add_argument("--device", default="cuda", help="cuda, or cpu for a dry run under TRITON_INTERPRET=1")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    if args.env_only:
        env = env_only(args.out, args.copy_bw)
        print(json.dumps(env, sort_keys=True))
        return 0

    from . import agent as AG

    pass_name = args.pass_name
    cname = args.corpus or ("holdout" if pass_name.startswith("holdout") else
                            "faults" if pass_name.startswith("faults") else
                            "rerecord" if pass_name.startswith("rerecord") else "seen")
    logf = open(os.path.join(args.out, "run.log"), "a")
    env_path = os.path.join(args.out, "env.json")
    if args.device == "cpu":
        import triton

        env = {"gpu": "cpu (TRITON_INTERPRET dry run)", "sms": 0, "driver": None, "cuda": None,
               "triton": triton.__version__, "torch": __import__("torch").__version__}
    elif os.path.exists(env_path):
        env = json.load(open(env_path))
    else:
        env = env_only(args.out, False)
    if cname == "faults":
        items = faults_corpus()
    elif cname == "tiny":
        items = [(w, [], None) for w in tiny_corpus()]
    else:
        ws = select(corpus(cname), args.ops.split(",") if args.ops else None, args.max_m)
        items = [(w, [], None) for w in ws]
    path = os.path.join(args.out, f"{pass_name}.jsonl")
    done: set[str] = set()
    if os.path.exists(path):
        for r in R.load_jsonl(path):
            done.add(r["attributes"]["kt.workload_key"])
    todo = [it for it in items if it[0].key not in done]
    seed = args.seed if args.seed is not None else (sum(map(ord, pass_name)) % 1000)
    log(logf, f"pass={pass_name} corpus={cname} workloads={len(items)} already_done={len(done)} todo={len(todo)} "
              f"limit_s={args.limit_s} seed={seed} env_hash={R.env_hash(env)}")
    pre = None
    if args.precompile_jobs > 0 and todo:
        pre = precompile([it[0] for it in todo], args.precompile_jobs, args.top_k,
                         min(args.precompile_budget_s, max(10.0, args.limit_s * 0.3)), logf, args.device)
    timing = AG.TimingCfg(rounds=args.rounds, p2_decode_gemm=not args.no_p2)
    cost: dict[tuple, float] = {}
    rc = 0
    n_done = 0
    with open(path, "a") as fo:
        for w, extra, llm in todo:
            group = (w.op, w.phase, w.m_tokens)
            elapsed = time.time() - T_START
            similar = [v for k, v in cost.items() if k[0] == w.op and k[1] == w.phase]
            guess = cost.get(group, max(similar) * (2.0 if w.phase == "prefill" else 1.2) if similar else 8.0)
            if elapsed + guess * 1.3 > args.limit_s:
                log(logf, f"time limit: stopping before {w.key} (elapsed {elapsed:.1f}s, next ~{guess:.1f}s)")
                rc = 2
                break
            extra_attrs = {"kt.corpus": cname}
            if pre is not None:
                extra_attrs["kt.precompiled"] = True
            rec, lost = AG.decide(w, env=env, pass_name=pass_name, top_k=args.top_k, timing=timing,
                                  extra_candidates=extra or None, seed=seed, llm=llm, extra_attrs=extra_attrs,
                                  device=args.device)
            fo.write(R.dumps_line(rec))
            fo.flush()
            os.fsync(fo.fileno())
            n_done += 1
            a = rec["attributes"]
            cost[group] = max(cost.get(group, 0.0), a["kt.wall_s"])
            nc = len(a["kt.candidates"])
            nerr = sum(1 for c in a["kt.candidates"] if c["error"])
            log(logf, f"{w.key:32s} {w.model:13s} {w.site:16s} {a['kt.protocol']} vendor={a['kt.vendor_us']} "
                      f"chosen={rec['output']['chosen_id']} ({rec['output']['median_us']}) "
                      f"cands={nc} err={nerr} pruned={len(a['kt.pruned'])} wall={a['kt.wall_s']:.2f}s"
                      + (f" reason={a['kt.fallback_reason'][:60]}" if a["kt.fallback_reason"] else ""))
            if lost:
                log(logf, "lost GPU: exiting with 3 so the wrapper restarts the process")
                rc = 3
                break
    left = len(todo) - n_done
    log(logf, f"pass={pass_name} wrote {n_done} records, {left} left, rc={rc}")
    logf.close()
    return rc


if __name__ == "__main__":
    sys.exit(main())
