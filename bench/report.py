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
  ``control_cost_usd_micros`` — the all-reference control leg's spend; ``audit_cost_usd_micros``
  is the shadow audit's reference spend; ``cost_ratio`` = control / (tiered + audit), the headline
  (higher is better; the audit is part of what serving costs), and ``cost_ratio_without_audit`` =
  control / tiered.
* ``excess_silent_wrong`` — on the tier-1 items: the share whose tier-1 answer differs from the
  control leg's reference answer, minus the share whose second reference answer differs from it
  (the reference's disagreement with itself on the same items,
  ``reference_disagreement_tier1_items``); ``excess_silent_wrong_ci95_high`` its 95% upper bound
  (:func:`auto.guards.parity.excess_disagreement`). ``tier1_modal_disagreement``: the share of
  tier-1 items whose answer differs from the modal answer of every reference answer seen for that
  input in the run (items whose mode is tied are left out).
* ``steady_state`` — the same cost and tier-1 figures over the last 20% of items (audit spend
  included), beside the control leg's µ$ per item.
"""

from __future__ import annotations

import csv
import statistics
from pathlib import Path
from typing import Any, Sequence

from collections import Counter, defaultdict

from auto.canonical import canonical_json
from auto.guards.parity import excess_disagreement
from auto.gate import clopper_pearson

STEADY_STATE_SHARE = 0.2
"""The steady state is the last fifth of the stream."""


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
    audit = sum(getattr(r, "audit_cost_usd_micros", 0.0) for r in rows)
    ex = excess_disagreement([r.answer for r in t1], [r.reference_answer for r in t1], [r.reference_answer_2 for r in t1])
    seen: dict[str, Counter] = defaultdict(Counter)
    for r in rows:
        key = canonical_json(r.input) if getattr(r, "input", None) is not None else None
        if key is None:
            continue
        for a in ((r.answer,) if r.tier == "tier-0" else ()) + (r.reference_answer, r.reference_answer_2):
            seen[key][canonical_json(a)] += 1
    modal_n = modal_k = 0
    for r in t1:
        c = seen.get(canonical_json(r.input)) if getattr(r, "input", None) is not None else None
        if not c:
            continue
        top = c.most_common(2)
        if len(top) > 1 and top[0][1] == top[1][1]:
            continue
        modal_n += 1
        modal_k += canonical_json(r.answer) != top[0][0]
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
        "cost_ratio": (control / (cost + audit)) if cost + audit > 0 else None,
        "audit_cost_usd_micros": round(audit, 3),
        "cost_ratio_without_audit": (control / cost) if cost > 0 else None,
        "excess_silent_wrong": ex["excess"],
        "excess_silent_wrong_ci95_high": ex["excess_ci95_high"],
        "tier1_disagreement_with_control": ex["tier1_disagreement"],
        "reference_disagreement_tier1_items": ex["reference_disagreement"],
        "tier1_modal_disagreement": (modal_k / modal_n) if modal_n else None,
        "tier1_modal_items": modal_n,
        "tier1_latency_us_p50": _pct([r.latency_us for r in t1], 50),
        "tier1_latency_us_p95": _pct([r.latency_us for r in t1], 95),
        "reference_latency_ms_p50": _pct([r.reference_latency_ms for r in rows], 50),
        "reference_latency_ms_p95": _pct([r.reference_latency_ms for r in rows], 95),
    }


def steady_state(rows: Sequence[Any], share: float = STEADY_STATE_SHARE) -> dict[str, Any]:
    """Tier-1 share and µ$ per item (reference and audit spend) over the last ``share`` of the
    stream, beside the control leg's µ$ per item on the same items."""
    k = max(1, int(round(len(rows) * share))) if rows else 0
    tail = list(rows)[-k:] if k else []
    n = len(tail)
    spend = sum(r.cost_usd_micros + getattr(r, "audit_cost_usd_micros", 0.0) for r in tail)
    ctrl = sum(r.control_cost_usd_micros for r in tail)
    return {"items": n, "from_position": tail[0].position if tail else None,
            "tier1_share": (sum(1 for r in tail if r.tier == "tier-1") / n) if n else None,
            "usd_micros_per_item": (spend / n) if n else None,
            "control_usd_micros_per_item": (ctrl / n) if n else None,
            "cost_share_of_control": (spend / ctrl) if ctrl > 0 else None}


