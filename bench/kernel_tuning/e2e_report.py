"""Summary of end-to-end runs (``e2e_<n>.json``, written by :mod:`bench.kernel_tuning.e2e`): pure Python.

A run (one process) measures points (model, batch, context); several runs together cover the
plan (:func:`merge`). Per point: the median step time of each leg (``compiled``, ``eager``,
``eager_graph`` and every fresh torch.compile compile ``tc_layer_<i>`` / ``tc_whole_<i>``), the best
compile per torch.compile configuration and overall, the spread of each configuration's compiles
((worst − best) / best), the compiled step's ratios (tokens/s of compiled / tokens/s of the other
leg, measured in the same process: ``vs_best_torch_compile`` is the headline), ``floor_ratio``
(compiled step / HBM floor), the warm-up round against the median (the first-round level) with the
SM clock read in each round, and the per-kernel breakdown; per model the numerics at batch 1;
every target with whether it was met.

Reference point: AgentCompile (arXiv 2606.07665) reports 5.66× / 4.05× / 4.26× over PyTorch eager
end to end on Qwen3-1.7B / Qwen3-4B / Llama-3.2-1B-Instruct, averaged over five workloads, on an
A800; ``vs_eager`` here is measured on an H200 at the listed batch and context.
"""

from __future__ import annotations

import json
import statistics
from typing import Any

LEGS = ("compiled", "eager", "eager_graph", "torch_compile_layer", "torch_compile_whole", "best_torch_compile")
HEADLINE_POINTS = ((1, 512), (1, 4096), (8, 512))
AGENTCOMPILE_VS_EAGER = {"Qwen3-1.7B": 5.66, "Qwen3-4B": 4.05, "Llama-3.2-1B": 4.26}
TARGET_VS_BEST_TORCH_COMPILE = 1.15  # every model at every headline point
TARGET_FLOOR_RATIO = 1.3  # batch 1, context 512
TARGET_PARITY_WITH_CHOICE = 0.95
NUMERICS_REL_ERR_SLACK = 1.10  # compiled max rel err ≤ 1.10 × the bf16 eager step's
NUMERICS_TOP1_SLACK = 0.02  # compiled top-1 agreement ≥ the bf16 eager step's − 0.02


KERNEL_CATEGORIES = (  # first match wins; a label for the per-kernel table, which is the data
    ("attention", ("attn", "flash", "fmha", "sdpa", "attention", "softmax")),
    # GEMV / GEMM, with whatever Inductor fused into them (its "…rms_norm_mm…", "…mm_mul_silu…" kernels)
    ("gemm", ("gemv", "gemm", "_mm", "mm_", "nvjet", "xmma", "cutlass", "splitk", "matmul", "cublas")),
    ("rope_kv", ("rope",)),
    ("norm", ("rmsnorm", "qk_norm", "rsqrt", "norm")),
    ("swiglu", ("swiglu", "silu")),
    ("embedding", ("index", "embedding", "gather")),
    ("copy", ("memcpy", "memset", "copy")),
)


def kernel_category(name: str) -> str:
    """The category of a kernel by its name (:data:`KERNEL_CATEGORIES`, first match), else ``other``."""
    low = name.lower()
    for cat, keys in KERNEL_CATEGORIES:
        if any(k in low for k in keys):
            return cat
    return "other"


def load(path: str) -> dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _r(x: float | None, nd: int = 4) -> float | None:
    return None if x is None else round(float(x), nd)


