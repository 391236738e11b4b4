"""Summary of an end-to-end run (``e2e.json``, written by :mod:`bench.kernel_tuning.e2e`): pure Python.

Per model and per (batch, context) measured: tokens per second of each leg (``compiled``,
``eager``, ``eager_graph``, ``torch_compile``; tokens/s = batch / median step time), the
compiled step's ratios ``vs_torch_compile``, ``vs_eager``, ``vs_eager_graph`` (tokens/s of
compiled / tokens/s of the other leg, measured in the same process) and ``floor_ratio`` (compiled
step time / HBM floor); per model the numerics at batch 1; the targets of the measurement with
whether they were met.

Reference point: AgentCompile (arXiv 2606.07665) reports 5.66× / 4.05× / 4.26× over PyTorch eager
end to end on Qwen3-1.7B / Qwen3-4B / Llama-3.2-1B-Instruct, averaged over five workloads, on an
A800; ``vs_eager`` here is measured on an H200 at the listed batch and context.
"""

from __future__ import annotations

import json
from typing import Any

LEGS = ("compiled", "eager", "eager_graph", "torch_compile")
AGENTCOMPILE_VS_EAGER = {"Qwen3-1.7B": 5.66, "Qwen3-4B": 4.05, "Llama-3.2-1B": 4.26}
TARGET_VS_TORCH_COMPILE = 1.10  # batch 1, contexts 512 and 4096, every model
TARGET_FLOOR_RATIO = 1.6  # batch 1, context 512
TARGET_PARITY_WITH_CHOICE = 0.95


def load(path: str) -> dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _r(x: float | None, nd: int = 4) -> float | None:
    return None if x is None else round(float(x), nd)


def run_row(run: dict[str, Any]) -> dict[str, Any]:
    """One (batch, context) point in the results' shape."""
    if run.get("error"):
        return {"batch": run["batch"], "context": run["context"], "error": run["error"]}
    tps = run.get("tokens_per_s") or {}
    legs = run.get("legs") or {}
    c = tps.get("compiled")

    def vs(n: str) -> float | None:
        return _r(c / tps[n]) if c and tps.get(n) else None

    return {
        "batch": run["batch"], "context": run["context"],
        "tokens_per_s": {n: _r(tps.get(n), 1) for n in LEGS},
        "step_ms": {n: _r(legs[n]["step_ms"], 4) if n in legs else None for n in LEGS},
        "vs_torch_compile": vs("torch_compile"), "vs_eager": vs("eager"), "vs_eager_graph": vs("eager_graph"),
        "floor_ratio": _r(run.get("floor_ratio")), "floor_ms": _r((run.get("floor") or {}).get("floor_ms")),
        "torch_compile_floor_ratio": _r((run.get("floor_ratio_legs") or {}).get("torch_compile")),
        "torch_compile_compile_s": run.get("torch_compile_compile_s"),
        "errors": run.get("errors") or {},
    }


def summarize(e2e: dict[str, Any]) -> dict[str, Any]:
    """The ``e2e`` block of the replay's results from one ``e2e.json``."""
    models: dict[str, Any] = {}
    numerics: dict[str, Any] = {}
    answers: dict[str, Any] = {}
    for name, m in (e2e.get("models") or {}).items():
        models[name] = [run_row(r) for r in m.get("runs", [])]
        n = m.get("numerics")
        if n:
            numerics[name] = {k: {"max_rel_err": _r(n[k]["max_rel_err"], 5), "median_rel_err": _r(n[k]["median_rel_err"], 5),
                                  "top1_agreement": n[k]["top1_agreement"]} for k in ("compiled", "eager_bf16")}
            numerics[name].update(steps=n["steps"], batch=n["batch"])
        elif m.get("numerics_error"):
            numerics[name] = {"error": m["numerics_error"]}
        tiers: dict[str, int] = {}
        for rows in (m.get("answers") or {}).values():
            for row in rows.values():
                tiers[row["tier"]] = tiers.get(row["tier"], 0) + 1
        answers[name] = tiers
    return {
        "env_hash": e2e.get("env_hash"), "copy_gbs": e2e.get("copy_gbs"),
        "gpu": (e2e.get("env") or {}).get("gpu"), "artifact": e2e.get("artifact"),
        "complete": e2e.get("complete"), "wall_s": e2e.get("wall_s"),
        "models": models, "numerics": numerics, "answer_tiers": answers,
        "deopts": [d["key"] for d in e2e.get("deopts") or []],
        "legs": e2e.get("legs"), "fixed_paths": e2e.get("fixed_paths"), "timing": e2e.get("timing"),
        "agentcompile_vs_eager": {"values": AGENTCOMPILE_VS_EAGER,
                                  "source": "AgentCompile, arXiv 2606.07665 (A800, averaged over five workloads)",
                                  "here": "H200; vs_eager per batch and context"},
        "targets": targets(models),
    }


