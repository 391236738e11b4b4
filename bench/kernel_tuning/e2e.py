"""End to end on the GPU: a decode step built from the specialist's kernel choices, against torch
eager, eager + CUDA graph and torch.compile (max-autotune), in one process, interleaved.

    python -m bench.kernel_tuning.e2e --artifact kernel-tuning.wasm --out DIR \\
        [--models Qwen3-1.7B,Qwen3-4B,Llama-3.2-1B] [--configs 1x512,1x4096,8x512] [--steps 100] \\
        [--plan "Llama-3.2-1B=1x512,4x512/1;Qwen3-4B=8x512"] [--compiles 3]

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
   ``eager`` (plain launches), ``eager_graph`` (the eager step captured in one CUDA graph), and N
   fresh compiles (default 3, ``--compiles``; :func:`fresh_inductor`) of each torch.compile
   configuration: ``tc_layer_<i>`` (every layer and the head through ``torch.compile(mode=
   "max-autotune-no-cudagraphs")``, the whole step captured in one CUDA graph) and ``tc_whole_<i>``
   (the whole step through ``torch.compile(mode="max-autotune")``, CUDA-graph trees). Every torch
   leg calls attention the standard way (``enable_gqa=True``, ``decoder.make_layer_fn``). All legs
   of a point stay alive and are timed interleaved in one process: one warm-up round (reported,
   not in the median), then ``--rounds`` rounds (the leg order rotates each round); a round times
   ``--replays`` consecutive steps between two CUDA events, and NVML's SM clock is read while they
   run. The step time is the median over the rounds; the baseline is the best of all compiles of
   both configurations. A time budget per point (``--limit-s`` shared by the points, weighted by
   their compile counts) can skip compiles after the first of each configuration; the skipped
   ones are listed.
4. **HBM floor**: (weight bytes read per step + K/V bytes read) / the copy bandwidth measured in
   this process (``kernels.copy_bandwidth``: a 2 GiB device-to-device copy, bytes read plus bytes
   written counted).
5. **Per-kernel breakdown** of the compiled step, of the best torch.compile leg and of every
   fused leg (:func:`kernel_breakdown`: profiler over 10 steps; device time per kernel, per
   category, and the idle time between kernels).
6. **The fused decode step** (``fused_step``, presets ``--fused``, at the batches of
   ``--fused-batches``): a step-level candidate, qualified by the batch-1 numerics (same rule as
   the compiled step) and, per point, by a NaN-poisoned replay; timed as legs ``fused_<preset>``;
   ``chosen`` is the fastest of ``compiled`` and those legs, with its floor ratio and its ratio to
   the best torch.compile.

Output ``DIR/<file>`` (``--file``, default ``e2e.json``; rewritten after every measurement, so a
run cut short keeps what it measured), ``DIR/<stem>.log`` and ``DIR/<stem>_deopt.jsonl``. Exit 0
when every requested measurement ran, 2 when the time limit stopped it early, 1 on an error.

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
from .e2e_report import kernel_category
from .workloads import LAYOUTS, MODELS, QK_NORM_MODELS, Workload

SCHEMA = "auto.kt.e2e.v1"
LEGS = ("compiled", "eager", "eager_graph")  # + tc_layer_<i>, tc_whole_<i> (the fresh torch.compile compiles)
DEFAULT_CONFIGS = ((1, 512), (1, 4096), (8, 512))
DEFAULT_MODELS = ("Qwen3-1.7B", "Llama-3.2-1B", "Qwen3-4B")
FIXED_PATHS = {
    "embedding": "torch.index_select of the B token rows",
    "rope_kv": "decode_kernels.rope_kv: rotary q/k (fp32 math) + K/V cache write, one Triton launch",
    "attention": "decode_kernels.DecodeAttention: split-KV Triton decode attention (BLOCK_N 64, 4 warps, "
                 "2 stages, B*kv*S ~ 2x132 programs) + combine kernel",
    "torch_legs_attention": "torch.nn.functional.scaled_dot_product_attention(q (B, heads, 1, hd), K, V, "
                            "enable_gqa=True)",
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


def numerics(cfg, weights, answers, wls, steps: int, seed: int = 3, fused: tuple = ()) -> dict[str, Any]:
    """Compiled step (graph replay), each fused-step preset of ``fused`` (``fused_step.Preset``)
    and the bf16 eager step vs the fp32 eager step, batch 1. A fused preset passes
    (``fused[name]["ok"]``) under the rule ``e2e_report`` applies to the compiled step: max rel
    err ≤ 1.10 × the bf16 eager step's, top-1 agreement ≥ the bf16 eager step's − 0.02."""
    import torch

    from .choice_step import ChoiceStep
    from .decoder import TorchStep, kv_caches, rope_tables

    lmax = ((steps + 63) // 64) * 64
    cos, sin = rope_tables(cfg, lmax)
    comp = ChoiceStep(cfg, weights, 1, kv_caches(cfg, 1, lmax, torch.bfloat16, fill=False), cos, sin, answers, wls)
    comp.capture()
    fsteps: dict[str, Any] = {}
    ferr: dict[str, str] = {}
    if fused:
        from .fused_step import FusedStep

        for p in fused:
            try:
                fs = FusedStep(cfg, weights, 1, kv_caches(cfg, 1, lmax, torch.bfloat16, fill=False), cos, sin, p,
                               answers)
                fs.capture()
                fsteps[f"fused_{p.name}"] = fs
            except Exception as e:  # reported; the preset is not a candidate
                ferr[f"fused_{p.name}"] = f"{type(e).__name__}: {str(e)[:300]}"
    fr: dict[str, list[float]] = {n: [] for n in fsteps}
    ft: dict[str, list[bool]] = {n: [] for n in fsteps}
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
            for n, fs in fsteps.items():
                fs.set(tok, t)
                fs.logits.fill_(float("nan"))  # poisoned: the replay must write every logit
                lf = fs.replay().float()
                fr[n].append(_rel(lf, lr) if bool(torch.isfinite(lf).all()) else float("inf"))
                ft[n].append(bool((lf.argmax(-1) == top).all()))
            tok = top.to(torch.int64)
    torch.cuda.synchronize()
    del comp, w32, ref, eag, fsteps
    emax, etop = max(re_), sum(te) / steps
    fres: dict[str, Any] = {n: {"error": e, "ok": False} for n, e in ferr.items()}
    for n in fr:
        mx, top1 = max(fr[n]), sum(ft[n]) / steps
        fres[n] = {"max_rel_err": mx, "median_rel_err": statistics.median(fr[n]), "top1_agreement": top1,
                   "ok": bool(mx <= 1.10 * emax and top1 >= etop - 0.02)}
    return {
        "fused": fres,
        "batch": 1, "steps": steps, "reference": "fp32 eager step, same weights upcast, own fp32 KV cache",
        "inputs": "step t+1 decodes the fp32 step's greedy token of step t (teacher forcing from the reference)",
        "compiled": {"max_rel_err": max(rc), "median_rel_err": statistics.median(rc),
                     "top1_agreement": sum(tc) / steps, "rel_err_per_step": [round(x, 6) for x in rc]},
        "eager_bf16": {"max_rel_err": max(re_), "median_rel_err": statistics.median(re_),
                       "top1_agreement": sum(te) / steps, "rel_err_per_step": [round(x, 6) for x in re_]},
    }


def _capture(fn: Callable[[], Any], warmup: int = 2):
    from .graphs import capture_step

    return capture_step(fn, warmup)


class Clocks:
    """GPU clocks, power and temperature through NVML (``pynvml``, the ``nvidia-ml-py`` package);
    ``read()`` returns None where NVML is missing."""

    def __init__(self) -> None:
        self.nv = None
        self.error: str | None = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self.h = pynvml.nvmlDeviceGetHandleByIndex(0)
            self.nv = pynvml
        except Exception as e:  # reported in e2e.json
            self.error = f"{type(e).__name__}: {str(e)[:200]}"

    def read(self) -> dict[str, float] | None:
        nv = self.nv
        if nv is None:
            return None
        try:
            return {"sm_mhz": nv.nvmlDeviceGetClockInfo(self.h, nv.NVML_CLOCK_SM),
                    "mem_mhz": nv.nvmlDeviceGetClockInfo(self.h, nv.NVML_CLOCK_MEM),
                    "power_w": round(nv.nvmlDeviceGetPowerUsage(self.h) / 1000.0, 1),
                    "temp_c": nv.nvmlDeviceGetTemperature(self.h, nv.NVML_TEMPERATURE_GPU)}
        except Exception:
            return None


def time_legs(legs: dict[str, tuple[Callable[[], Any], int]], rounds: int, clocks: Clocks | None = None,
              warmup_rounds: int = 1) -> dict[str, dict[str, Any]]:
    """Interleaved timing: ``legs`` = {name: (one step, steps per round)}; the order rotates each
    round. ``warmup_rounds`` rounds come first, are timed the same way and reported
    (``warmup_rounds_ms``), and are not in the median. Per leg: the per-round ms/step, their
    median (``step_ms``) and, per round, the GPU's SM clock (MHz) read through NVML while the
    round's steps run (``sm_mhz``)."""
    import torch

    names = list(legs)
    per: dict[str, list[float]] = {n: [] for n in names}
    warm: dict[str, list[float]] = {n: [] for n in names}
    clk: dict[str, list[Any]] = {n: [] for n in names}
    wclk: dict[str, list[Any]] = {n: [] for n in names}
    failed: dict[str, str] = {}
    for r in range(warmup_rounds + rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for n in order:
            if n in failed:
                continue
            fn, reps = legs[n]
            torch.cuda.synchronize()
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            try:
                e0.record()
                for _ in range(reps):
                    fn()
                e1.record()
                c = clocks.read() if clocks else None  # while the enqueued steps run
                e1.synchronize()
            except Exception as e:  # the leg is dropped, the others go on
                failed[n] = f"{type(e).__name__}: {str(e)[:300]}"
                torch.cuda.synchronize()
                continue
            ms = e0.elapsed_time(e1) / reps
            (warm if r < warmup_rounds else per)[n].append(ms)
            (wclk if r < warmup_rounds else clk)[n].append(c["sm_mhz"] if c else None)
    out: dict[str, dict[str, Any]] = {}
    for n in names:
        if n in failed:
            out[n] = {"error": failed[n], "rounds_ms": [round(x, 5) for x in per[n]]}
            continue
        out[n] = {"rounds_ms": [round(x, 5) for x in per[n]], "step_ms": statistics.median(per[n]),
                  "warmup_rounds_ms": [round(x, 5) for x in warm[n]], "sm_mhz": clk[n], "warmup_sm_mhz": wclk[n],
                  "steps_per_round": legs[n][1]}
    return out


def kernel_breakdown(fn: Callable[[], Any], steps: int = 10) -> dict[str, Any]:
    """Per-kernel device time of ``steps`` consecutive calls of ``fn`` (one decode step each),
    through the PyTorch profiler (CUPTI): per kernel name µs per step and launches per step; per
    category (:func:`kernel_category`) µs per step; and the busy time (union of kernel intervals)
    against the span from the first kernel's start to the last one's end, whose difference is the
    device's idle time between kernels (launch gaps inside the graph)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            fn()
        torch.cuda.synchronize()
    evs = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    if not evs:
        return {"error": "the profiler recorded no device kernels"}
    iv = sorted((e.time_range.start, e.time_range.end, e.name) for e in evs)
    by: dict[str, list[float]] = {}
    for st, en, name in iv:
        by.setdefault(name, []).append(en - st)
    busy, cur_s, cur_e = 0.0, iv[0][0], iv[0][1]
    for st, en, _ in iv[1:]:
        if st > cur_e:
            busy += cur_e - cur_s
            cur_s, cur_e = st, en
        else:
            cur_e = max(cur_e, en)
    busy += cur_e - cur_s
    span = max(e for _, e, _ in iv) - iv[0][0]
    kernels = sorted(({"name": n[:160], "category": kernel_category(n), "us_per_step": sum(d) / steps,
                       "launches_per_step": len(d) / steps} for n, d in by.items()), key=lambda r: -r["us_per_step"])
    cats: dict[str, float] = {}
    for k in kernels:
        cats[k["category"]] = cats.get(k["category"], 0.0) + k["us_per_step"]
    return {"steps": steps, "kernel_us_per_step": sum(k["us_per_step"] for k in kernels),
            "launches_per_step": len(iv) / steps, "busy_us_per_step": busy / steps, "span_us_per_step": span / steps,
            "idle_us_per_step": (span - busy) / steps, "by_category_us_per_step": cats, "kernels": kernels[:40],
            "kernel_names": len(kernels)}


def fresh_inductor(base: str, tag: str, caches_off: bool = False) -> dict[str, Any]:
    """Make the next torch.compile a fresh compile: a new empty Inductor cache directory
    (``TORCHINDUCTOR_CACHE_DIR``: FX graph cache, GEMM autotuning results, the tuned configs of its
    Triton kernels) and Inductor's in-memory caches cleared (``torch._inductor.utils.clear_caches``
    / ``clear_inductor_caches``). Triton's own binary cache (``TRITON_CACHE_DIR``: compiled kernels
    keyed by their source, no tuning decision) is kept. With :func:`decoder.unique_entry` each
    compile traces afresh without ``torch._dynamo.reset()``, which would discard the CUDA-graph
    trees of the compiles still being timed.

    ``caches_off`` also switches the FX graph and autotuning caches off, as the recorded runs
    ``e2e_1`` … ``e2e_5`` did. Their logs show that with ``autotune_local_cache`` off Inductor
    autotuned the same GEMM shape once per layer in a whole-step compile (17 ``AUTOTUNE
    mm(8x2048, 2048x16384)`` lines for Llama-3.2-1B's 16 layers + its per-layer compile at 8×512),
    a likely reason those compiles took 40–132 s (not re-measured with the cache on). The empty
    directory alone already makes each compile's tuning fresh, hence the default."""
    import tempfile

    import torch._inductor.config as ic
    import torch._inductor.utils as iu

    os.makedirs(base, exist_ok=True)
    d = tempfile.mkdtemp(prefix=f"{tag}-", dir=base)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = d
    off = []
    for k in ("fx_graph_cache", "fx_graph_remote_cache", "autotune_local_cache", "autotune_remote_cache",
              "bundled_autotune_remote_cache") if caches_off else ():
        if hasattr(ic, k):
            setattr(ic, k, False)
            off.append(k)
    cleared = None
    for fname in ("clear_caches", "clear_inductor_caches"):
        f = getattr(iu, fname, None)
        if callable(f):
            f()
            cleared = fname
            break
    tcd = os.environ.get("TRITON_CACHE_DIR")
    # recorded by their own names: a recording keeps no path of the machine that ran it
    return {"inductor_cache_dir": os.path.basename(d), "config_off": off, "cleared": cleared,
            "triton_cache_dir": os.path.basename(tcd.rstrip("/")) if tcd else None}


TC_CONFIGS = {
    "layer": "torch.compile(mode='max-autotune-no-cudagraphs') of the layer and of the head (Inductor GEMM "
             "autotuning), the whole step captured in one CUDA graph",
    "whole": "torch.compile(mode='max-autotune') of the whole step (Inductor GEMM autotuning, its own CUDA graphs: "
             "CUDA-graph trees; weights, caches and inputs marked static)",
}
TIMING_RESERVE_S = 10.0


def _cudagraph_skips() -> int | None:
    try:
        from torch._dynamo.utils import counters

        return int(sum(counters["inductor"].get(k, 0) for k in counters["inductor"] if "cudagraph_skip" in k))
    except Exception:
        return None


def measure(cfg, weights, answers, wls, batch: int, context: int, copy_gbs: float, rounds: int, replays: int,
            log: Callable[[str], None], compiles: int = 3, budget_s: float | None = None,
            est: dict[str, float] | None = None, inductor_base: str = "/tmp/kt-inductor", clocks: Clocks | None = None,
            profile: bool = True, tag: str = "", caches_off: bool = False, fused: tuple = ()) -> dict[str, Any]:
    """One (batch, context) point: build and capture every leg, time them interleaved.

    ``fused`` (``fused_step.Preset``s that passed the model's batch-1 numerics) adds a leg
    ``fused_<name>`` per preset whose step here writes every logit (NaN-poisoned output) and whose
    logits are within 1.25 × the compiled step's relative distance (+ 2e-3) from the eager step's;
    ``chosen`` is then the fastest of ``compiled`` and those legs in this run (the fused family
    chosen only where it measures faster).

    Legs: ``compiled``, ``eager``, ``eager_graph`` and ``compiles`` fresh compiles of each
    torch.compile configuration (:data:`TC_CONFIGS`), legs ``tc_layer_<i>`` / ``tc_whole_<i>``,
    compiled in the order layer 1, whole 1, layer 2, … Compiles after the first of a configuration
    are skipped (and listed in ``skipped_compiles``) when the previous compile time of that
    configuration would take the point past ``budget_s``. ``est`` carries compile times between
    points (updated in place)."""
    import torch

    from .choice_step import ChoiceStep
    from .decoder import TorchStep, compiled_fns, kv_caches, kv_read_bytes, rope_tables, whole_step_compiled

    t0 = time.time()
    est = est if est is not None else {}
    pos = context - 1
    cos, sin = rope_tables(cfg, context)
    caches = kv_caches(cfg, batch, context, torch.bfloat16, fill=True)
    g = torch.Generator(device="cpu")
    g.manual_seed(batch * 7919 + context)
    tokens = torch.randint(0, cfg.shape.vocab, (batch,), generator=g).cuda()
    res: dict[str, Any] = {"batch": batch, "context": context, "position": pos, "errors": {}, "compiles": [],
                           "skipped_compiles": [], "budget_s": None if budget_s is None else round(budget_s, 1),
                           "compiles_target": compiles}
    legs: dict[str, tuple[Callable[[], Any], int]] = {}
    keep: list[Any] = []
    rel: dict[str, float] = {}
    with torch.no_grad():
        # the torch.compile legs first: fresh_inductor clears Inductor's in-memory caches, which must not
        # happen after the compiled step (whose "inductor" candidates are Inductor kernels) is captured
        eager = TorchStep(cfg, weights, batch, caches, cos, sin)
        ge, oe = _capture(lambda: eager(tokens, pos, context))
        keep += [eager, ge]
        ge.replay()
        torch.cuda.synchronize()
        ref = oe.float().clone()
        order = [k for _ in range(compiles) for k in ("layer", "whole")]
        done = {"layer": 0, "whole": 0}
        for kind in order:
            i = done[kind] + 1
            name = f"tc_{kind}_{i}"
            el = time.time() - t0
            guess = est.get(f"{kind}:{cfg.name}:{batch}", est.get(f"{kind}:{cfg.name}", est.get(kind)))
            if i > 1 and budget_s is not None and guess is not None and el + guess + TIMING_RESERVE_S > budget_s:
                res["skipped_compiles"].append({"leg": name, "elapsed_s": round(el, 1), "estimate_s": round(guess, 1)})
                log(f"[e2e] skip {name}: {el:.0f} s + ~{guess:.0f} s would pass the point's budget {budget_s:.0f} s")
                done[kind] = i
                continue
            done[kind] = i
            row: dict[str, Any] = {"leg": name, "config": kind, "index": i, "description": TC_CONFIGS[kind]}
            try:
                row["fresh"] = fresh_inductor(inductor_base, f"{tag}{name}", caches_off)
                ts = time.time()
                if kind == "layer":
                    lc, hc = compiled_fns(cfg, batch, tag=f"{tag}{name}")
                    tc = TorchStep(cfg, weights, batch, caches, cos, sin, layer=lc, head=hc)
                    tc(tokens, pos, context)
                    torch.cuda.synchronize()
                    row["compile_s"] = round(time.time() - ts, 2)
                    gt, ot = _capture(lambda tc=tc: tc(tokens, pos, context))
                    gt.replay()
                    torch.cuda.synchronize()
                    rel[name] = _rel(ot.float(), ref)
                    legs[name] = (gt.replay, replays)
                    keep += [tc, gt, lc, hc]
                else:
                    ws = TorchStep(cfg, weights, batch, caches, cos, sin)
                    whole = whole_step_compiled(ws, tokens, pos, context, tag=f"{tag}{name}")
                    for _ in range(3):  # compile + warm-up run, then the CUDA-graph trees record and replay
                        o = whole()
                    torch.cuda.synchronize()
                    row["compile_s"] = round(time.time() - ts, 2)
                    rel[name] = _rel(o.float(), ref)
                    del o
                    legs[name] = (whole, replays)
                    keep += [ws, whole]
                est[f"{kind}:{cfg.name}:{batch}"] = est[f"{kind}:{cfg.name}"] = est[kind] = row["compile_s"]
                log(f"[e2e] {name} compiled in {row['compile_s']} s")
            except Exception as e:  # reported, the other legs still run
                row["error"] = f"{type(e).__name__}: {str(e)[:400]}"
                res["errors"][name] = row["error"]
                log(f"[e2e] {name} failed: {row['error'][:300]}")
            res["compiles"].append(row)
        comp = ChoiceStep(cfg, weights, batch, caches, cos, sin, answers, wls)
        comp.set(tokens, pos)
        ts = time.time()
        comp.capture()
        res["compiled_capture_s"] = round(time.time() - ts, 2)
        keep.append(comp)
        comp.graph.replay()
        torch.cuda.synchronize()
        rel["compiled"] = _rel(comp.logits.float(), ref)
        legs = {"compiled": (comp.graph.replay, replays), "eager": (lambda: eager(tokens, pos, context), max(2, replays // 4)),
                "eager_graph": (ge.replay, replays), **legs}
        res["fused"] = {}
        if fused:
            from dataclasses import asdict

            from .fused_step import FusedStep

            for p in fused:
                name = f"fused_{p.name}"
                row = {"preset": asdict(p)}
                try:
                    ts = time.time()
                    fs = FusedStep(cfg, weights, batch, caches, cos, sin, p, answers)
                    fs.set(tokens, pos)
                    fs.capture()
                    row["capture_s"] = round(time.time() - ts, 2)
                    row["configs"] = fs.configs
                    fs.logits.fill_(float("nan"))
                    fs.graph.replay()
                    torch.cuda.synchronize()
                    row["all_written"] = bool(torch.isfinite(fs.logits).all())
                    row["logits_rel_vs_eager_graph"] = rel[name] = _rel(fs.logits.float(), ref)
                    row["ok"] = bool(row["all_written"] and rel[name] <= 1.25 * rel["compiled"] + 2e-3)
                    if row["ok"]:
                        legs[name] = (fs.graph.replay, replays)
                        keep.append(fs)
                    log(f"[e2e] {name}: captured in {row['capture_s']} s, rel vs eager {rel[name]:.2e} "
                        f"(compiled {rel['compiled']:.2e}), all written {row['all_written']}")
                except Exception as e:
                    row["error"] = f"{type(e).__name__}: {str(e)[:400]}"
                    row["ok"] = False
                    log(f"[e2e] {name} failed: {row['error'][:300]}")
                    torch.cuda.synchronize()
                res["fused"][name] = row
        for n, (fn, _) in legs.items():  # every leg once more before timing: an error shows here, per leg
            try:
                fn()
                torch.cuda.synchronize()
            except Exception as e:
                res["errors"][f"check:{n}"] = f"{type(e).__name__}: {str(e)[:300]}"
                raise RuntimeError(f"leg {n} failed its check replay: {type(e).__name__}: {str(e)[:200]}") from e
        res["cudagraph_skips"] = _cudagraph_skips()
        res["logits_rel_vs_eager_graph"] = rel
        res["clock_before_timing"] = clocks.read() if clocks else None
        timed = time_legs(legs, rounds, clocks)
        for n, v in list(timed.items()):
            if "error" in v:
                res["errors"][f"timing:{n}"] = v["error"]
                del timed[n]
                legs.pop(n)
        res["legs"] = timed
        for row in res["compiles"]:
            if row["leg"] in res["legs"]:
                row["step_ms"] = res["legs"][row["leg"]]["step_ms"]
        ours = [n for n in res["legs"] if n == "compiled" or n.startswith("fused_")]
        if ours:
            cn = min(ours, key=lambda n: res["legs"][n]["step_ms"])
            res["chosen"] = {"leg": cn, "step_ms": res["legs"][cn]["step_ms"], "candidates": ours,
                             "rule": "fastest of the per-op compiled step and the fused presets that passed "
                                     "numerics, timed interleaved in this run"}
        if profile:
            tcs = [r for r in res["compiles"] if r.get("step_ms") is not None]
            targets = {"compiled": legs["compiled"][0]} if "compiled" in legs else {}
            for n in res["legs"]:
                if n.startswith("fused_"):
                    targets[n] = legs[n][0]
            if tcs:
                best = min(tcs, key=lambda r: r["step_ms"])
                targets["best_torch_compile"] = legs[best["leg"]][0]
            res["breakdown"] = {}
            for n, fn in targets.items():
                try:
                    res["breakdown"][n] = kernel_breakdown(fn)
                    if n == "best_torch_compile":
                        res["breakdown"][n]["leg"] = best["leg"]
                except Exception as e:
                    res["breakdown"][n] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
    st = {n: v["step_ms"] for n, v in res["legs"].items()}
    res["tokens_per_s"] = {n: batch / (v * 1e-3) for n, v in st.items()}
    wb = weights.nbytes()
    kvb = kv_read_bytes(cfg, batch, context)
    floor_ms = (wb + kvb) / (copy_gbs * 1e9) * 1e3
    res["floor"] = {"weight_bytes": wb, "kv_bytes": kvb, "copy_gbs": copy_gbs, "floor_ms": floor_ms,
                    "definition": "(weight + K/V bytes read per step) / device-to-device copy bandwidth "
                                  "(bytes read + bytes written per second)"}
    tc_legs = {n: v for n, v in st.items() if n.startswith("tc_")}
    if tc_legs:
        bn = min(tc_legs, key=tc_legs.get)
        res["best_torch_compile"] = {"leg": bn, "config": bn.split("_")[1], "step_ms": tc_legs[bn]}
    if "compiled" in st:
        c = st["compiled"]
        res["ratios"] = {f"vs_{n}": st[n] / c for n in st if n != "compiled"}  # tokens/s ratio = time ratio
        if tc_legs:
            res["ratios"]["vs_best_torch_compile"] = res["best_torch_compile"]["step_ms"] / c
        res["floor_ratio"] = c / floor_ms
    if "chosen" in res:
        res["chosen"]["floor_ratio"] = res["chosen"]["step_ms"] / floor_ms
        if tc_legs:
            res["chosen"]["vs_best_torch_compile"] = res["best_torch_compile"]["step_ms"] / res["chosen"]["step_ms"]
    res["floor_ratio_legs"] = {n: v / floor_ms for n, v in st.items()}
    res["wall_s"] = round(time.time() - t0, 2)
    del keep, legs, caches
    try:
        torch._dynamo.reset()  # frees this point's CUDA-graph trees; its compiles are not used again
    except Exception:
        pass
    gc.collect()
    torch.cuda.empty_cache()
    return res


# --------------------------------------------------------------------------- driver


def run_on_gpu(traces: Path, out: Path, progress: Callable[[str], None] | None = None,
               argv: list[str] | None = None) -> Path:
    """``auto bench run kernel-tuning --e2e``: compile the specialist from the recordings in
    ``traces`` (the replay, into ``out``; the next generation when ``e2e_deopt.jsonl`` holds
    earlier deopts), then measure the decode step on this machine's GPU, writing the next free
    ``e2e_<n>.json`` with its ``.log`` and ``e2e_<n>_deopt.jsonl`` into ``traces`` (what the replay
    reads). Returns ``traces``.

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
                         "--replay traces/kernel-tuning (it reports the recorded e2e_<n>.json runs)")
    from .replay import run_replay

    run_replay(traces, out, progress=progress)
    # the newest generation: the ratchet's next one when an earlier e2e run's deopts were tabulated
    art = out / "kernel-tuning-next.wasm"
    if not art.exists():
        art = out / "kernel-tuning.wasm"
    extra = list(argv or [])
    if "--file" not in extra:
        n = 1 + max([int(p.stem.split("_")[1]) for p in traces.glob("e2e_[0-9]*.json")] or [0])
        extra += ["--file", f"e2e_{n}.json"]
    rc = main(["--artifact", str(art), "--out", str(traces)] + extra)
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


def parse_plan(plan: str | None, models: str, configs: str, compiles: int) -> list[tuple[str, list[tuple[int, int, int]]]]:
    """``[(model, [(batch, context, compiles), ...]), ...]`` from ``--plan`` (``MODEL=BxL[/N],BxL;MODEL=...``,
    N = fresh compiles per torch.compile configuration at that point, default ``compiles``) or,
    without it, every model of ``models`` at every ``configs`` point.

    Raises:
        ValueError: an unknown model or a malformed point.
    """
    def point(spec: str) -> tuple[int, int, int]:
        n = compiles
        if "/" in spec:
            spec, ns = spec.split("/", 1)
            n = int(ns)
        b, c = spec.lower().split("x")
        if int(b) < 1 or int(c) < 1 or n < 0:
            raise ValueError(f"bad point {spec!r}")
        return int(b), int(c), n

    out: list[tuple[str, list[tuple[int, int, int]]]] = []
    if plan:
        for part in (p for p in plan.split(";") if p.strip()):
            m, _, pts = part.partition("=")
            out.append((m.strip(), [point(x.strip()) for x in pts.split(",") if x.strip()]))
    else:
        pts = [point(x) for x in configs.split(",") if x]
        out = [(m, list(pts)) for m in models.split(",") if m]
    for m, _ in out:
        if m not in MODELS:  # decoder.CONFIGS has the same keys
            raise ValueError(f"unknown model {m!r} (known: {', '.join(MODELS)})")
    return out


def plan_risk(plan: list[tuple[str, list[tuple[int, int, int]]]]) -> list[tuple[str, int, int]]:
    """The points ``(model, batch, context)`` of ``plan`` at batch 1 that come after a point at
    batch > 1 in the same process. Every such point of the recorded runs (``e2e_2``, ``e2e_8``,
    ``e2e_9``, ``e2e_10``) failed with an illegal memory access, and no other point did. The cause:
    the batch > 1 compiled step (cuBLAS GEMMs) was its point's last CUDA-graph capture, the cuBLAS
    workspace that capture allocated in its graph's pool stayed cached after the point, the next
    point's eager-step graph baked it in, and a torch.compile CUDA-graph tree freed it
    (``graphs``; reproduced by ``workspace_repro``). Captures now own their workspace, so such a
    plan is safe; the list is kept in the run's ``plan_risk`` for the record."""
    from .e2e_report import risky_points

    return risky_points(plan)


def fused_presets(spec: str) -> tuple:
    """The ``fused_configs.Preset``s named in ``spec`` (comma-separated; ``none`` or empty: none).

    Raises:
        ValueError: a name that is not in ``fused_configs.PRESETS``.
    """
    from .fused_configs import PRESETS

    names = [] if spec.strip().lower() in ("", "none") else [x.strip() for x in spec.split(",") if x.strip()]
    known = {p.name: p for p in PRESETS}
    bad = [n for n in names if n not in known]
    if bad:
        raise ValueError(f"unknown fused preset(s) {', '.join(bad)} (known: {', '.join(known)})")
    return tuple(known[n] for n in names)


def portable_argv(argv: list[str], out: str) -> list[str]:
    """``argv`` as a recording keeps it: the output folder (a path of the machine that ran it)
    written as ``$OUT``."""
    return ["$OUT" + a[len(out):] if out and (a == out or a.startswith(out.rstrip("/") + "/")) else a
            for a in argv]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.kernel_tuning.e2e")
    ap.add_argument("--artifact", default=None, help="the compiled specialist (.wasm); without it every key deopts")
    ap.add_argument("--out", required=True)
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS))
    ap.add_argument("--configs", default=",".join(f"{b}x{c}" for b, c in DEFAULT_CONFIGS), help="BxL,BxL,...")
    ap.add_argument("--plan", default=None, help="MODEL=BxL[/N],BxL;MODEL=... (overrides --models/--configs)")
    ap.add_argument("--compiles", type=int, default=3, help="fresh compiles per torch.compile configuration")
    ap.add_argument("--steps", type=int, default=100, help="numerics: decoding steps at batch 1")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--replays", type=int, default=20)
    ap.add_argument("--limit-s", type=float, default=450.0)
    ap.add_argument("--precompile-jobs", type=int, default=12)
    ap.add_argument("--setup-s", type=float, default=30.0, help="budgeting: expected per-model setup (weights, "
                                                                  "specialist, numerics) until one is measured")
    ap.add_argument("--no-profile", action="store_true", help="skip the per-kernel breakdown")
    ap.add_argument("--caches-off", action="store_true",
                    help="fresh compiles also with Inductor's FX graph and autotune caches off (as e2e_1..5 ran)")
    ap.add_argument("--fused", default="spec,spec_nopdl,a,a_nopdl",
                    help="fused-step presets (fused_step.PRESETS names) among the candidates, or 'none'; a preset "
                         "is timed only where it passed the model's batch-1 numerics (needs --steps > 0)")
    ap.add_argument("--fused-batches", default="1",
                    help="batch sizes at which the fused presets are timed (comma-separated; 'all' for every point). "
                         "Default 1: at batch 8 the tl.dot path measured 3.9-4.6x slower than the per-op step in "
                         "e2e_9 / e2e_10")
    ap.add_argument("--file", default="e2e.json")
    args = ap.parse_args(argv)
    try:
        presets = fused_presets(args.fused)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    t_start = time.time()
    os.makedirs(args.out, exist_ok=True)
    logf = open(os.path.join(args.out, os.path.splitext(args.file)[0] + ".log"), "a")

    def log(msg: str) -> None:
        line = f"[{time.time() - t_start:7.1f}s] {msg}"
        print(line, flush=True)
        logf.write(line + "\n")
        logf.flush()

    plan = parse_plan(args.plan, args.models, args.configs, args.compiles)
    risky = plan_risk(plan)

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
    clocks = Clocks()
    out_path = os.path.join(args.out, args.file)
    stem = os.path.splitext(args.file)[0]
    result: dict[str, Any] = {
        "schema": SCHEMA, "env": env, "env_hash": env["env_hash"], "copy_gbs": copy_gbs,
        "argv": portable_argv(sys.argv[1:] if argv is None else list(argv), args.out), "models": {}, "deopts": [],
        "plan": [[m, [list(p) for p in pts]] for m, pts in plan],
        "fixed_paths": FIXED_PATHS, "legs": {
            "compiled": "specialist's kernel choices + fixed paths, one CUDA graph",
            "eager": "torch eager step, plain launches",
            "eager_graph": "the same eager step captured in one CUDA graph",
            "tc_layer_<i>": f"fresh compile i of: {TC_CONFIGS['layer']}",
            "tc_whole_<i>": f"fresh compile i of: {TC_CONFIGS['whole']}",
            "fused_<preset>": "fused_step.FusedStep with fused_configs preset <preset> (norm / SwiGLU prologues in the "
                              "GEMVs, QK-norm in the rotary kernel), one CUDA graph; timed where it passed the "
                              "numerics; 'chosen' = fastest of compiled and these"},
        "fresh_compile": "each compile in this process, no torch._dynamo.reset() between them: a new code object "
                         "(decoder.unique_entry), a new empty TORCHINDUCTOR_CACHE_DIR"
                         + (", fx_graph_cache and autotune_local_cache off" if args.caches_off else "")
                         + ", Inductor's in-memory caches cleared; Triton's binary cache kept",
        "timing": {"rounds": args.rounds, "replays": args.replays, "warmup_rounds": 1,
                   "method": "interleaved rounds (order rotates), CUDA events around consecutive steps, "
                             "median of the rounds' ms/step; one warm-up round first, timed and reported, not in "
                             "the median; eager rounds run replays/4 steps; SM clock read through NVML in each round"},
        "nvml_error": clocks.error,
        "started_unix": int(t_start), "complete": False,
        "plan_risk": [list(p) for p in risky],
        "capture": "graphs.capture_step: cuBLAS workspaces cleared before and after every CUDA-graph capture (each "
                   "graph owns its workspace)",
    }
    spec = Specialist(args.artifact, env, os.path.join(args.out, f"{stem}_deopt.jsonl"), log)
    result["artifact"] = {"id": spec.artifact.id, "generation": spec.tt.generation} if spec.artifact else None

    def save() -> None:
        result["deopts"] = spec.deopts
        result["wall_s"] = round(time.time() - t_start, 2)
        with open(out_path + ".tmp", "w") as f:
            json.dump(_clean(result), f, indent=1, sort_keys=True, allow_nan=False)
        os.replace(out_path + ".tmp", out_path)

    log(f"e2e: plan={plan} env_hash={env['env_hash'][:20]}… copy {copy_gbs:.0f} GB/s "
        f"artifact={'yes' if spec.artifact else 'none'} clocks={clocks.read()}")
    rc = 0
    est: dict[str, float] = {}
    setup_s = args.setup_s
    inductor_base = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"kt-inductor-{os.getpid()}")
    for mi, (mname, points) in enumerate(plan):
        cfg = CONFIGS[mname]
        ts_model = time.time()
        mres: dict[str, Any] = {"layers": cfg.layers, "eps": cfg.eps, "rope_theta": cfg.rope_theta,
                                "qk_norm": cfg.qk_norm, "answers": {}, "runs": []}
        result["models"][mname] = mres
        weights = random_weights(cfg, seed=11)
        mres["weight_bytes"] = weights.nbytes()
        batches = sorted({b for b, _, _ in points})
        answers: dict[int, dict[str, dict[str, Any]]] = {}
        wls: dict[int, dict[str, Workload]] = {}
        numerics_b1 = 1 in batches or bool(presets)  # the fused presets qualify on the batch-1 numerics
        for b in sorted(set(batches) | ({1} if numerics_b1 else set())):
            wls[b] = step_workloads(mname, b)
            rows = {role: spec.ask(w) for role, w in wls[b].items()}
            mres["answers"][str(b)] = rows
            answers[b] = {role: r["answer"] for role, r in rows.items()}
        save()
        items = [(wls[b][role], a["family"], a.get("config") or {}) for b in answers for role, a in answers[b].items()]
        pre = _precompile(items, args.precompile_jobs, 60.0, logf)
        if pre:
            mres["precompile"] = pre
        if numerics_b1 and args.steps > 0:
            try:
                ts = time.time()
                mres["numerics"] = numerics(cfg, weights, answers[1], wls[1], args.steps, fused=presets)
                mres["numerics"]["wall_s"] = round(time.time() - ts, 2)
                n = mres["numerics"]
                log(f"[numerics] {mname}: compiled max rel {n['compiled']['max_rel_err']:.2e} top-1 "
                    f"{n['compiled']['top1_agreement']:.2f}; eager bf16 max rel {n['eager_bf16']['max_rel_err']:.2e} "
                    f"top-1 {n['eager_bf16']['top1_agreement']:.2f} ({n['wall_s']} s); fused "
                    + ", ".join(f"{k} {v.get('max_rel_err', float('nan')):.2e}/{v.get('top1_agreement', float('nan')):.2f}"
                                f"{'' if v['ok'] else ' FAIL ' + str(v.get('error', ''))[:200]}"
                                for k, v in n["fused"].items()))
            except Exception as e:
                mres["numerics_error"] = f"{type(e).__name__}: {str(e)[:400]}"
                log(f"[numerics] {mname} failed: {mres['numerics_error']}")
                rc = 1
        fused_ok = tuple(p for p in presets if (mres.get("numerics") or {}).get("fused", {}).get(f"fused_{p.name}", {}).get("ok"))
        mres["fused_presets_ok"] = [p.name for p in fused_ok]
        setup_s = time.time() - ts_model
        mres["setup_s"] = round(setup_s, 2)
        save()
        for pi, (b, ctx, ncomp) in enumerate(points):
            left = args.limit_s - (time.time() - t_start)
            later = [p for _, pts in plan[mi + 1:] for p in pts]
            rest = points[pi:] + later
            weight = lambda p: 1 + 2 * p[2]  # noqa: E731
            budget = (left - setup_s * (len(plan) - mi - 1)) * weight((b, ctx, ncomp)) / sum(weight(p) for p in rest)
            if left < 45:
                log(f"time limit: skipping {mname} {b}x{ctx} ({left:.0f} s left)")
                rc = 2
                continue
            try:
                r = measure(cfg, weights, answers[b], wls[b], b, ctx, copy_gbs, args.rounds, args.replays, log,
                            compiles=ncomp, budget_s=budget, est=est, inductor_base=inductor_base, clocks=clocks,
                            profile=not args.no_profile, tag=f"{mname}_{b}x{ctx}_", caches_off=args.caches_off,
                            fused=fused_ok if args.fused_batches.strip() == "all" or
                            str(b) in [x.strip() for x in args.fused_batches.split(",")] else ())
                mres["runs"].append(r)
                tps = r["tokens_per_s"]
                log(f"[e2e] {mname} B={b} L={ctx}: " + ", ".join(f"{k} {v['step_ms']:.3f} ms" for k, v in r["legs"].items())
                    + f" | floor {r['floor']['floor_ms']:.3f} ms, compiled/floor {r.get('floor_ratio', float('nan')):.2f}, "
                    + f"vs best torch.compile {(r.get('ratios') or {}).get('vs_best_torch_compile', float('nan')):.3f}"
                    + f" | chosen {r.get('chosen', {}).get('leg')} {r.get('chosen', {}).get('step_ms', float('nan')):.3f} ms"
                    + f" /floor {r.get('chosen', {}).get('floor_ratio', float('nan')):.2f}"
                    + f" vs best tc {r.get('chosen', {}).get('vs_best_torch_compile', float('nan')):.3f}"
                    + f" | tok/s compiled {tps.get('compiled', 0):.0f} (wall {r['wall_s']} s, budget {budget:.0f} s)")
            except Exception as e:
                mres["runs"].append({"batch": b, "context": ctx, "error": f"{type(e).__name__}: {str(e)[:400]}"})
                log(f"[e2e] {mname} B={b} L={ctx} failed: {type(e).__name__}: {str(e)[:300]}")
                rc = 1
                save()  # before any further CUDA call: after a lost context every one raises
                try:
                    torch.cuda.empty_cache()
                except Exception as e2:  # the CUDA context is lost (e.g. an illegal memory access): stop here
                    log(f"[e2e] CUDA context lost ({type(e2).__name__}); the remaining points are not measured")
                    result["context_lost"] = f"{mname} B={b} L={ctx}"
                    save()
                    logf.close()
                    return 1
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