def _configs(run: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per torch.compile configuration: its compiles' step times, best, worst, spread."""
    out: dict[str, dict[str, Any]] = {}
    for kind in ("layer", "whole"):
        rows = [c for c in run.get("compiles") or [] if c["config"] == kind]
        ms = [c["step_ms"] for c in rows if c.get("step_ms") is not None]
        out[kind] = {"compiles": len(ms), "failed": sum(1 for c in rows if c.get("error")),
                     "skipped": sum(1 for s in run.get("skipped_compiles") or [] if s["leg"].startswith(f"tc_{kind}_")),
                     "step_ms": [_r(x) for x in ms], "compile_s": [c.get("compile_s") for c in rows if c.get("step_ms")],
                     "best_ms": _r(min(ms)) if ms else None, "worst_ms": _r(max(ms)) if ms else None,
                     "spread": _r((max(ms) - min(ms)) / min(ms)) if len(ms) > 1 else None}
    return out


def _breakdown(b: dict[str, Any] | None, floor: dict[str, Any]) -> dict[str, Any] | None:
    if not b:
        return None
    if "error" in b:
        return {"error": b["error"]}
    cats = b["by_category_us_per_step"]
    if b.get("kernel_names", 10 ** 9) <= len(b["kernels"]):  # every kernel listed: categorize here
        cats = {}
        for k in b["kernels"]:
            c = kernel_category(k["name"])
            cats[c] = cats.get(c, 0.0) + k["us_per_step"]
    return {"leg": b.get("leg"), "kernel_us": _r(b["kernel_us_per_step"], 1), "idle_us": _r(b["idle_us_per_step"], 1),
            "span_us": _r(b["span_us_per_step"], 1), "launches": b["launches_per_step"],
            "by_category_us": {k: _r(v, 1) for k, v in sorted(cats.items())},
            "top_kernels": [{"name": k["name"][:80], "category": kernel_category(k["name"]), "us": _r(k["us_per_step"], 1),
                             "launches": k["launches_per_step"]} for k in b["kernels"][:8]],
            "weight_floor_us": _r(floor["weight_bytes"] / (floor["copy_gbs"] * 1e9) * 1e6, 1),
            "kv_floor_us": _r(floor["kv_bytes"] / (floor["copy_gbs"] * 1e9) * 1e6, 1)}


def run_row(run: dict[str, Any], source: str | None = None) -> dict[str, Any]:
    """One (batch, context) point in the results' shape."""
    if run.get("error"):
        return {"batch": run["batch"], "context": run["context"], "error": run["error"], "source": source}
    legs = run.get("legs") or {}
    cfgs = _configs(run)
    best = run.get("best_torch_compile")
    step = {"compiled": legs.get("compiled", {}).get("step_ms"), "eager": legs.get("eager", {}).get("step_ms"),
            "eager_graph": legs.get("eager_graph", {}).get("step_ms"),
            "torch_compile_layer": cfgs["layer"]["best_ms"], "torch_compile_whole": cfgs["whole"]["best_ms"],
            "best_torch_compile": best["step_ms"] if best else None}
    c = step["compiled"]

    def vs(n: str) -> float | None:
        return _r(step[n] / c) if c and step.get(n) else None  # tokens/s ratio = step-time ratio

    floor_ms = (run.get("floor") or {}).get("floor_ms")
    comp = legs.get("compiled") or {}
    rounds = comp.get("rounds_ms") or []
    warm = comp.get("warmup_rounds_ms") or []
    first = None
    if rounds and warm:
        first = {"warmup_round_ms": _r(warm[0]), "median_ms": _r(comp["step_ms"]),
                 "warmup_over_median": _r(warm[0] / comp["step_ms"]), "min_round_ms": _r(min(rounds)),
                 "max_round_ms": _r(max(rounds)), "sm_mhz_warmup": (comp.get("warmup_sm_mhz") or [None])[0],
                 "sm_mhz_rounds": comp.get("sm_mhz")}
    return {
        "batch": run["batch"], "context": run["context"], "source": source,
        "step_ms": {n: _r(v) for n, v in step.items()},
        "tokens_per_s": {n: _r(run["batch"] / (v * 1e-3), 1) if v else None for n, v in step.items()},
        "best_torch_compile": {"leg": best["leg"], "config": best["config"], "step_ms": _r(best["step_ms"])} if best else None,
        "torch_compile_configs": cfgs,
        "torch_compile_compiles": [{"leg": x["leg"], "config": x["config"], "index": x["index"],
                                    "compile_s": x.get("compile_s"), "step_ms": _r(x.get("step_ms")),
                                    "error": x.get("error")} for x in run.get("compiles") or []],
        "vs_best_torch_compile": vs("best_torch_compile"), "vs_torch_compile": vs("best_torch_compile"),
        "vs_torch_compile_layer": vs("torch_compile_layer"), "vs_torch_compile_whole": vs("torch_compile_whole"),
        "vs_eager": vs("eager"), "vs_eager_graph": vs("eager_graph"),
        "floor_ratio": _r(c / floor_ms) if c and floor_ms else None, "floor_ms": _r(floor_ms),
        "best_torch_compile_floor_ratio": _r(step["best_torch_compile"] / floor_ms) if step["best_torch_compile"] and floor_ms else None,
        "compiled_round_spread": _r((max(rounds) - min(rounds)) / min(rounds)) if rounds else None,
        "first_round": first,
        "breakdown": {n: _breakdown(b, run["floor"]) for n, b in (run.get("breakdown") or {}).items()},
        "logits_rel_vs_eager_graph": {k: _r(v, 5) for k, v in (run.get("logits_rel_vs_eager_graph") or {}).items()},
        "errors": run.get("errors") or {},
        "fused": fused_row(run),
    }


def fused_row(run: dict[str, Any]) -> dict[str, Any] | None:
    """The fused-step candidate family at one point (``e2e.measure``'s ``fused`` and ``chosen``):
    per preset its step time, ratio to the per-op compiled step (< 1 = faster), whether it passed
    the point's checks, and its error; the chosen leg (fastest of compiled and the passing
    presets), its floor ratio and its ratio to the best torch.compile. None where no preset ran."""
    fz = run.get("fused") or {}
    if not fz:
        return None
    legs = run.get("legs") or {}
    c = legs.get("compiled", {}).get("step_ms")
    presets = {}
    for n, row in sorted(fz.items()):
        ms = legs.get(n, {}).get("step_ms")
        presets[n] = {"step_ms": _r(ms), "over_compiled": _r(ms / c) if ms and c else None, "ok": row.get("ok"),
                      "logits_rel_vs_eager_graph": _r(row.get("logits_rel_vs_eager_graph"), 5),
                      "error": (row.get("error") or "")[:160] or None}
    ch = run.get("chosen") or {}
    timed = [v["over_compiled"] for v in presets.values() if v["over_compiled"] is not None]
    return {"presets": presets, "chosen_leg": ch.get("leg"), "chosen_step_ms": _r(ch.get("step_ms")),
            "chosen_floor_ratio": _r(ch.get("floor_ratio")), "chosen_vs_best_torch_compile": _r(ch.get("vs_best_torch_compile")),
            "best_over_compiled": min(timed) if timed else None}


def headline_key(row: dict[str, Any]) -> int:
    """How strong a measurement's baseline is: its timed fresh compiles of both torch.compile
    configurations together (a later measurement replaces the headline only when this is larger)."""
    return sum(c["compiles"] for c in (row.get("torch_compile_configs") or {}).values())


def merge(parts: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """The ``e2e`` block of the replay's results from several runs ``[(file name, e2e json), ...]``
    (each point is measured in one process). A point measured more than once keeps, as its
    headline, the measurement with the most timed fresh torch.compile compiles (both
    configurations together: the strongest baseline a run measured), the first such in run order
    on a tie (:func:`headline_key`); every measurement is listed under ``repeats``. Headline points
    (:data:`HEADLINE_POINTS`) go to ``models``; other points (the ratchet's batch 4) to
    ``other_points``; failed attempts to ``failed_points``; planned headline points without a
    successful measurement to ``not_measured``."""
    models: dict[str, list[dict[str, Any]]] = {}
    other: list[dict[str, Any]] = []
    failed: list[dict[str, Any]] = []
    numerics: dict[str, Any] = {}
    fused_numerics: dict[str, Any] = {}
    tiers: dict[str, dict[str, dict[str, int]]] = {}
    deopts: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    planned: set[tuple[str, int, int]] = set()
    for name, e in parts:
        runs.append({"file": name, "plan": e.get("plan"), "complete": e.get("complete"), "wall_s": e.get("wall_s"),
                     "artifact": e.get("artifact"), "deopts": [d["key"] for d in e.get("deopts") or []],
                     "copy_gbs": e.get("copy_gbs"), "nvml_error": e.get("nvml_error")})
        deopts += [dict(d, file=name) for d in e.get("deopts") or []]
        for m, pts in e.get("plan") or []:
            planned |= {(m, p[0], p[1]) for p in pts}
        for m, mv in (e.get("models") or {}).items():
            n = mv.get("numerics")
            if n and m not in numerics:
                numerics[m] = {k: {"max_rel_err": _r(n[k]["max_rel_err"], 5), "median_rel_err": _r(n[k]["median_rel_err"], 5),
                                   "top1_agreement": n[k]["top1_agreement"]} for k in ("compiled", "eager_bf16")}
                numerics[m].update(steps=n["steps"], batch=n["batch"], source=name)
            if n and n.get("fused"):
                fused_numerics[f"{m}:{name}"] = {
                    k: {"max_rel_err": _r(v.get("max_rel_err"), 5), "top1_agreement": v.get("top1_agreement"),
                        "ok": v.get("ok"), "error": v.get("error")} for k, v in n["fused"].items()}
            t = tiers.setdefault(m, {})
            for b, rows in (mv.get("answers") or {}).items():
                for row in rows.values():
                    t.setdefault(f"{name}:batch{b}", {}).setdefault(row["tier"], 0)
                    t[f"{name}:batch{b}"][row["tier"]] += 1
            for run in mv.get("runs") or []:
                row = run_row(run, name)
                row["model"] = m
                if row.get("error"):
                    failed.append(row)
                elif (run["batch"], run["context"]) in HEADLINE_POINTS:
                    have = models.setdefault(m, [])
                    old = next((i for i, r in enumerate(have) if (r["batch"], r["context"]) == (run["batch"], run["context"])), None)
                    if old is None:
                        have.append(row)
                    elif headline_key(row) > headline_key(have[old]):
                        have[old] = row
                else:
                    other.append(row)
    for rows in models.values():
        rows.sort(key=lambda r: HEADLINE_POINTS.index((r["batch"], r["context"])))
    # every measurement of a point (the headline: headline_key), and every fused-family row
    repeats: dict[str, list[dict[str, Any]]] = {}
    fused: list[dict[str, Any]] = []
    for name, e in parts:
        for m, mv in (e.get("models") or {}).items():
            for run in mv.get("runs") or []:
                if run.get("error"):
                    continue
                row = run_row(run, name)
                repeats.setdefault(f"{m} {run['batch']}x{run['context']}", []).append(
                    {"source": name, "compiled_ms": row["step_ms"]["compiled"],
                     "best_torch_compile_ms": row["step_ms"]["best_torch_compile"],
                     "vs_best_torch_compile": row["vs_best_torch_compile"], "floor_ratio": row["floor_ratio"],
                     "compiles": {k: v["compiles"] for k, v in row["torch_compile_configs"].items()}})
                if row["fused"]:
                    fused.append(dict(row["fused"], model=m, batch=run["batch"], context=run["context"], source=name,
                                      compiled_ms=row["step_ms"]["compiled"]))
    heads = {f"{m} {r['batch']}x{r['context']}": r["source"] for m, rows in models.items() for r in rows}
    for k, v in repeats.items():
        for x in v:
            x["headline"] = heads.get(k) == x["source"]
    measured = {(m, r["batch"], r["context"]) for m, rows in models.items() for r in rows}
    missing = sorted({p for p in planned if (p[1], p[2]) in HEADLINE_POINTS} - measured)
    return {"runs": runs, "models": models, "other_points": other, "failed_points": failed,
            "not_measured": [{"model": m, "batch": b, "context": c} for m, b, c in missing],
            "numerics": numerics, "answer_tiers": tiers, "deopts": deopts,
            "repeats": {k: v for k, v in repeats.items() if len(v) > 1}, "fused_candidate": fused,
            "fused_numerics": fused_numerics}


def risky_points(plan: list) -> list[tuple[str, int, int]]:
    """The batch-1 points ``(model, 1, context)`` of a plan (``[(model, [(b, c, n), ...]), ...]``,
    as parsed or as recorded in a run's ``plan``) that come after a point at batch > 1 in the same
    process (``e2e.plan_risk``)."""
    out, seen_multi = [], False
    for m, pts in plan or []:
        for p in pts:
            if p[0] == 1 and seen_multi:
                out.append((m, p[0], p[1]))
            seen_multi = seen_multi or p[0] > 1
    return out


def capture_fix(parts: list[tuple[str, dict[str, Any]]], repro: dict[str, Any] | None) -> dict[str, Any]:
    """The illegal memory access of batch-1 points after a batch > 1 point, before and after the
    captures owned their cuBLAS workspace (``graphs``; a run records ``capture`` from then on): per
    run its risky points and whether each was measured or failed, and the isolated reproduction
    (``workspace_repro.json``: per variant ok / error)."""
    runs = []
    for name, e in parts:
        risky = risky_points(e.get("plan"))
        if not risky:
            continue
        got = {(m, r["batch"], r["context"]): ("failed" if r.get("error") else "measured")
               for m, mv in (e.get("models") or {}).items() for r in mv.get("runs") or []}
        runs.append({"file": name, "own_workspace": bool(e.get("capture")),
                     "points": [{"model": m, "batch": b, "context": c, "outcome": got.get((m, b, c), "not reached")}
                                for m, b, c in risky]})
    before = [p["outcome"] for r in runs if not r["own_workspace"] for p in r["points"] if p["outcome"] != "not reached"]
    after = [p["outcome"] for r in runs if r["own_workspace"] for p in r["points"] if p["outcome"] != "not reached"]
    rep = None
    if repro:
        rep = {v: {"ok": row.get("ok"), "error": row.get("error"), "clear": row.get("clear"),
                   "own_workspace": row.get("own_workspace")} for v, row in sorted((repro.get("variants") or {}).items())}
    return {"runs": runs, "before_fix": {"measured": before.count("measured"), "failed": before.count("failed")},
            "after_fix": {"measured": after.count("measured"), "failed": after.count("failed")}, "repro": rep}


def summarize_runs(parts: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """:func:`merge` plus the environment, the aggregates and the targets."""
    s = merge(parts)
    first = parts[0][1] if parts else {}
    env = first.get("env") or {}
    s.update({
        "env_hash": first.get("env_hash"), "gpu": env.get("gpu"),
        "copy_gbs": [p[1].get("copy_gbs") for p in parts],
        "legs": first.get("legs"), "fixed_paths": first.get("fixed_paths"), "timing": first.get("timing"),
        "fresh_compile": first.get("fresh_compile"),
        "agentcompile_vs_eager": {"values": AGENTCOMPILE_VS_EAGER,
                                  "source": "AgentCompile, arXiv 2606.07665 (A800, averaged over five workloads)",
                                  "here": "H200; vs_eager per batch and context"},
    })
    s["first_round"] = first_round_summary(s)
    s["targets"] = targets(s)
    return s


def first_round_summary(s: dict[str, Any]) -> dict[str, Any]:
    """The warm-up round of the compiled leg against its median, over every measured point."""
    rows = [r for rows in s["models"].values() for r in rows] + s["other_points"]
    ratios = [(r["model"], r["batch"], r["context"], r["first_round"]["warmup_over_median"],
               r["first_round"]["sm_mhz_warmup"]) for r in rows if r.get("first_round")]
    slow = [x for x in ratios if x[3] > 1.03]
    clocks = sorted({c for r in rows if r.get("first_round") for c in
                     [r["first_round"]["sm_mhz_warmup"], *(r["first_round"]["sm_mhz_rounds"] or [])] if c is not None})
    return {"points": len(ratios), "slow_points": [{"model": m, "batch": b, "context": c, "warmup_over_median": v,
                                                    "sm_mhz_warmup": k} for m, b, c, v, k in slow],
            "median_warmup_over_median": _r(statistics.median(x[3] for x in ratios)) if ratios else None,
            "sm_mhz_seen": clocks, "threshold": 1.03}


def targets(s: dict[str, Any]) -> dict[str, Any]:
    """Each target with the measured values and whether it was met (None when not measured)."""
    vs_tc, floor = [], []
    for name, rows in s["models"].items():
        for r in rows:
            v = r["vs_best_torch_compile"]
            vs_tc.append({"model": name, "batch": r["batch"], "context": r["context"], "value": v,
                          "met": None if v is None else v >= TARGET_VS_BEST_TORCH_COMPILE})
            if (r["batch"], r["context"]) == (1, 512):
                floor.append({"model": name, "value": r["floor_ratio"],
                              "met": None if r["floor_ratio"] is None else r["floor_ratio"] <= TARGET_FLOOR_RATIO})
    for p in s["not_measured"]:
        vs_tc.append({"model": p["model"], "batch": p["batch"], "context": p["context"], "value": None, "met": None})
    num = []
    for name, n in s["numerics"].items():
        c, e = n["compiled"], n["eager_bf16"]
        ok = c["max_rel_err"] <= NUMERICS_REL_ERR_SLACK * e["max_rel_err"] and \
            c["top1_agreement"] >= e["top1_agreement"] - NUMERICS_TOP1_SLACK - 1e-9
        num.append({"model": name, "compiled_max_rel_err": c["max_rel_err"], "eager_bf16_max_rel_err": e["max_rel_err"],
                    "compiled_top1": c["top1_agreement"], "eager_bf16_top1": e["top1_agreement"], "met": ok})

    def allmet(rows: list[dict[str, Any]]) -> bool | None:
        if not rows:
            return None
        if any(r["met"] is False for r in rows):
            return False
        return None if any(r["met"] is None for r in rows) else True

    return {
        "vs_best_torch_compile_ge_1.15": {"rows": vs_tc, "met": allmet(vs_tc),
                                          "met_rows": sum(1 for r in vs_tc if r["met"]), "rows_n": len(vs_tc)},
        "floor_ratio_le_1.3_batch1_context512": {"rows": floor, "met": allmet(floor)},
        "numerics_within_eager_bf16": {"rows": num, "met": allmet(num),
                                       "rule": f"compiled max rel err <= {NUMERICS_REL_ERR_SLACK} x the bf16 eager "
                                               f"step's, top-1 >= the bf16 eager step's - {NUMERICS_TOP1_SLACK}"},
    }


def render(s: dict[str, Any], title: str = "e2e") -> str:
    def f(v: Any, spec: str = ".3f") -> str:
        return "n/a" if v is None else format(v, spec)

    lines = [f"{title} on {s.get('gpu')} ({len(s['runs'])} runs): step ms compiled | best torch.compile (config, "
             "compiles layer/whole, spread) | eager+graph; ratios; step/floor"]
    for name, rows in s["models"].items():
        for r in rows:
            st, cf, b = r["step_ms"], r["torch_compile_configs"], r["best_torch_compile"] or {}
            lines.append(f"  {name:<13} B={r['batch']} L={r['context']:<5} {f(st['compiled'])} | {f(st['best_torch_compile'])} "
                         f"({b.get('config')}, {cf['layer']['compiles']}/{cf['whole']['compiles']}, "
                         f"spread {f(cf['layer']['spread'], '.2f')}/{f(cf['whole']['spread'], '.2f')}) | {f(st['eager_graph'])}  "
                         f"vs best torch.compile {f(r['vs_best_torch_compile'], '.2f')}x, vs eager {f(r['vs_eager'], '.1f')}x, "
                         f"floor {f(r['floor_ratio'], '.2f')}x")
        n = s["numerics"].get(name) or {}
        if "compiled" in n:
            lines.append(f"  {name:<13} numerics ({n['steps']} steps vs fp32): compiled max rel {n['compiled']['max_rel_err']:.2e}, "
                         f"top-1 {n['compiled']['top1_agreement']:.2f}; eager bf16 max rel {n['eager_bf16']['max_rel_err']:.2e}, "
                         f"top-1 {n['eager_bf16']['top1_agreement']:.2f}")
    for p in s["not_measured"]:
        lines.append(f"  {p['model']:<13} B={p['batch']} L={p['context']:<5} not measured")
    for fz in s.get("fused_candidate") or []:
        best = ("no preset timed" if fz["best_over_compiled"] is None
                else f"best {fz['best_over_compiled']:.3f}x the compiled step's time")
        lines.append(f"  {fz['model']:<13} B={fz['batch']} L={fz['context']:<5} fused step ({fz['source']}): {best}, "
                     f"chosen {fz['chosen_leg']}")
    for k, t in s["targets"].items():
        verdict = "met" if t["met"] else "NOT met" if t["met"] is False else "n/a"
        lines.append(f"  target {k}: {verdict}")
    return "\n".join(lines)