def targets(models: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Each target with the measured values and whether it was met (None when not measured)."""
    vs_tc, floor = [], []
    for name, rows in models.items():
        for r in rows:
            if r.get("error") or r["batch"] != 1:
                continue
            if r["context"] in (512, 4096):
                vs_tc.append({"model": name, "context": r["context"], "value": r["vs_torch_compile"],
                              "met": None if r["vs_torch_compile"] is None else r["vs_torch_compile"] >= TARGET_VS_TORCH_COMPILE})
            if r["context"] == 512:
                floor.append({"model": name, "value": r["floor_ratio"],
                              "met": None if r["floor_ratio"] is None else r["floor_ratio"] <= TARGET_FLOOR_RATIO})

    def allmet(rows: list[dict[str, Any]]) -> bool | None:
        return None if not rows or any(r["met"] is None for r in rows) else all(r["met"] for r in rows)

    return {
        "vs_torch_compile_ge_1.10_batch1": {"rows": vs_tc, "met": allmet(vs_tc)},
        "floor_ratio_le_1.6_batch1_context512": {"rows": floor, "met": allmet(floor)},
    }


def render(s: dict[str, Any], title: str = "e2e") -> str:
    def f(v: Any, spec: str = ".2f") -> str:
        return "n/a" if v is None else format(v, spec)

    lines = [f"{title} on {s.get('gpu')} (copy {f(s.get('copy_gbs'), '.0f')} GB/s; deopts {len(s['deopts'])}): "
             "tokens/s compiled | eager | eager+graph | torch.compile; ratios; step/floor"]
    for name, rows in s["models"].items():
        for r in rows:
            if r.get("error"):
                lines.append(f"  {name:<13} B={r['batch']} L={r['context']}: error {r['error'][:80]}")
                continue
            t = r["tokens_per_s"]
            lines.append(f"  {name:<13} B={r['batch']} L={r['context']:<5} {f(t['compiled'], '.0f'):>6} | {f(t['eager'], '.0f'):>5} | "
                         f"{f(t['eager_graph'], '.0f'):>5} | {f(t['torch_compile'], '.0f'):>5}  "
                         f"vs torch.compile {f(r['vs_torch_compile'])}x, vs eager {f(r['vs_eager'], '.1f')}x, "
                         f"vs eager+graph {f(r['vs_eager_graph'])}x, floor {f(r['floor_ratio'])}x")
        n = s["numerics"].get(name) or {}
        if "compiled" in n:
            lines.append(f"  {name:<13} numerics ({n['steps']} steps vs fp32): compiled max rel {n['compiled']['max_rel_err']:.2e}, "
                         f"top-1 {n['compiled']['top1_agreement']:.2f}; eager bf16 max rel {n['eager_bf16']['max_rel_err']:.2e}, "
                         f"top-1 {n['eager_bf16']['top1_agreement']:.2f}")
    for k, t in s["targets"].items():
        verdict = "met" if t["met"] else "NOT met" if t["met"] is False else "n/a"
        vals = []
        for r in t["rows"]:
            where = r["model"] + (f" L={r['context']}" if "context" in r else "")
            vals.append(f"{where} {f(r['value'])}")
        lines.append(f"  target {k}: {verdict} ({', '.join(vals)})")
    return "\n".join(lines)