def write_ratchet_csv(rows: Sequence[Any], path: Path, simulated: bool = False) -> None:
    """One CSV row per stream position (tier, guard score, latency µs, cost µ$, generation, answers).

    ``latency_source`` says whether ``latency_us`` was measured (tier-1, or a real endpoint) or is
    the simulator's recorded draw (``simulated``); ``reference_answer_2`` and
    ``reference_latency_ms`` (the control leg's call) make every figure of ``results.json``
    recomputable from the CSV; ``audit_cost_usd_micros`` (the audit spend charged at this
    position) and ``input`` (the item's canonical JSON) let a peer (an exact dict, a similarity
    cache) be replayed on the same items with the control leg's answers and costs.
    """
    cols = ["position", "tier", "reason", "score", "p_value", "latency_us", "latency_source", "cost_usd_micros", "generation",
            "answer", "reference_answer", "reference_answer_2", "reference_latency_ms", "control_cost_usd_micros",
            "cum_cost_usd_micros", "cum_control_cost_usd_micros", "label", "audit_cost_usd_micros", "input"]
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
                        f"{r.control_cost_usd_micros:.3f}", f"{cum:.3f}", f"{cum_c:.3f}", r.label or "",
                        f"{getattr(r, 'audit_cost_usd_micros', 0.0):.3f}",
                        "" if getattr(r, "input", None) is None else canonical_json(r.input)])


ROLLING_WINDOW = 50
"""Items per point of the rolling curves in the stream plot."""


