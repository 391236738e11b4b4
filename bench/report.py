"""Reports of a stream run: ``results.json`` figures, ``ratchet.csv``, the cumulative-cost PNG.

Definitions (counted on the run; with the simulator, reference latencies are the simulator's
recorded draws — recorded, not slept — and are labelled so):

* ``tier1_share`` — tier-1 answers / items.
* ``parity`` — items whose served answer (tier-1 or tier-0) equals the control leg's reference
  answer on the same item / items.
* ``silent_wrong`` — tier-1 answers that differ from the control leg's reference answer / tier-1
  answers; ``silent_wrong_ci95_high`` is the 95% Clopper–Pearson upper bound.
* ``reference_self_agreement`` — items where two independent reference calls agree / items:
  the ceiling parity can reach when the reference samples.
* ``reference_latency_ms_p50`` — median latency of the control leg's reference calls (every item).
* ``cost_usd_micros`` — the tiered leg's reference spend (tier-1 answers cost no model spend);
  ``control_cost_usd_micros`` — the all-reference control leg's spend; ``cost_ratio`` = control /
  tiered (higher is better).
"""

from __future__ import annotations

import csv
import statistics
from pathlib import Path
from typing import Any, Sequence

from auto.canonical import canonical_json
from auto.verify import clopper_pearson


def _pct(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return float(values[0])
    return float(statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1])


def _eq(a: Any, b: Any) -> bool:
    return canonical_json(a) == canonical_json(b)


def stream_figures(rows: Sequence[Any]) -> dict[str, Any]:
    """The headline figures of a stream run (see the module docstring for definitions)."""
    n = len(rows)
    t1 = [r for r in rows if r.tier == "tier-1"]
    wrong = sum(1 for r in t1 if not _eq(r.answer, r.reference_answer))
    _, sw_high = clopper_pearson(wrong, len(t1))
    parity_k = sum(1 for r in rows if _eq(r.answer, r.reference_answer))
    p_low, p_high = clopper_pearson(parity_k, n)
    self_k = sum(1 for r in rows if _eq(r.reference_answer, r.reference_answer_2))
    cost = sum(r.cost_usd_micros for r in rows)
    control = sum(r.control_cost_usd_micros for r in rows)
    return {
        "items": n,
        "tier1": len(t1),
        "tier1_share": (len(t1) / n) if n else None,
        "deopts": sum(1 for r in rows if r.tier == "tier-0"),
        "declined": sum(1 for r in rows if r.tier not in ("tier-0", "tier-1")),
        "parity": (parity_k / n) if n else None,
        "parity_ci95": [p_low, p_high],
        "silent_wrong": (wrong / len(t1)) if t1 else None,
        "silent_wrong_count": wrong,
        "silent_wrong_ci95_high": sw_high,
        "reference_self_agreement": (self_k / n) if n else None,
        "cost_usd_micros": round(cost, 3),
        "control_cost_usd_micros": round(control, 3),
        "cost_ratio": (control / cost) if cost > 0 else None,
        "tier1_latency_us_p50": _pct([r.latency_us for r in t1], 50),
        "tier1_latency_us_p95": _pct([r.latency_us for r in t1], 95),
        "reference_latency_ms_p50": _pct([r.reference_latency_ms for r in rows], 50),
        "reference_latency_ms_p95": _pct([r.reference_latency_ms for r in rows], 95),
    }


