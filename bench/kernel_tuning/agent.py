"""The reference agent of F7: one decision per workload, recorded as one span-shaped record.

    plan (advisor → schema → legality → analytic rank → top-k; ``advisor.make_plan``)
      → materialize (``kernels.build``; compile at first launch)
      → numerics BEFORE timing (fresh random inputs, output poisoned with NaN, fp32 reference on
        upcast inputs, ‖out−ref‖/‖ref‖ ≤ 1e-2, no NaN/Inf)
      → timing, 3 interleaved rounds per protocol:
          P1 = triton.testing.do_bench(return_mode="median") (L2 flushed before every call)
          P2 = CUDA-graph replay over rotated input copies > 4× L2, at most 64 copies (decode
               GEMMs and every non-GEMM op, see ``p2_applies``)
      → pick the fastest non-vendor candidate (Triton templates, and for non-GEMM ops
        ``inductor`` = torch.compile's kernel) by the median of its 3 round medians under the
        deciding protocol (P2 where it applies, P1 otherwise); vendor if none beats it.

Bad cases fall back to the vendor path and say why (``output.reason`` /
``attributes["kt.fallback_reason"]``): ``unsupported_shape``, ``no_legal_candidate``,
``all_candidates_failed``, ``unprofitable``, ``lost_gpu``. Per-candidate failures (compile /
OutOfResources, numerics, timing) are kept in the candidate's ``error``.

torch and triton are imported inside functions, so this module imports on CPU-only machines.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from . import advisor as A
from . import record as R
from .workloads import Workload

REL_TOL = 1e-2
SITE = "bench.kernel_tuning.agent.decide"


@dataclass
class TimingCfg:
    rounds: int = 3
    p1_warmup_ms: float = 5.0
    p1_rep_ms: float = 20.0
    p2_replays: int = 10
    p2_l2_factor: int = 4
    p2_decode_gemm: bool = True
    p2_row_ops: bool = True


def _err(phase: str, e: BaseException) -> str:
    msg = str(e).strip().splitlines()
    first = msg[0] if msg else ""
    # OutOfResources messages carry the numbers on the first line; keep it short and finite
    return f"{phase}: {type(e).__name__}: {first[:300]}"


def p2_applies(w: Workload, row_ops: bool = True) -> bool:
    """Whether protocol P2 (CUDA-graph replay over rotated copies) is measured, and then decides:
    decode GEMMs (M ≤ 8), and with ``row_ops`` every non-GEMM op. A decode step runs inside one
    CUDA graph, and P1's ``do_bench`` times the host's launch of a small kernel whenever that
    launch takes longer than the kernel (as for torch.compile's guarded wrapper, tens of µs)."""
    if w.op == "gemm":
        return w.m <= 8
    return row_ops


def gpu_alive() -> bool:
    import torch

    try:
        torch.cuda.synchronize()
        t = torch.ones(1, device="cuda")
        return bool((t + 1).item() == 2.0)
    except Exception:
        return False


def _graph_for(run, copies, out):
    import torch

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for args in copies:
            run(args, out)
    torch.cuda.current_stream().wait_stream(s)
    from .graphs import own_blas_workspace

    g = torch.cuda.CUDAGraph()
    with own_blas_workspace(torch), torch.cuda.graph(g):  # the graph's cuBLAS workspace in its own pool
        for args in copies:
            run(args, out)
    return g


def _replay_us(g, n_calls: int, replays: int) -> float:
    import torch

    g.replay()
    torch.cuda.synchronize()
    evs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(replays)]
    for e0, e1 in evs:
        e0.record()
        g.replay()
        e1.record()
    torch.cuda.synchronize()
    ts = sorted(e0.elapsed_time(e1) for e0, e1 in evs)
    return ts[len(ts) // 2] * 1e3 / n_calls


def decide(w: Workload, *, env: dict[str, Any], pass_name: str, hw: dict[str, Any] = A.H200,
           top_k: int | None = None, timing: TimingCfg | None = None,
           extra_candidates: list[dict[str, Any]] | None = None, seed: int = 0,
           llm: A.LLMAdvisor | None = None, extra_attrs: dict[str, Any] | None = None,
           device: str = "cuda") -> tuple[dict[str, Any], bool]:
    """Decide one workload on the GPU. Returns (record, lost_gpu).

    ``device="cpu"`` is a dry run for tests (Triton interpreter, wall-clock timing, no P2)."""
    import torch
    import triton.testing

    cuda = device == "cuda"

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    def alive() -> bool:
        return gpu_alive() if cuda else True

    def bench_ms(fn) -> float:
        if cuda:
            return float(triton.testing.do_bench(fn, warmup=timing.p1_warmup_ms, rep=timing.p1_rep_ms,
                                                 return_mode="median"))
        ts = []
        for _ in range(3):
            t = time.perf_counter()
            fn()
            ts.append((time.perf_counter() - t) * 1e3)
        return sorted(ts)[1]

    from . import kernels as KN

    timing = timing or TimingCfg()
    t0 = time.time()
    started_ns = time.time_ns()
    plan = A.make_plan(w, hw, top_k=top_k, llm=llm, extra_candidates=extra_candidates)
    cands: list[dict[str, Any]] = []
    for c in plan.candidates:
        cands.append({"id": c["id"], "family": c["family"], "config": c["config"],
                      "predicted_us": c.get("predicted_us"), "injected": bool(c.get("injected", False)),
                      "compiled": False, "error": None, "rel_err": None, "compile_s": None,
                      "times_us_p1": [], "median_us_p1": None, "times_us_p2": [], "median_us_p2": None,
                      "times_us": [], "median_us": None})
    lost = False
    fallback_reason: str | None = None
    problem = None
    runners: dict[str, Any] = {}
    passing: list[dict[str, Any]] = []
    protocol = "P1"
    record_error: dict[str, Any] | None = None
    try:
        problem = KN.Problem(w, device=device, seed=seed)
    except Exception as e:
        record_error = {"type": type(e).__name__, "message": _err("setup", e)}
        if not alive():
            lost = True
    if problem is not None:
        # ---- materialize + numerics (before any timing)
        for c in cands:
            try:
                run = KN.build(c["family"], c["config"], w, device=device)
                problem.poison()
                ts = time.time()
                res = run(problem.args, problem.out)
                sync()
                c["compile_s"] = round(time.time() - ts, 4)
                c["compiled"] = True
            except Exception as e:
                c["error"] = _err("compile", e)
                if not alive():
                    lost = True
                    c["error"] = _err("lost_gpu", e)
                    break
                continue
            try:
                re_, finite = KN.rel_err(res, problem.ref)
                sync()
            except Exception as e:
                c["error"] = _err("numerics", e)
                if not alive():
                    lost = True
                    c["error"] = _err("lost_gpu", e)
                    break
                continue
            c["rel_err"] = R.finite_or_none(float(re_))
            if not finite:
                c["error"] = "numerics: non-finite output (NaN/Inf; unwritten elements stay NaN-poisoned)"
                continue
            if re_ > REL_TOL:
                c["error"] = f"numerics: rel_err {re_:.3e} > {REL_TOL:g}"
                continue
            runners[c["id"]] = run
            passing.append(c)
        # ---- P1 timing: interleaved rounds
        if not lost:
            out = problem.out
            args = problem.args
            for _ in range(timing.rounds):
                for c in list(passing):
                    if c["error"]:
                        continue
                    run = runners[c["id"]]
                    try:
                        ms = bench_ms(lambda: run(args, out))
                        c["times_us_p1"].append(round(float(ms) * 1e3, 4))
                    except Exception as e:
                        c["error"] = _err("timing", e)
                        if not alive():
                            lost = True
                            break
                if lost:
                    break
        # ---- P2 timing for decode GEMMs
        if not lost and cuda and p2_applies(w, timing.p2_row_ops) and (w.op != "gemm" or timing.p2_decode_gemm):
            protocol = "P2"
            copies = None
            graphs: dict[str, Any] = {}
            try:
                copies = KN.make_copies(w, problem, int(hw["l2"]), timing.p2_l2_factor, device=device)
                for c in passing:
                    if c["error"]:
                        continue
                    try:
                        graphs[c["id"]] = _graph_for(runners[c["id"]], copies, problem.out)
                    except Exception as e:
                        c["error"] = _err("p2_capture", e)
                        if not alive():
                            lost = True
                            break
                if not lost:
                    for _ in range(timing.rounds):
                        for c in passing:
                            g = graphs.get(c["id"])
                            if g is None or c["error"]:
                                continue
                            c["times_us_p2"].append(round(_replay_us(g, len(copies), timing.p2_replays), 4))
            except Exception as e:
                record_error = {"type": type(e).__name__, "message": _err("p2", e)}
                if not alive():
                    lost = True
            finally:
                graphs.clear()
                copies = None
    # ---- medians and choice
    for c in cands:
        if len(c["times_us_p1"]) == timing.rounds:
            c["median_us_p1"] = round(R.median(c["times_us_p1"]), 4)
        if len(c["times_us_p2"]) == timing.rounds:
            c["median_us_p2"] = round(R.median(c["times_us_p2"]), 4)
        key = "p2" if protocol == "P2" else "p1"
        if not c["error"] and c[f"median_us_{key}"] is not None:
            c["times_us"] = list(c[f"times_us_{key}"])
            c["median_us"] = c[f"median_us_{key}"]
    vendor = cands[0]
    vendor_us = vendor["median_us"]
    tri = [c for c in cands[1:] if c["median_us"] is not None]
    best = min(tri, key=lambda c: (c["median_us"], c["id"])) if tri else None
    if lost:
        chosen = vendor
        fallback_reason = "lost_gpu: the CUDA context was lost; vendor path, no measurement"
    elif not plan.supported:
        chosen = vendor
        fallback_reason = f"unsupported_shape: {plan.unsupported_reason}"
    elif len(cands) == 1:
        chosen = vendor
        fallback_reason = "no_legal_candidate: every proposal was pruned"
    elif best is None:
        chosen = vendor
        fallback_reason = "all_candidates_failed: no non-vendor candidate compiled, passed numerics and timed"
    elif vendor_us is None or best["median_us"] < vendor_us:
        chosen = best
    else:
        chosen = vendor
        fallback_reason = f"unprofitable: best non-vendor {best['median_us']:.2f} us >= vendor {vendor_us:.2f} us"
    status = "error" if (lost or problem is None) else "ok"
    if lost:
        record_error = record_error or {"type": "LostGPU", "message": "CUDA context lost during the decision"}
    wall = time.time() - t0
    ended_ns = time.time_ns()
    env_h = R.env_hash(env)
    attrs = {
        "kt.pass": pass_name,
        "kt.workload_key": w.key,
        "kt.workload": w.to_json(),
        "kt.advisor": plan.advisor_name,
        "kt.advisor_output": plan.advisor_output,
        "kt.schema_validator": A.validator_name(),
        "kt.llm": plan.llm,
        "kt.proposals": plan.proposals,
        "kt.pruned": plan.pruned,
        "kt.candidates": cands,
        "kt.vendor_impl": {"gemm": "torch.nn.functional.linear (cuBLAS)", "rmsnorm": "torch.nn.functional.rms_norm",
                           "swiglu": "F.silu(g)*u", "softmax": "torch.softmax",
                           "rmsnorm_residual": "x + d, then torch.nn.functional.rms_norm"}.get(w.op, "none"),
        "kt.inductor_us": next((c["median_us"] for c in cands if c["id"] == "inductor"), None),
        "kt.vendor_us": vendor_us,
        "kt.vendor_us_p1": vendor["median_us_p1"],
        "kt.vendor_us_p2": vendor["median_us_p2"],
        "kt.chosen_id": chosen["id"],
        "kt.protocol": protocol,
        "kt.protocols": {"P1": f"triton.testing.do_bench(warmup={timing.p1_warmup_ms}, rep={timing.p1_rep_ms}, "
                               f"return_mode='median'), L2 flushed; {timing.rounds} interleaved rounds",
                         "P2": f"CUDA-graph replay over rotated input copies > {timing.p2_l2_factor}x L2 (at most "
                               f"{KN.MAX_COPIES}), median of {timing.p2_replays} replays per round; "
                               f"{timing.rounds} interleaved rounds"},
        "kt.rel_tol": REL_TOL,
        "kt.seed": seed,
        "kt.env_hash": env_h,
        "kt.env": {k: env.get(k) for k in R.ENV_HASH_FIELDS},
        "kt.wall_s": round(wall, 4),
        "kt.fallback_reason": fallback_reason,
        "kt.error": record_error,
    }
    if extra_attrs:
        attrs.update(extra_attrs)
    rec = R.make_record(
        inp=plan.advisor_input,
        output={"chosen_id": chosen["id"], "family": chosen["family"], "config": chosen["config"],
                "fallback": chosen is vendor, "reason": fallback_reason or "fastest",
                "median_us": chosen["median_us"], "protocol": protocol},
        attributes=attrs, status=status, error=record_error, started_ns=started_ns, ended_ns=ended_ns, site=SITE)
    del problem, runners
    return rec, lost
