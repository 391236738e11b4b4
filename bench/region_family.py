"""``auto bench run inbox|assistant``: families whose runs are several model calls and tool calls.

One run:

1. **inputs** — the family's seeded training corpus, or the user's own traffic (``--inputs``);
2. **record** — the reference agent twice over every input into ``store.sqlite`` (model calls and
   tool calls as linked spans; the simulator unless ``OPENAI_BASE_URL`` is set);
3. **census** — per site (each model call's prompt template and each tool), mapped to the
   family's steps, and per step on the value the agent used (the label after its normalization);
4. **compile** — :func:`auto.compile.compile_task`: the region rung (values through the program
   and memo rungs, tool calls kept as calls, the generative step kept as a declared model call),
   the hermetic gate;
5. **verify** — on fresh inputs never recorded (the corpus's held-out slice, or ``--eval-inputs``)
   and on out-of-distribution probes: each served through :class:`auto_runtime.TieredTask` with
   the family's real tools (a deopt runs the reference agent), and beside it two fresh reference
   runs (the control and a second sample: excess silent-wrong per step,
   :func:`auto.guards.parity.excess_disagreement`); wrong tool calls at tier-1; effectful tool
   calls made on inputs that deopted (must be zero); cost and latency per run, served vs control,
   from the recorded spans (µ$ from reported usage and the price table);
6. **hostile cases** (:mod:`bench.capability_cases`) — each a row: how the capability contract
   ends each attack (a refusal at load, or a clean deopt with its reason, no tool run outside its
   declaration).

Writes ``results.json``, the stores and the artifacts into ``--out``.
"""

from __future__ import annotations

import json
import statistics
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Callable

from auto.errors import ArgumentError, GateRefused

from bench.run import _fresh_store, _read_stream, reference_endpoint

REGION_FAMILIES = ("inbox", "assistant")


def _serving(family: str) -> Any:
    if family == "inbox":
        from bench.inbox import serving
    elif family == "assistant":
        from bench.assistant import serving
    else:
        raise ArgumentError(f"{family!r} is not a region family ({', '.join(REGION_FAMILIES)})")
    return serving


def _pct(xs: list[float], q: int) -> float | None:
    if not xs:
        return None
    if len(xs) == 1:
        return round(xs[0], 2)
    return round(statistics.quantiles(xs, n=100, method="inclusive")[q - 1], 2)


def _step_census(traces: list[Any], field: str, serving: Any) -> dict[str, Any]:
    """Per step, over the inputs recorded more than once: were the step's values all equal?"""
    from auto.canonical import canonical_json

    seen: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    runs: Counter = Counter()
    for t in traces:
        key = canonical_json(t.input.get(field))
        runs[key] += 1
        calls = [{"tool": s.name, "arguments": s.arguments} for s in t.tools]
        for step, v in serving.step_values(t.output, calls).items():
            seen[step][key].add(canonical_json(v))
    out = {}
    for step in serving.STEPS:
        repeated = [k for k in runs if runs[k] >= 2]
        same = sum(1 for k in repeated if len(seen[step][k]) == 1)
        out[step] = {"repeated_inputs": len(repeated), "consistent": same,
                     "share": same / len(repeated) if repeated else None}
    return out


def _site_census(store: Any, serving: Any) -> list[dict[str, Any]]:
    from auto.census import census

    spans = store.spans()
    step_of: dict[str, str | None] = {}
    for s in spans:
        site = s.get("site") or f"{s.get('task') or ''}/{s['name']}"
        if site not in step_of:
            step_of[site] = serving.site_step(s) if s["kind"] != "task" else "task"
    cen = census(spans, model_call_sites=False)  # per recorded site: each step's own site
    rows = []
    for site in cen.sites:
        d = site.to_dict()
        d["step"] = step_of.get(site.site)
        d["share"] = d["deterministic_spans"] / d["spans"] if d["spans"] else None
        rows.append(d)
    return rows