def write_ratchet_csv(rows: Sequence[Any], path: Path, simulated: bool = False) -> None:
    """One CSV row per stream position (tier, guard score, latency µs, cost µ$, generation, answers).

    ``latency_source`` says whether ``latency_us`` was measured (tier-1, or a real endpoint) or is
    the simulator's recorded draw (``simulated``); ``reference_answer_2`` and
    ``reference_latency_ms`` (the control leg's call) make every figure of ``results.json``
    recomputable from the CSV.
    """
    cols = ["position", "tier", "reason", "score", "p_value", "latency_us", "latency_source", "cost_usd_micros", "generation",
            "answer", "reference_answer", "reference_answer_2", "reference_latency_ms", "control_cost_usd_micros",
            "cum_cost_usd_micros", "cum_control_cost_usd_micros", "label"]
    cum = cum_c = 0.0
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for r in rows:
            cum += r.cost_usd_micros
            cum_c += r.control_cost_usd_micros
            w.writerow([r.position, r.tier, r.reason, "" if r.score is None else f"{r.score:.9f}",
                        "" if r.p_value is None else f"{r.p_value:.6f}", f"{r.latency_us:.2f}",
                        "measured" if r.tier == "tier-1" or not simulated else "simulated", f"{r.cost_usd_micros:.3f}",
                        "" if r.generation is None else r.generation, canonical_json(r.answer), canonical_json(r.reference_answer),
                        canonical_json(r.reference_answer_2), f"{r.reference_latency_ms:.3f}",
                        f"{r.control_cost_usd_micros:.3f}", f"{cum:.3f}", f"{cum_c:.3f}", r.label or ""])