def plot_stream(rows: Sequence[Any], compiles: Sequence[dict[str, Any]], path: Path, title: str,
                shifts: Sequence[int] = (), window: int = ROLLING_WINDOW) -> dict[str, Any]:
    """PNG of a stream run, three panels over stream position:

    1. µ$ per item over a rolling window of ``window`` items: the tiered leg (reference and audit
       spend) and the control leg;
    2. tier-1 share over the same window;
    3. cumulative cost (µ$) of both legs.

    The title carries the headline: the run's ``cost_ratio`` (:func:`stream_figures`: control ÷
    (tiered + audit) spend, the figure ``results.json`` reports), or ``n/a`` with no spend.
    Installed generations are green lines, refused compiles red dotted lines, shifts dashed; the
    legend names each kind that occurs (a shift with its stream position).

    Returns:
        ``{"headline": cost ratio or None, "legend": [the legend's labels, top panel]}``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [r.position + 1 for r in rows]
    spend = [r.cost_usd_micros + getattr(r, "audit_cost_usd_micros", 0.0) for r in rows]
    ctrl = [r.control_cost_usd_micros for r in rows]
    t1 = [1.0 if r.tier == "tier-1" else 0.0 for r in rows]

    def rolling(v: list[float]) -> list[float]:
        out, acc = [], 0.0
        for i, x in enumerate(v):
            acc += x
            if i >= window:
                acc -= v[i - window]
            out.append(acc / min(i + 1, window))
        return out

    def cum(v: list[float]) -> list[float]:
        out, acc = [], 0.0
        for x in v:
            acc += x
            out.append(acc)
        return out

    fig, axes = plt.subplots(3, 1, figsize=(8, 8.5), dpi=110, sharex=True)
    axes[0].plot(xs, rolling(ctrl), label="control: reference on every item", color="#888888")
    axes[0].plot(xs, rolling(spend), label="Auto: ratchet (deopts + audits)", color="#1f6feb")
    axes[0].set_ylabel(f"µ$ per item ({window}-item mean)")
    axes[1].plot(xs, rolling(t1), color="#2da44e")
    axes[1].set_ylim(0, 1.02)
    axes[1].set_ylabel(f"tier-1 share ({window}-item mean)")
    axes[2].plot(xs, cum(ctrl), label="control", color="#888888")
    axes[2].plot(xs, cum(spend), label="Auto", color="#1f6feb")
    axes[2].set_ylabel("cumulative cost (µ$)")
    axes[2].set_xlabel("stream position")
    for ax in axes:
        for c in compiles:
            pos = c.get("position")
            if pos is None:
                continue
            if c.get("verdict") == "pass":
                ax.axvline(pos, color="#2da44e", alpha=0.25, lw=1)
            else:
                ax.axvline(pos, color="#cf222e", alpha=0.25, lw=1, ls=":")
        for sh in shifts:
            ax.axvline(sh, color="#bf8700", lw=1.2, ls="--")
    from matplotlib.lines import Line2D

    handles, labels = axes[0].get_legend_handles_labels()
    if any(c.get("position") is not None and c.get("verdict") == "pass" for c in compiles):
        handles.append(Line2D([], [], color="#2da44e", alpha=0.5, lw=1))
        labels.append("generation installed")
    if any(c.get("position") is not None and c.get("verdict") != "pass" for c in compiles):
        handles.append(Line2D([], [], color="#cf222e", alpha=0.5, lw=1, ls=":"))
        labels.append("compile refused")
    if shifts:
        handles.append(Line2D([], [], color="#bf8700", lw=1.2, ls="--"))
        labels.append("input shift at item " + ", ".join(str(sh) for sh in shifts))
    axes[0].legend(handles, labels, loc="upper right", fontsize=8)
    axes[2].legend(loc="upper left", fontsize=8)
    ratio = stream_figures(rows)["cost_ratio"] if rows else None
    headline = (f"cost ratio {ratio:.2f}x (control ÷ Auto with audits)" if ratio is not None
                else "cost ratio n/a (no spend)")
    axes[0].set_title(f"{title}\n{headline}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return {"headline": ratio, "legend": labels}


def render_summary(results: dict[str, Any]) -> str:
    """A short human table of the headline figures."""
    def f(v: Any, spec: str = ".3f") -> str:
        return "n/a" if v is None else format(v, spec)

    s = results
    lines = [
        f"family {s['family']}   reference model: {s['reference_model']}",
        f"items {s['items']}   tier-1 {s['tier1']} ({f(s['tier1_share'], '.1%')})   deopts {s['deopts']}   "
        f"generations {s.get('generation_count', s['generations'])}   compiles {s['recompiles']} (refused {s['refused_compiles']})",
        f"parity {f(s['parity'], '.1%')}   reference self-agreement {f(s['reference_self_agreement'], '.1%')}   "
        f"silent-wrong {s['silent_wrong_count']}/{s['tier1']} = {f(s['silent_wrong'], '.2%')} (95% upper {f(s['silent_wrong_ci95_high'], '.2%')})",
        f"excess silent-wrong {f(s.get('excess_silent_wrong'), '+.2%')} (95% upper {f(s.get('excess_silent_wrong_ci95_high'), '.2%')}; "
        f"the reference disagrees with itself on {f(s.get('reference_disagreement_tier1_items'), '.2%')} of the tier-1 items)",
        f"cost {f(s['cost_usd_micros'], ',.0f')} µ$ + audits {f(s.get('audit_cost_usd_micros'), ',.0f')} µ$ vs control "
        f"{f(s['control_cost_usd_micros'], ',.0f')} µ$ (ratio {f(s.get('cost_ratio'), '.2f')}x with audits, "
        f"{f(s.get('cost_ratio_without_audit'), '.2f')}x without)",
        f"latency: tier-1 p50 {f(s['tier1_latency_us_p50'], '.1f')} µs (in-stream, measured)   reference p50 "
        f"{f(s['reference_latency_ms_p50'], '.0f')} ms" + (" (simulated draws, not slept)" if s.get("reference_latency_simulated") else ""),
    ]
    ss = s.get("steady_state")
    if ss:
        lines.append(f"steady state (last {ss['items']} items): tier-1 {f(ss['tier1_share'], '.1%')}, "
                     f"{f(ss['usd_micros_per_item'], '.1f')} µ$/item vs control {f(ss['control_usd_micros_per_item'], '.1f')} "
                     f"({f(ss['cost_share_of_control'], '.1%')} of it)")
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
        rl = lb.get("ratchet")
        if rl:
            dc = rl["during_compile"]
            lines.append(
                f"ratchet request path: +{f(rl.get('overhead_us_p50'), '.2f')} µs p50 over TieredTask "
                f"({rl['ratchet']['p50']} vs {rl['tiered']['p50']} µs); tier-1 p99 {rl['idle']['p99']} µs idle, "
                f"{dc.get('p99')} µs during a {dc.get('compile_s')} s background compile ({dc.get('worker')}; "
                f"ratio {f(rl.get('p99_ratio'), '.2f')})")
    return "\n".join(lines)


def render_compile_summary(results: dict[str, Any]) -> str:
    """A short human table of a compile family's run (``extraction``, ``routing``)."""
    def f(v: Any, spec: str = ".3f") -> str:
        return "n/a" if v is None else format(v, spec)

    s = results
    lines = [f"family {s['family']}   reference model: {s['reference_model']}   inputs {s['inputs']} ({s['inputs_source']})",
             f"compiled as {s.get('compiled_as')}: {s.get('reason')}"]
    if s.get("compiled_as") not in (None, "refused"):
        what = "out-of-fold" if s.get("compiled_as") == "program" else "held-out"
        lines.append(f"{what} agreement {f(s.get('heldout_agreement'))} (95% CP low {f(s.get('heldout_agreement_ci95_low'))}, "
                     f"n {s.get('heldout_n')})   artifact {s.get('artifact_bytes')} bytes   tier-1 p50 "
                     f"{f(s.get('tier1_latency_us_p50'), '.1f')} µs")
    pr = s.get("program_rung") or {}
    if pr.get("parts") and (s.get("compiled_as") != "program" or len(pr["parts"]) > 1):
        lines.append("program rung out-of-fold agreement per field: " + ", ".join(
            f"{k or 'answer'} {v.get('agree')}/{v.get('n')}" for k, v in pr["parts"].items())
            + ("" if s.get("compiled_as") == "program" else f" ({pr.get('verdict')})"))
    sp = s.get("specialist") or {}
    if sp.get("compiled"):
        lines.append(f"beside: specialist ({sp.get('estimator')}) held-out {f(sp.get('heldout_agreement'))} "
                     f"(95% CP low {f(sp.get('heldout_agreement_ci95_low'))})   {sp.get('artifact_bytes')} bytes   "
                     f"tier-1 p50 {f(sp.get('tier1_latency_us_p50'), '.1f')} µs")
    elif sp:
        lines.append(f"beside: specialist refused: {sp.get('reason')}")
    for key, title in (("fresh_heldout", "fresh held-out"), ("hard_heldout", "harder held-out (new phrasings)"),
                       ("ood", "out-of-distribution probes"), ("eval_inputs", "--eval-inputs")):
        v = s.get(key)
        if v:
            lines.append(f"{title}: {v['tier1']}/{v['n']} tier-1 ({f(v['tier1_share'], '.1%')}), silent-wrong "
                         f"{v['tier1_wrong']}/{v['tier1']} = {f(v['silent_wrong'], '.2%')} (95% upper {f(v['silent_wrong_ci95_high'], '.2%')})"
                         + (f"; the guard declined {v['guard_declined']} program answers, {v['guard_declined_would_be_wrong']} of them wrong"
                            if v.get("guard_declined") else ""))
    if s.get("program"):
        lines.append("program:")
        lines += ["  " + ln for ln in s["program"].splitlines()]
    return "\n".join(lines)