def _cost_of(store: Any, name: str) -> dict[str, dict[str, Any]]:
    """Per served input (the task span ``name``'s input text key): cost (µ$) and reported latency (ms)."""
    from auto.canonical import canonical_json

    out = {}
    for s in store.spans(kind="task"):
        if s["name"] != name:
            continue
        a = s.get("attributes") or {}
        out[canonical_json(s["input"])] = {"cost": a.get("auto.cost_usd_micros"), "latency_ms": a.get("auto.latency_ms"),
                                           "llm_calls": a.get("auto.llm_calls")}
    return out


def serve_and_compare(fam: Any, serving: Any, wasm: bytes, texts: list[str], *, out_dir: Path, tag: str,
                      say: Callable[[str], None]) -> dict[str, Any]:
    """Serve ``texts`` through the tiered runtime with the real tools, beside two fresh reference runs.

    Returns:
        The split's figures: tier-1 share, per-step excess silent-wrong, wrong tool calls at tier-1,
        effectful calls on deopted inputs, deopt reasons, cost and latency per run.
    """
    import auto
    from auto_runtime import Artifact, TieredTask

    from auto.canonical import canonical_json
    from auto.guards.parity import excess_disagreement
    from auto.gate import clopper_pearson

    field = fam.field
    control_store = _fresh_store(out_dir / f"{tag}.control.sqlite")
    served_store = _fresh_store(out_dir / f"{tag}.served.sqlite")
    # control: a fresh reference run per input (recorded, for its cost) and a second sample (not recorded)
    control: list[tuple[Any, list]] = []
    with auto.recording(control_store):
        for x in texts:
            with auto.task("control", input={field: x}) as span:
                answer, calls = serving.reference(x)
                span.output = answer
            control.append((answer, calls))
    second = [serving.reference(x) for x in texts]
    art = Artifact.load(wasm)
    tools = serving.host_tools(art.manifest.get("tools") or [])
    deopt_calls: dict[str, list] = {}

    def reference(inp: dict[str, Any]) -> Any:
        answer, calls = serving.reference(inp[field])
        deopt_calls[inp[field]] = calls
        return answer

    tt = TieredTask(art, reference, tools=tools)
    results = []
    with auto.recording(served_store):
        for x in texts:
            with auto.task("served", input={field: x}) as span:
                r = tt({field: x})
                span.output = r.answer
            results.append(r)
    # latency: a second, unrecorded pass over the inputs served at tier-1 (warm; tools and kept model calls included)
    warm: list[float] = []
    for x, r in zip(texts, results):
        if r.tier == "tier-1":
            warm.append(tt({field: x}).latency_us)
    cost_c, cost_s = _cost_of(control_store, "control"), _cost_of(served_store, "served")
    control_store.close()
    served_store.close()
    rows = []
    for x, r, (c_ans, c_calls), (s_ans, s_calls) in zip(texts, results, control, second):
        if r.tier == "tier-1":
            calls = [{"tool": c["tool"], "arguments": c["arguments"]} for c in (r.tool_calls or [])
                     if c.get("kind") == "tool"]
        else:
            calls = deopt_calls.get(x, [])
        rows.append({"input": x, "tier": r.tier, "reason": r.reason, "latency_us": r.latency_us,
                     "served": serving.step_values(r.answer, calls), "control": serving.step_values(c_ans, c_calls),
                     "second": serving.step_values(s_ans, s_calls),
                     "effects_before_deopt": sum(1 for c in (r.tool_calls or []) if r.tier != "tier-1" and c.get("live")
                                                 and c.get("effects") == "effect" and c.get("error") is None),
                     "cost": (cost_s.get(canonical_json({field: x})) or {}).get("cost"),
                     "control_cost": (cost_c.get(canonical_json({field: x})) or {}).get("cost"),
                     "latency_ms": (cost_s.get(canonical_json({field: x})) or {}).get("latency_ms"),
                     "llm_calls": (cost_s.get(canonical_json({field: x})) or {}).get("llm_calls"),
                     "control_llm_calls": (cost_c.get(canonical_json({field: x})) or {}).get("llm_calls"),
                     "control_latency_ms": (cost_c.get(canonical_json({field: x})) or {}).get("latency_ms")})
    t1 = [row for row in rows if row["tier"] == "tier-1"]
    n = len(rows)
    steps = {}
    for step in serving.STEPS:
        steps[step] = excess_disagreement([row["served"][step] for row in t1], [row["control"][step] for row in t1],
                                          [row["second"][step] for row in t1])
        steps[step]["generative"] = step in serving.GENERATIVE
    wrong = None
    if "tool" in serving.STEPS:
        k = sum(1 for row in t1 if canonical_json([row["served"]["tool"], row["served"]["arguments"]])
                != canonical_json([row["control"]["tool"], row["control"]["arguments"]]))
        lo, hi = clopper_pearson(k, len(t1))
        wrong = {"tier1": len(t1), "wrong_calls": k, "rate": k / len(t1) if t1 else None, "ci95_high": hi}
    costs = [row["cost"] for row in rows if row["cost"] is not None]
    ccosts = [row["control_cost"] for row in rows if row["control_cost"] is not None]
    lat = [row["latency_us"] for row in t1]
    out = {
        "n": n, "tier1": len(t1), "tier1_share": len(t1) / n if n else None,
        "tier1_ci95_low": clopper_pearson(len(t1), n)[0] if n else None,
        "steps": steps, "tool_calls": wrong,
        "effectful_calls_on_deopted_inputs": sum(row["effects_before_deopt"] for row in rows),
        "deopts": n - len(t1),
        "deopt_reasons": dict(Counter(row["reason"].split(":")[0] if row["tier"] != "tier-1" else "tier-1"
                                      for row in rows).most_common(8)),
        "cost_usd_micros_per_run": {"served": round(sum(costs) / len(costs), 3) if costs else None,
                                    "reference": round(sum(ccosts) / len(ccosts), 3) if ccosts else None},
        "tier1_latency_us": {"p50": _pct(lat, 50), "p95": _pct(lat, 95), "n": len(lat),
                             "what": "TieredTask call while recording, tools and kept model calls included (wall)"},
        "tier1_latency_us_warm": {"p50": _pct(warm, 50), "p95": _pct(warm, 95), "n": len(warm),
                                  "what": "the same inputs again, unrecorded (wall; a kept model call is an HTTP call)"},
        "reported_latency_ms_per_run": {"served_p50": _pct([r["latency_ms"] for r in rows if r["latency_ms"] is not None], 50),
                                        "reference_p50": _pct([r["control_latency_ms"] for r in rows
                                                               if r["control_latency_ms"] is not None], 50)},
    }
    c = out["cost_usd_micros_per_run"]
    out["cost_ratio"] = round(c["reference"] / c["served"], 3) if c["served"] and c["reference"] else None
    calls_s = [row["llm_calls"] for row in rows if row["llm_calls"] is not None]
    calls_c = [row["control_llm_calls"] for row in rows if row["control_llm_calls"] is not None]
    out["paid_calls_per_run"] = {"served": round(sum(calls_s) / len(calls_s), 3) if calls_s else None,
                                 "reference": round(sum(calls_c) / len(calls_c), 3) if calls_c else None}
    say(f"[verify:{tag}] tier-1 {len(t1)}/{n}; cost per run {c['served']} µ$ served vs {c['reference']} µ$ reference"
        + (f" ({out['cost_ratio']}x)" if out["cost_ratio"] else " (no paid call at tier-1)" if c["served"] == 0 else "")
        + f"; effectful calls on deopted inputs: {out['effectful_calls_on_deopted_inputs']}")
    return out