def plot_cumulative_cost(rows: Sequence[Any], compiles: Sequence[dict[str, Any]], path: Path, title: str,
                         shift_at: int | None = None) -> None:
    """PNG: cumulative cost (µ$) of the tiered leg against the all-reference control leg."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs, tiered, control = [], [], []
    a = b = 0.0
    for r in rows:
        a += r.cost_usd_micros
        b += r.control_cost_usd_micros
        xs.append(r.position + 1)
        tiered.append(a)
        control.append(b)
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=110)
    ax.plot(xs, control, label="control: reference agent on every item", color="#888888")
    ax.plot(xs, tiered, label="Auto: tiered runtime (tier-1 or deopt)", color="#1f6feb")
    for c in compiles:
        if c.get("verdict") == "pass":
            ax.axvline(c["position"], color="#2da44e", alpha=0.35, lw=1)
        else:
            ax.axvline(c["position"], color="#cf222e", alpha=0.35, lw=1, ls=":")
    if shift_at is not None:
        ax.axvline(shift_at, color="#bf8700", lw=1.5, ls="--", label=f"shift at item {shift_at}")
    ax.set_xlabel("stream position")
    ax.set_ylabel("cumulative model cost (µ$)")
    ax.set_title(title, fontsize=10)
    ax.legend(loc="upper left", fontsize=8)
    ax.text(0.99, 0.02, "green: generation installed · red dotted: compile refused", transform=ax.transAxes,
            ha="right", va="bottom", fontsize=7, color="#555555")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def render_summary(results: dict[str, Any]) -> str:
    """A short human table of the headline figures."""
    def f(v: Any, spec: str = ".3f") -> str:
        return "n/a" if v is None else format(v, spec)

    s = results
    lines = [
        f"family {s['family']}   reference model: {s['reference_model']}",
        f"items {s['items']}   tier-1 {s['tier1']} ({f(s['tier1_share'], '.1%')})   deopts {s['deopts']}   "
        f"generations {s['generations']}   recompiles {s['recompiles']} (refused {s['refused_compiles']})",
        f"parity {f(s['parity'], '.1%')}   reference self-agreement {f(s['reference_self_agreement'], '.1%')}   "
        f"silent-wrong {s['silent_wrong_count']}/{s['tier1']} = {f(s['silent_wrong'], '.2%')} (95% upper {f(s['silent_wrong_ci95_high'], '.2%')})",
        f"cost {f(s['cost_usd_micros'], ',.0f')} µ$ vs control {f(s['control_cost_usd_micros'], ',.0f')} µ$ "
        f"(ratio {f(s['cost_ratio'], '.2f')}x)",
        f"latency: tier-1 p50 {f(s['tier1_latency_us_p50'], '.1f')} µs (in-stream, measured)   reference p50 "
        f"{f(s['reference_latency_ms_p50'], '.0f')} ms" + (" (simulated draws, not slept)" if s.get("reference_latency_simulated") else ""),
    ]
    g = s.get("guard")
    if g:
        comps = g.get("components") if isinstance(g.get("components"), list) else [g]
        parts = []
        for c in comps:
            if c.get("method") == "conformal-novelty":
                parts.append(f"novelty alpha={c.get('alpha')} n={c.get('n')}")
            elif c.get("method") == "selective-risk":
                parts.append(f"selective risk eps={c.get('epsilon')} delta={c.get('delta')} threshold={f(c.get('threshold'), '.4g')}"
                             + (f" ({c['reason']})" if c.get("reason") else ""))
            else:
                parts.append(str(c.get("method")))
        lines.append(f"guard (generation {g.get('generation')}, {g.get('compiled_as')}): " + "; ".join(parts))
    if "shift_alarms" in s:
        lines.append(f"shift alarms at {s['shift_alarms'] or 'none'}")
    a = s.get("shadow_audit")
    if a and a.get("n"):
        lines.append(f"shadow audit (rate {a.get('rate')}): {a['disagreements']}/{a['n']} audited tier-1 answers differed "
                     f"from the reference (95% CP upper {f(a.get('silent_wrong_ci95_high'), '.2%')})")
    elif a:
        lines.append(f"shadow audit (rate {a.get('rate')}): no tier-1 answer audited")
    lb = s.get("latency_benchmark")
    if lb:
        lines.append(
            f"warm loop ({lb['artifact']}): tier-1 single p50 {lb['tier1_single']['p50']} µs, batch {lb['tier1_batch_per_item']['p50']} µs/item; "
            + (f"sklearn predict p50 {lb['sklearn_predict']['p50']} µs; " if lb.get("sklearn_predict") else "")
            + f"bare wasmtime call p50 {lb['bare_wasmtime_call']['p50']} µs")
    return "\n".join(lines)


def render_compile_summary(results: dict[str, Any]) -> str:
    """A short human table of a compile family's run (``extraction``, ``routing``)."""
    def f(v: Any, spec: str = ".3f") -> str:
        return "n/a" if v is None else format(v, spec)

    s = results
    lines = [f"family {s['family']}   reference model: {s['reference_model']}   inputs {s['inputs']} ({s['inputs_source']})",
             f"compiled as {s.get('compiled_as')}: {s.get('reason')}"]
    if s.get("compiled_as") not in (None, "refused"):
        lines.append(f"held-out agreement {f(s.get('heldout_agreement'))} (95% CP low {f(s.get('heldout_agreement_ci95_low'))}, "
                     f"n {s.get('heldout_n')})   artifact {s.get('artifact_bytes')} bytes   tier-1 p50 "
                     f"{f(s.get('tier1_latency_us_p50'), '.1f')} µs")
    sp = s.get("specialist") or {}
    if sp.get("compiled"):
        lines.append(f"beside: specialist ({sp.get('estimator')}) held-out {f(sp.get('heldout_agreement'))} "
                     f"(95% CP low {f(sp.get('heldout_agreement_ci95_low'))})   {sp.get('artifact_bytes')} bytes   "
                     f"tier-1 p50 {f(sp.get('tier1_latency_us_p50'), '.1f')} µs")
    elif sp:
        lines.append(f"beside: specialist refused: {sp.get('reason')}")
    for key, title in (("fresh_heldout", "fresh held-out"), ("ood", "out-of-distribution probes"), ("eval_inputs", "--eval-inputs")):
        v = s.get(key)
        if v:
            lines.append(f"{title}: {v['tier1']}/{v['n']} tier-1 ({f(v['tier1_share'], '.1%')}), silent-wrong "
                         f"{v['tier1_wrong']}/{v['tier1']} = {f(v['silent_wrong'], '.2%')} (95% upper {f(v['silent_wrong_ci95_high'], '.2%')})")
    if s.get("program"):
        lines.append("program:")
        lines += ["  " + ln for ln in s["program"].splitlines()]
    return "\n".join(lines)
