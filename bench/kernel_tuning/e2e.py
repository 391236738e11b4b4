"""End to end on the GPU: a decode step built from the specialist's kernel choices, against torch
eager, eager + CUDA graph and torch.compile (max-autotune), in one process, interleaved.

    python -m bench.kernel_tuning.e2e --artifact kernel-tuning.wasm --out DIR \\
        [--models Qwen3-1.7B,Qwen3-4B,Llama-3.2-1B] [--configs 1x512,1x4096,8x512] [--steps 100]

Per model (random bf16 weights at the real shapes, ``decoder.CONFIGS``):

1. **Choices.** For each batch size, every workload of the step (:func:`step_workloads`) is asked
   of the compiled specialist through the tiered runtime (``auto_runtime.TieredTask``). A miss
   deopts to the reference agent (``agent.decide`` on this GPU, the same tuning that recorded the
   corpus): its record is appended to ``DIR/e2e_deopt.jsonl``, the ratchet's input for the next
   generation, and its answer is used.
2. **Numerics** at batch 1 over ``--steps`` decoding steps (positions 0, 1, …): the captured
   compiled step's logits against the fp32 eager step on the same weights (upcast) and inputs,
   each with its own KV cache; the input token of step t+1 is the fp32 step's greedy token of
   step t (both paths decode the same sequence). Per step ‖l − l₃₂‖/‖l₃₂‖ and whether the argmax
   agrees; the bf16 eager step is measured the same way as the control.
3. **Timing** at each (batch, context): context L = the attended keys, the new token at position
   L − 1 of a cache filled with random keys and values. Legs: ``compiled`` (one CUDA graph),
   ``eager`` (plain launches), ``eager_graph`` (the eager step captured in one CUDA graph),
   ``torch_compile`` (every layer and the head through ``torch.compile(mode=
   "max-autotune-no-cudagraphs")`` — Inductor with its own GEMM autotuning — and the whole step
   captured in one CUDA graph, as ``mode="max-autotune"`` does with its CUDA graphs). Rounds are
   interleaved (the leg order rotates each round); a round times ``--replays`` consecutive steps
   between two CUDA events; the step time is the median over ``--rounds`` rounds.
4. **HBM floor**: (weight bytes read per step + K/V bytes read) / the copy bandwidth measured in
   this process (``kernels.copy_bandwidth``: a 2 GiB device-to-device copy, bytes read plus bytes
   written counted).

Output ``DIR/e2e.json`` (rewritten after every measurement, so a run cut short keeps what it
measured) and ``DIR/e2e.log``. Exit 0 when every requested measurement ran, 2 when the time limit
stopped it early, 1 on an error.

torch / triton / auto_runtime are imported inside functions: the module imports on any machine.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

from . import record as R
from . import specialist as S
from .workloads import LAYOUTS, MODELS, QK_NORM_MODELS, Workload

SCHEMA = "auto.kt.e2e.v1"
LEGS = ("compiled", "eager", "eager_graph", "torch_compile")
DEFAULT_CONFIGS = ((1, 512), (1, 4096), (8, 512))
DEFAULT_MODELS = ("Qwen3-1.7B", "Llama-3.2-1B", "Qwen3-4B")
FIXED_PATHS = {
    "embedding": "torch.index_select of the B token rows",
    "rope_kv": "decode_kernels.rope_kv: rotary q/k (fp32 math) + K/V cache write, one Triton launch",
    "attention": "decode_kernels.DecodeAttention: split-KV Triton decode attention (BLOCK_N 64, 4 warps, "
                 "2 stages, B*kv*S ~ 2x132 programs) + combine kernel",
    "torch_legs_attention": "torch.nn.functional.scaled_dot_product_attention (query heads grouped per kv head)",
}


def step_workloads(model: str, batch: int) -> dict[str, Workload]:
    """``{role: Workload}`` of one decode step's tuned ops at ``batch``: the five GEMM sites, the
    first layer's input RMSNorm, the fused residual add + RMSNorm (every later norm), Qwen3's
    QK-norm (rows = B·(heads + kv), D = head_dim) and SwiGLU."""
    s = MODELS[model]
    out: dict[str, Workload] = {}
    for site, (n, k) in s.gemm_sites().items():
        out[f"gemm/{site}"] = Workload("gemm", batch, n, k, "bf16", model, site, "decode", batch, LAYOUTS["gemm"])
    out["rmsnorm/first"] = Workload("rmsnorm", batch, s.hidden, 0, "bf16", model, "input_norm", "decode", batch,
                                    LAYOUTS["rmsnorm"])
    out["rmsnorm_residual"] = Workload("rmsnorm_residual", batch, s.hidden, 0, "bf16", model, "residual_norm",
                                       "decode", batch, LAYOUTS["rmsnorm_residual"])
    if model in QK_NORM_MODELS:
        out["rmsnorm/qk"] = Workload("rmsnorm", batch * (s.heads + s.kv_heads), s.head_dim, 0, "bf16", model,
                                     "qk_norm", "decode", batch, LAYOUTS["rmsnorm"])
    out["swiglu"] = Workload("swiglu", batch, s.inter, 0, "bf16", model, "swiglu", "decode", batch, LAYOUTS["swiglu"])
    return out


# --------------------------------------------------------------------------- specialist + deopt


class Specialist:
    """The compiled specialist behind the tiered runtime; a deopt tunes the workload on this GPU
    with the reference agent and appends the decision record to ``deopt_path``.

    Raises:
        ImportError: ``auto_runtime`` (or wasmtime) is not importable.
        auto_runtime errors: the artifact does not load.
    """

    def __init__(self, artifact_path: str | None, env: dict[str, Any], deopt_path: str,
                 log: Callable[[str], None], seed: int = 909,
                 decide: Callable[..., tuple[dict[str, Any], bool]] | None = None):
        from auto_runtime import Artifact, TieredTask

        self.decide = decide  # the reference agent (``agent.decide``); tests pass a stand-in
        self.env = env
        self.env_hash = R.env_hash(env)
        self.log = log
        self.seed = seed
        self.deopt_path = deopt_path
        self.artifact = Artifact.load(artifact_path) if artifact_path else None
        self.tt = TieredTask(self.artifact, reference=self._reference, task=R.TASK)
        self._pending: dict[str, Workload] = {}
        self.asked: dict[str, dict[str, Any]] = {}
        self.deopts: list[dict[str, Any]] = []

    def ask(self, w: Workload) -> dict[str, Any]:
        if w.key in self.asked:
            return self.asked[w.key]
        inp = S.input_for(w.op, w.dtype, w.layout, w.m, w.n, w.k, self.env_hash)
        self._pending[R.canonical_json(inp)] = w
        res = self.tt(inp)
        row = {"key": w.key, "answer": res.answer, "tier": res.tier, "reason": res.reason,
               "latency_us": round(res.latency_us, 2), "generation": res.generation}
        self.asked[w.key] = row
        self.log(f"[specialist] {w.key:34s} {res.tier:6s} {res.answer['id'] if res.answer else None} ({res.reason})")
        return row

    def _reference(self, inp: dict[str, Any]) -> dict[str, Any]:
        w = self._pending[R.canonical_json(inp)]
        decide = self.decide
        if decide is None:
            from .agent import decide
        t0 = time.time()
        rec, lost = decide(w, env=self.env, pass_name="e2e-deopt", seed=self.seed,
                           extra_attrs={"kt.corpus": "e2e-deopt"})
        with open(self.deopt_path, "a") as f:
            f.write(R.dumps_line(rec))
            f.flush()
            os.fsync(f.fileno())
        self.deopts.append({"key": w.key, "chosen_id": rec["output"]["chosen_id"], "wall_s": round(time.time() - t0, 3),
                            "status": rec["status"]})
        self.log(f"[deopt] {w.key}: reference agent chose {rec['output']['chosen_id']} in {time.time() - t0:.1f} s")
        if lost:
            raise RuntimeError("CUDA context lost while tuning a deopted workload")
        return S.answer(rec)


# --------------------------------------------------------------------------- measurements


def _rel(a, b) -> float:
    import torch

    return float(torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(b))


def numerics(cfg, weights, answers, wls, steps: int, seed: int = 3) -> dict[str, Any]:
    """Compiled step (graph replay) and bf16 eager step vs the fp32 eager step, batch 1."""
    import torch

    from .choice_step import ChoiceStep
    from .decoder import TorchStep, kv_caches, rope_tables

    lmax = ((steps + 63) // 64) * 64
    cos, sin = rope_tables(cfg, lmax)
    comp = ChoiceStep(cfg, weights, 1, kv_caches(cfg, 1, lmax, torch.bfloat16, fill=False), cos, sin, answers, wls)
    comp.capture()
    w32 = weights.to(torch.float32)
    ref = TorchStep(cfg, w32, 1, kv_caches(cfg, 1, lmax, torch.float32, fill=False), cos, sin)
    eag = TorchStep(cfg, weights, 1, kv_caches(cfg, 1, lmax, torch.bfloat16, fill=False), cos, sin)
    g = torch.Generator(device="cpu")
    g.manual_seed(seed)
    tok = torch.randint(0, cfg.shape.vocab, (1,), generator=g).cuda()
    rc, re_, tc, te = [], [], [], []
    with torch.no_grad():
        for t in range(steps):
            comp.set(tok, t)
            lc = comp.replay().float()
            lr = ref(tok, t, t + 1).float()
            le = eag(tok, t, t + 1).float()
            rc.append(_rel(lc, lr))
            re_.append(_rel(le, lr))
            top = lr.argmax(-1)
            tc.append(bool((lc.argmax(-1) == top).all()))
            te.append(bool((le.argmax(-1) == top).all()))
            tok = top.to(torch.int64)
    torch.cuda.synchronize()
    del comp, w32, ref, eag
    return {
        "batch": 1, "steps": steps, "reference": "fp32 eager step, same weights upcast, own fp32 KV cache",
        "inputs": "step t+1 decodes the fp32 step's greedy token of step t (teacher forcing from the reference)",
        "compiled": {"max_rel_err": max(rc), "median_rel_err": statistics.median(rc),
                     "top1_agreement": sum(tc) / steps, "rel_err_per_step": [round(x, 6) for x in rc]},
        "eager_bf16": {"max_rel_err": max(re_), "median_rel_err": statistics.median(re_),
                       "top1_agreement": sum(te) / steps, "rel_err_per_step": [round(x, 6) for x in re_]},
    }


def _capture(fn: Callable[[], Any], warmup: int = 2):
    import torch

    st = torch.cuda.Stream()
    st.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(st):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(st)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = fn()
    torch.cuda.synchronize()
    return g, out


def time_legs(legs: dict[str, tuple[Callable[[], Any], int]], rounds: int) -> dict[str, dict[str, Any]]:
    """Interleaved timing: ``legs`` = {name: (one step, steps per round)}; the order rotates each
    round. Returns per leg the per-round ms/step and their median."""
    import torch

    names = list(legs)
    per: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for n in order:
            fn, reps = legs[n]
            torch.cuda.synchronize()
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            for _ in range(reps):
                fn()
            e1.record()
            e1.synchronize()
            per[n].append(e0.elapsed_time(e1) / reps)
    return {n: {"rounds_ms": [round(x, 5) for x in per[n]], "step_ms": statistics.median(per[n]),
                "steps_per_round": legs[n][1]} for n in names}


def measure(cfg, weights, answers, wls, batch: int, context: int, copy_gbs: float, rounds: int, replays: int,
            log: Callable[[str], None], whole_compile: bool = False) -> dict[str, Any]:
    """One (batch, context) point: build and capture every leg, time them interleaved."""
    import torch

    from .choice_step import ChoiceStep
    from .decoder import TorchStep, compiled_fns, kv_caches, kv_read_bytes, rope_tables

    t0 = time.time()
    pos = context - 1
    cos, sin = rope_tables(cfg, context)
    caches = kv_caches(cfg, batch, context, torch.bfloat16, fill=True)
    g = torch.Generator(device="cpu")
    g.manual_seed(batch * 7919 + context)
    tokens = torch.randint(0, cfg.shape.vocab, (batch,), generator=g).cuda()
    res: dict[str, Any] = {"batch": batch, "context": context, "position": pos, "errors": {}}
    legs: dict[str, tuple[Callable[[], Any], int]] = {}
    outs: dict[str, Any] = {}
    keep: list[Any] = []
    with torch.no_grad():
        comp = ChoiceStep(cfg, weights, batch, caches, cos, sin, answers, wls)
        comp.set(tokens, pos)
        ts = time.time()
        comp.capture()
        res["compiled_capture_s"] = round(time.time() - ts, 2)
        legs["compiled"] = (comp.graph.replay, replays)
        outs["compiled"] = comp.logits
        keep.append(comp)
        eager = TorchStep(cfg, weights, batch, caches, cos, sin)
        legs["eager"] = (lambda: eager(tokens, pos, context), max(2, replays // 4))
        ge, oe = _capture(lambda: eager(tokens, pos, context))
        legs["eager_graph"] = (ge.replay, replays)
        outs["eager_graph"] = oe
        keep += [eager, ge]
        try:
            torch._dynamo.reset()
            lc, hc = compiled_fns(cfg, batch)
            tc = TorchStep(cfg, weights, batch, caches, cos, sin, layer=lc, head=hc)
            ts = time.time()
            tc(tokens, pos, context)
            torch.cuda.synchronize()
            res["torch_compile_compile_s"] = round(time.time() - ts, 2)
            gt, ot = _capture(lambda: tc(tokens, pos, context))
            legs["torch_compile"] = (gt.replay, replays)
            outs["torch_compile"] = ot
            keep += [tc, gt]
        except Exception as e:  # reported, the other legs still run
            res["errors"]["torch_compile"] = f"{type(e).__name__}: {str(e)[:300]}"
            log(f"[e2e] torch.compile failed: {res['errors']['torch_compile']}")
        if whole_compile:
            try:
                ws = TorchStep(cfg, weights, batch, caches, cos, sin)
                for t in [weights.emb, weights.final, tokens, cos, sin, ws.zero, *caches[0], *caches[1],
                          *(v for lw in weights.layers for v in lw.values())]:
                    torch._dynamo.mark_static_address(t)  # cudagraph trees must not copy weights or caches
                whole = torch.compile(lambda: ws(tokens, pos, context), mode="max-autotune", dynamic=False)
                keep.append(ws)
                ts = time.time()
                for _ in range(3):
                    whole()
                torch.cuda.synchronize()
                res["torch_compile_whole_compile_s"] = round(time.time() - ts, 2)
                legs["torch_compile_whole"] = (whole, replays)
            except Exception as e:
                res["errors"]["torch_compile_whole"] = f"{type(e).__name__}: {str(e)[:300]}"
        # one replay of each graph on the same cache position: logits agree with the eager step?
        for n in ("compiled", "eager_graph", "torch_compile"):
            if n in legs:
                legs[n][0]()
        torch.cuda.synchronize()
        ref = outs["eager_graph"].float()
        res["logits_rel_vs_eager_graph"] = {n: _rel(o.float(), ref) for n, o in outs.items() if n != "eager_graph"}
        res["legs"] = time_legs(legs, rounds)
    res["tokens_per_s"] = {n: batch / (v["step_ms"] * 1e-3) for n, v in res["legs"].items()}
    wb = weights.nbytes()
    kvb = kv_read_bytes(cfg, batch, context)
    floor_ms = (wb + kvb) / (copy_gbs * 1e9) * 1e3
    res["floor"] = {"weight_bytes": wb, "kv_bytes": kvb, "copy_gbs": copy_gbs, "floor_ms": floor_ms,
                    "definition": "(weight + K/V bytes read per step) / device-to-device copy bandwidth "
                                  "(bytes read + bytes written per second)"}
    st = {n: v["step_ms"] for n, v in res["legs"].items()}
    if "compiled" in st:
        c = st["compiled"]
        res["ratios"] = {f"vs_{n}": st[n] / c for n in st if n != "compiled"}  # tokens/s ratio = time ratio
        res["floor_ratio"] = c / floor_ms
    res["floor_ratio_legs"] = {n: v / floor_ms for n, v in st.items()}
    res["wall_s"] = round(time.time() - t0, 2)
    del keep, legs, outs, caches
    gc.collect()
    torch.cuda.empty_cache()
    return res


# --------------------------------------------------------------------------- driver


def run_on_gpu(traces: Path, out: Path, progress: Callable[[str], None] | None = None,
               argv: list[str] | None = None) -> Path:
    """``auto bench run kernel-tuning --e2e``: compile the specialist from the recordings in
    ``traces`` (the replay, into ``out``; the next generation when ``e2e_deopt.jsonl`` holds
    earlier deopts), then measure the decode step on this machine's GPU, writing ``e2e.json``,
    ``e2e.log`` and ``e2e_deopt.jsonl`` into ``traces``. Returns ``traces``.

    Raises:
        ArgumentError: no CUDA GPU with torch and Triton here, or the e2e run failed.
    """
    from auto.errors import ArgumentError

    try:
        import torch
        import triton  # noqa: F401

        has_gpu = torch.cuda.is_available()
    except ImportError:
        has_gpu = False
    if not has_gpu:
        raise ArgumentError("--e2e measures on a CUDA GPU (torch + triton); on this machine replay a recorded run: "
                         "--replay traces/kernel-tuning (it reports e2e.json when present)")
    from .replay import run_replay

    run_replay(traces, out, progress=progress)
    # the newest generation: the ratchet's next one when an earlier e2e run's deopts were tabulated
    art = out / "kernel-tuning-next.wasm"
    if not art.exists():
        art = out / "kernel-tuning.wasm"
    rc = main(["--artifact", str(art), "--out", str(traces)] + list(argv or []))
    if rc == 1:
        raise ArgumentError(f"the e2e measurement failed; see {traces / 'e2e.log'}")
    return traces


def _clean(obj: Any) -> Any:
    """JSON-safe copy: non-finite floats become None."""
    if isinstance(obj, float):
        return obj if obj == obj and obj not in (float("inf"), float("-inf")) else None
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj


def _precompile(items: list[tuple[Workload, str, dict]], jobs: int, budget_s: float, fh) -> dict[str, Any] | None:
    from .run import precompile_items

    seen: set[tuple[str, str]] = set()
    uniq = []
    for w, fam, cfg in items:
        from .advisor import cand_id

        key = (cand_id(fam, cfg), w.op) if fam != "inductor" else (fam, w.key)
        if fam == "vendor" or key in seen:
            continue
        seen.add(key)
        uniq.append((w, fam, cfg))
    if not uniq or jobs <= 0:
        return None
    return precompile_items(uniq, jobs, budget_s, fh)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.kernel_tuning.e2e")
    ap.add_argument("--artifact", default=None, help="the compiled specialist (.wasm); without it every key deopts")
    ap.add_argument("--out", required=True)
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS))
    ap.add_argument("--configs", default=",".join(f"{b}x{c}" for b, c in DEFAULT_CONFIGS), help="BxL,BxL,...")
    ap.add_argument("--steps", type=int, default=100, help="numerics: decoding steps at batch 1")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--replays", type=int, default=20)
    ap.add_argument("--limit-s", type=float, default=450.0)
    ap.add_argument("--precompile-jobs", type=int, default=12)
    ap.add_argument("--whole-compile", action="store_true",
                    help="also time torch.compile(mode='max-autotune') of the whole step (its own CUDA graphs) "
                         "at the first config of the first model")
    ap.add_argument("--file", default="e2e.json")
    args = ap.parse_args(argv)
    t_start = time.time()
    os.makedirs(args.out, exist_ok=True)
    logf = open(os.path.join(args.out, os.path.splitext(args.file)[0] + ".log"), "a")

    def log(msg: str) -> None:
        line = f"[{time.time() - t_start:7.1f}s] {msg}"
        print(line, flush=True)
        logf.write(line + "\n")
        logf.flush()

    import torch

    from . import kernels as KN
    from .decoder import CONFIGS, random_weights

    torch.backends.cuda.matmul.allow_tf32 = False
    for name in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit", "accumulated_recompile_limit"):
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, 1024)
    env = KN.env_probe()
    env["copy_bandwidth"] = KN.copy_bandwidth()
    env["env_hash"] = R.env_hash(env)
    copy_gbs = env["copy_bandwidth"]["gbs"]
    configs = [tuple(int(x) for x in c.split("x")) for c in args.configs.split(",") if c]
    models = [m for m in args.models.split(",") if m]
    out_path = os.path.join(args.out, args.file)
    result: dict[str, Any] = {
        "schema": SCHEMA, "env": env, "env_hash": env["env_hash"], "copy_gbs": copy_gbs,
        "argv": sys.argv[1:] if argv is None else list(argv), "models": {}, "deopts": [],
        "fixed_paths": FIXED_PATHS, "legs": {
            "compiled": "specialist's kernel choices + fixed paths, one CUDA graph",
            "eager": "torch eager step, plain launches",
            "eager_graph": "the same eager step captured in one CUDA graph",
            "torch_compile": "torch.compile(mode='max-autotune-no-cudagraphs') per layer and head, "
                             "whole step captured in one CUDA graph"},
        "timing": {"rounds": args.rounds, "replays": args.replays,
                   "method": "interleaved rounds (order rotates), CUDA events around consecutive steps, "
                             "median of the rounds' ms/step; eager rounds run replays/4 steps"},
        "started_unix": int(t_start), "complete": False,
    }
    spec = Specialist(args.artifact, env, os.path.join(args.out, "e2e_deopt.jsonl"), log)
    result["artifact"] = {"id": spec.artifact.id, "generation": spec.tt.generation} if spec.artifact else None

    def save() -> None:
        result["deopts"] = spec.deopts
        result["wall_s"] = round(time.time() - t_start, 2)
        with open(out_path + ".tmp", "w") as f:
            json.dump(_clean(result), f, indent=1, sort_keys=True, allow_nan=False)
        os.replace(out_path + ".tmp", out_path)

    log(f"e2e: models={models} configs={configs} env_hash={env['env_hash'][:20]}… copy {copy_gbs:.0f} GB/s "
        f"artifact={'yes' if spec.artifact else 'none'}")
    rc = 0
    first = True
    for mname in models:
        cfg = CONFIGS[mname]
        mres: dict[str, Any] = {"layers": cfg.layers, "eps": cfg.eps, "rope_theta": cfg.rope_theta,
                                "qk_norm": cfg.qk_norm, "answers": {}, "runs": []}
        result["models"][mname] = mres
        weights = random_weights(cfg, seed=11)
        mres["weight_bytes"] = weights.nbytes()
        batches = sorted({b for b, _ in configs} | {1})
        answers: dict[int, dict[str, dict[str, Any]]] = {}
        wls: dict[int, dict[str, Workload]] = {}
        for b in batches:
            wls[b] = step_workloads(mname, b)
            rows = {role: spec.ask(w) for role, w in wls[b].items()}
            mres["answers"][str(b)] = rows
            answers[b] = {role: r["answer"] for role, r in rows.items()}
        save()
        items = [(wls[b][role], a["family"], a.get("config") or {}) for b in batches for role, a in answers[b].items()]
        pre = _precompile(items, args.precompile_jobs, 60.0, logf)
        if pre:
            mres["precompile"] = pre
        try:
            ts = time.time()
            mres["numerics"] = numerics(cfg, weights, answers[1], wls[1], args.steps)
            mres["numerics"]["wall_s"] = round(time.time() - ts, 2)
            n = mres["numerics"]
            log(f"[numerics] {mname}: compiled max rel {n['compiled']['max_rel_err']:.2e} top-1 "
                f"{n['compiled']['top1_agreement']:.2f}; eager bf16 max rel {n['eager_bf16']['max_rel_err']:.2e} "
                f"top-1 {n['eager_bf16']['top1_agreement']:.2f} ({n['wall_s']} s)")
        except Exception as e:
            mres["numerics_error"] = f"{type(e).__name__}: {str(e)[:400]}"
            log(f"[numerics] {mname} failed: {mres['numerics_error']}")
            rc = 1
        save()
        for b, ctx in configs:
            left = args.limit_s - (time.time() - t_start)
            if left < 45:
                log(f"time limit: skipping {mname} {b}x{ctx} ({left:.0f} s left)")
                rc = 2
                continue
            try:
                r = measure(cfg, weights, answers[b], wls[b], b, ctx, copy_gbs, args.rounds, args.replays, log,
                            whole_compile=args.whole_compile and first)
                first = False
                mres["runs"].append(r)
                tps = r["tokens_per_s"]
                log(f"[e2e] {mname} B={b} L={ctx}: " + ", ".join(f"{k} {v['step_ms']:.3f} ms" for k, v in r["legs"].items())
                    + f" | floor {r['floor']['floor_ms']:.3f} ms, compiled/floor {r.get('floor_ratio', float('nan')):.2f}, "
                    + ", ".join(f"{k} {v:.2f}" for k, v in (r.get("ratios") or {}).items())
                    + f" | tok/s compiled {tps.get('compiled', 0):.0f} (wall {r['wall_s']} s)")
            except Exception as e:
                mres["runs"].append({"batch": b, "context": ctx, "error": f"{type(e).__name__}: {str(e)[:400]}"})
                log(f"[e2e] {mname} B={b} L={ctx} failed: {type(e).__name__}: {str(e)[:300]}")
                rc = 1
                torch.cuda.empty_cache()
            save()
        del weights
        gc.collect()
        torch.cuda.empty_cache()
    result["complete"] = rc == 0
    save()
    log(f"e2e done rc={rc} in {time.time() - t_start:.0f} s; deopts: {[d['key'] for d in spec.deopts]}")
    logf.close()
    return rc


if __name__ == "__main__":
    sys.exit(main())