def run_region_family(family: str, *, out_dir: Path, inputs_path: Path | None = None, eval_path: Path | None = None,
                      seed: int = 0, progress: Callable[[str], None] | None = None, contract: Any = None,
                      train_limit: int | None = None, heldout_limit: int | None = None,
                      hostile: bool = True) -> dict[str, Any]:
    """Run the ``inbox`` or ``assistant`` family end to end (module docstring); write ``results.json``.

    Args:
        family: ``"inbox"`` or ``"assistant"``.
        out_dir: output folder (created).
        inputs_path: compile from these inputs (JSONL with the family's input field) instead of the
            generated training corpus.
        eval_path: verify on these inputs (JSONL) instead of the generated held-out slice.
        seed: corpus and simulator seed.
        progress: callback for human-readable lines.
        contract: the gate's :class:`auto.gate.Contract` (default: the task's default).
        train_limit, heldout_limit: use only the first N generated inputs (tests).
        hostile: run the hostile cases (:mod:`bench.capability_cases`).

    Raises:
        ArgumentError: not a region family, or a malformed inputs file.
    """
    import auto
    from auto.compile import compile_task
    from auto.compile.steps.traces import read_task_traces
    from bench.families import get_family

    say = progress or (lambda _m: None)
    serving = _serving(family)
    fam = get_family(family)
    data = fam.default_corpus(seed)
    texts = ([d[fam.field] for d in _read_stream(inputs_path, fam.field)[0]] if inputs_path is not None
             else [fam.text_of(it) for it in data["train"]])[:train_limit]
    evals = ([d[fam.field] for d in _read_stream(eval_path, fam.field)[0]] if eval_path is not None
             else [fam.text_of(it) for it in data["heldout"]])[:heldout_limit]
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.glob(f"{fam.task}.gen*.wasm"):
        old.unlink()
    results: dict[str, Any] = {"family": family, "inputs": len(texts),
                               "inputs_source": inputs_path.name if inputs_path else f"generated (seed {seed})",
                               "eval_source": eval_path.name if eval_path else f"generated held-out (seed {seed})"}
    if getattr(serving, "PUBLISHED", None):
        results["published"] = serving.PUBLISHED
    started = time.perf_counter()
    with reference_endpoint(seed) as ref_label:
        results["reference_model"] = ref_label
        say(f"reference model: {ref_label}")
        store = _fresh_store(out_dir / "store.sqlite")
        say(f"[record] the reference agent twice over {len(texts)} inputs")
        t0 = time.perf_counter()
        with auto.recording(store):
            for _ in range(2):
                for x in texts:
                    fam.run_agent(x)
        results["record_s"] = round(time.perf_counter() - t0, 2)
        sites = _site_census(store, serving)
        traces, _skipped = read_task_traces(store, fam.task)
        spans = sum(s["spans"] for s in sites)
        det = sum(s["deterministic_spans"] for s in sites)
        results["census"] = {"spans": spans, "deterministic_spans": det, "headline": det / spans if spans else None,
                             "sites": sites, "steps": _step_census(traces, fam.field, serving)}
        say(f"[census] {det}/{spans} spans witnessed-deterministic; per step (values the agent used): "
            + ", ".join(f"{k} {v['share']:.1%}" for k, v in results["census"]["steps"].items() if v["share"] is not None))
        t0 = time.perf_counter()
        outcome = None
        try:
            outcome = compile_task(store, fam.task, contract=contract, out_path=out_dir / f"{fam.task}.gen1.wasm",
                                   reference_model=ref_label, progress=say)
        except GateRefused as e:
            results.update({"compiled_as": "refused", "reason": e.reason, "eval_run_id": e.eval_run_id})
            say(f"[compile] refused: {e.reason}")
        results["compile_s"] = round(time.perf_counter() - t0, 2)
        if outcome is not None:
            m = outcome.typed_manifest
            model = m.model or {}
            results.update({
                "compiled_as": m.compiled_as, "reason": outcome.reason, "eval_run_id": outcome.eval_run_id,
                "artifact_id": outcome.artifact_id, "artifact_bytes": outcome.artifact_bytes,
                "region": model.get("text"), "values": model.get("values"), "notes": model.get("notes"),
                "tools": [{"name": t.name, "kind": t.kind, "effects": t.effects} for t in m.tools],
                "tool_budget": m.tool_budget, "parity": m.parity, "fuel_per_call": m.fuel_per_call,
                "cost_usd_micros_per_call": m.cost_usd_micros_per_call,
            })
            say(f"[compile] {m.compiled_as}: {outcome.reason}")
            results["heldout"] = serve_and_compare(fam, serving, outcome.wasm, evals, out_dir=out_dir, tag="heldout", say=say)
            ood = [fam.text_of(it) for it in data.get("ood") or []]
            if ood and eval_path is None:
                results["ood"] = serve_and_compare(fam, serving, outcome.wasm, ood, out_dir=out_dir, tag="ood", say=say)
            if hostile:
                from bench.capability_cases import run_cases

                results["hostile_cases"] = run_cases(family, outcome.wasm, store, traces, serving, evals[:60])
                say(f"[hostile] {sum(1 for r in results['hostile_cases'] if r['contained'])}/"
                    f"{len(results['hostile_cases'])} cases contained")
        store.close()
    results["wall_s"] = round(time.perf_counter() - started, 2)
    (out_dir / "results.json").write_text(json.dumps(results, indent=2, sort_keys=True, ensure_ascii=False) + "\n",
                                          encoding="utf-8")
    return results


def render_region_summary(results: dict[str, Any]) -> str:
    """A short human report of a region family's run (stderr)."""
    def f(v: Any, spec: str = ".1%") -> str:
        return "n/a" if v is None else format(v, spec)

    s = results
    lines = [f"family {s['family']}   reference model: {s['reference_model']}   inputs {s['inputs']} ({s['inputs_source']})"]
    pub = (s.get("published") or {}).get("census") or {}
    steps = (s.get("census") or {}).get("steps") or {}
    lines.append("census per step (values the agent used; published beside): " + ", ".join(
        f"{k} {f(v['share'])}" + (f" [{f(pub[k])}]" if k in pub else "") for k, v in steps.items()))
    lines.append(f"compiled as {s.get('compiled_as')}: {s.get('reason')}")
    for key in ("heldout", "ood"):
        h = s.get(key)
        if not h:
            continue
        cost = h["cost_usd_micros_per_run"]
        ratio = f"{h['cost_ratio']}x" if h.get("cost_ratio") else ("no paid call at tier-1" if cost["served"] == 0 else "n/a")
        lines.append(f"{key}: tier-1 {h['tier1']}/{h['n']} ({f(h['tier1_share'])}); effectful calls on deopted inputs "
                     f"{h['effectful_calls_on_deopted_inputs']}; cost per run {cost['served']} µ$ vs {cost['reference']} µ$ "
                     f"({ratio}); paid model calls per run {h['paid_calls_per_run']['served']} vs "
                     f"{h['paid_calls_per_run']['reference']}")
        for step, e in h["steps"].items():
            lines.append(f"  {step:10s} tier-1 disagreement {f(e['tier1_disagreement'])}, reference self "
                         f"{f(e['reference_disagreement'])}, excess {f(e['excess'])} (95% high {f(e['excess_ci95_high'])})"
                         + ("  [generative: a kept model call]" if e.get("generative") else ""))
        if h.get("tool_calls"):
            tc = h["tool_calls"]
            lines.append(f"  wrong tool calls at tier-1: {tc['wrong_calls']}/{tc['tier1']} ({f(tc['rate'])}, 95% high "
                         f"{f(tc['ci95_high'])})")
    for row in s.get("hostile_cases") or []:
        lines.append(f"  hostile: {row['case']:38s} {row['outcome']}: {row['reason'][:110]}")
    if s.get("region"):
        lines.append("region:")
        lines += ["  " + ln for ln in s["region"].splitlines()]
    return "\n".join(lines)
