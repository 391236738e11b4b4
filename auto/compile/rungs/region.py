"""The region rung: a task whose runs call tools or several models compiles across its steps.

1. the task's runs with their steps (:func:`auto.compile.steps.traces.read_task_traces`); a task
   whose runs have no tool call and at most one model call is not a region (the rung steps aside,
   and the ladder goes on); the task input must be one text field;
2. a deterministic split of the distinct inputs into *train* and *held-out* (the contract's
   ``heldout_fraction``, stratified by the tools a run calls); nothing of the held-out inputs is
   seen by any step;
3. :func:`auto.compile.steps.build.build_region` on the training runs: every value through the
   ladder's own program and memo rungs (each gated, each with its eval run and step artifact),
   templates, kept model calls, the commit before every effect;
4. lowering (:func:`auto.codegen.region_lower.compile_region`) and the hermetic gate
   (:func:`auto.compile.steps.gate.run_region_gate`): tools replayed from the recordings;
5. emit ``compiled_as: "region"`` with the three tool imports as ``capabilities``, ``tools``
   (declarations with their argument and result schemas and effects), ``tool_budget`` (the most
   calls any path makes; wall time :data:`BUDGET_WALL_MS`), the region's JSON and text in
   ``model``, the guard ``region-novelty`` (decided at the commit: :mod:`auto.guards.region`), and the cost of a tier-1 call: the
   kept model calls at their recorded mean cost.

A refusal of this rung is final when the task calls tools: a program of the whole task would
never call them (an effect would silently not happen), so no lower rung may answer for it.
Specialist steps are not lowered inside a region (a value the program and memo rungs refuse
refuses the region, naming the value).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from auto_runtime import Artifact, Limits
from auto_runtime.manifest import Manifest
from auto_runtime.errors import AutoError
from auto_runtime.tools import TOOL_IMPORTS, TOOL_MODULE, Replay

from auto.models import region as R
from auto.canonical import canonical_json, digest_bytes
from auto.codegen.region_lower import compile_region
from auto.compile.context import RungContext
from auto.compile.generation import CompileOutcome, emit_generation
from auto.compile.manifest import ManifestDraft
from auto.compile.rungs import memo as memo_rung
from auto.compile.rungs import program as program_rung
from auto.compile.steps.build import RegionRefused, ValueCompile, build_region, plan_summary
from auto.compile.steps.gate import group_by_input, run_region_gate
from auto.compile.steps.traces import read_task_traces
from auto.compile.steps.value_guard import evidence_guarded
from auto.compile.witnesses import WitnessSet
from auto.models.specialist.train import split_witnesses
from auto.errors import RungRefused
from auto.guards.region import path_of, region_guard_entry
from auto.models.program import ast as A
from auto.gate import CheckName, Contract, EvalRun, Verdict

NAME = "region"

GATE_TIMEOUT_MS = 10_000.0
"""Compute deadline of one call in the gate (ms): verification is off the request path, and a
machine under load must not turn a descheduled call into a refusal."""

BUDGET_WALL_MS = 30_000.0
"""Wall time in tools per call the manifest declares (ms): recorded tool calls of a simulated
reference report latencies in the hundreds of ms; a host tightens it with ``tool_budget``."""


class _Witness:
    __slots__ = ("input", "output", "trace_id")

    def __init__(self, inp: dict[str, Any], out: Any, trace_id: str) -> None:
        self.input, self.output, self.trace_id = inp, out, trace_id


def _table_program(field: str, entries: list[tuple[dict[str, Any], Any]]) -> A.Node | None:
    """A memo's entries as a DSL ``Lookup`` over the field (None when an answer is not a scalar or
    a record of scalars)."""
    def const(v: Any) -> A.Node | None:
        if v is None or isinstance(v, (str, bool, int)):
            return A.Const(v)
        if isinstance(v, dict) and all(x is None or isinstance(x, (str, bool, int)) for x in v.values()):
            return A.Record(tuple((k, A.Const(x)) for k, x in sorted(v.items())))
        return None
    table = []
    for inp, ans in entries:
        node = const(ans)
        if node is None:
            return None
        table.append((inp[field], node))
    return A.Lookup(A.Field(field), tuple(table), A.Deopt())


def _novelty_guard(art: Artifact, region: R.Region, train: list[dict[str, Any]], heldout: list[dict[str, Any]],
                   replay: Replay, alpha: float) -> dict[str, Any]:
    """The region's ``region-novelty`` guard entry (:func:`auto.guards.region.region_guard_entry`)
    from the commit records of the training and held-out inputs (tools answered by ``replay``;
    an input that deopts before its commit is left out: it never acts)."""
    def commits(inputs: list[dict[str, Any]]) -> list[tuple[int, str]]:
        out = []
        for inp in inputs:
            sess = art.new_session(replay=replay)
            try:
                art.call(inp, session=sess)
            except AutoError:
                continue
            pt = path_of(sess.commit_record, region.field)
            if pt is not None:
                out.append(pt)
        return out

    train_c = commits(train)
    if not train_c:
        raise RungRefused(NAME, "region rung: no training input reaches the region's commit (nothing to calibrate "
                                "the guard on)", final=True)
    return region_guard_entry(region.field, len(region.paths()), train_c, alpha, commits(heldout))


def applies(store: Any, task: str) -> bool:
    """Whether some recorded run of ``task`` calls a tool or several models (a region)."""
    traces, _ = read_task_traces(store, task)
    return any(t.tools or len(t.models) >= 2 for t in traces)


def compile_rung(ws: WitnessSet, contract: Contract, ctx: RungContext) -> CompileOutcome:
    """Compile the task as a region (module docstring).

    Raises:
        RungRefused: not a multi-step task (not final); otherwise a refusal naming the step or
            value at fault, final when the task calls tools.
    """
    t_start = time.perf_counter()
    traces, skipped = read_task_traces(ctx.store, ctx.task)
    multi = [t for t in traces if t.tools or len(t.models) >= 2]
    if not multi:
        raise RungRefused(NAME, "region rung not attempted: no run of the task calls a tool or several models")
    final = any(t.tools for t in traces)
    if len(multi) < len(traces):
        traces = multi
    keys = {tuple(sorted(t.input)) for t in traces}
    fields = sorted({k for t in traces for k, v in t.input.items() if isinstance(v, str)})
    if len(keys) != 1 or len(fields) != 1 or list(keys)[0] != tuple(fields):
        raise ctx.refuse(NAME, contract, f"region rung: a region reads exactly one text input field; the runs have "
                         f"input keys {sorted(keys)}", [{"name": "one-text-field", "passed": False}], final=final)
    field = fields[0]
    groups = group_by_input(traces, field)
    gkeys = list(groups)
    strata = ["|".join(t.name for t in groups[k][0].tools) for k in gkeys]
    train_i, held_i = split_witnesses(strata, contract.heldout_fraction, contract.seed)
    train = [t for i in train_i for t in groups[gkeys[i]]]
    heldout = [t for i in held_i for t in groups[gkeys[i]]]
    if len(train_i) < contract.min_witnesses or not held_i:
        raise ctx.refuse(NAME, contract, f"region rung: {len(train_i)} distinct training inputs and {len(held_i)} held "
                         f"out (needs {contract.min_witnesses} and at least one)",
                         [{"name": "enough-runs", "train": len(train_i), "heldout": len(held_i), "passed": False}],
                         final=final)
    ctx.say(f"  region rung: {len(traces)} runs over {len(groups)} distinct inputs (field {field!r}): train "
            f"{len(train_i)}, held-out {len(held_i)}" + (f"; {sum(skipped.values())} runs left out ({dict(skipped)})"
                                                          if skipped else ""))
    out_dir = Path(ctx.out_path).parent if ctx.out_path else Path(".")
    steps_dir = out_dir / f"{ctx.task}.gen{ctx.generation}.steps"

    def compile_value(label: str, pairs: list[tuple[dict[str, Any], Any]]) -> ValueCompile:
        vtask = f"{ctx.task}.{label}"
        tid = [t.trace_id for t in train]
        vws = WitnessSet.of(vtask, [_Witness(inp, out, t) for (inp, out), t in zip(pairs, tid)],
                            store_digest=ws.store_digest)
        vctx = RungContext(store=ctx.store, task=vtask, generation=ctx.generation,
                           out_path=steps_dir / f"{vtask}.gen{ctx.generation}.wasm", reference_model=ctx.reference_model,
                           say=lambda m: ctx.say("    " + m.strip()), memo_first=False, proposer=ctx.proposer)
        vcontract = contract.model_copy(update={"task": vtask})
        ctx.say(f"  value {label}: {vws.n} distinct inputs")
        for rung in (program_rung, memo_rung):
            try:
                out = rung.compile_rung(vws, vcontract, vctx)
            except RungRefused as r:
                vctx.prior.append(r)
                if r.final:
                    break
                continue
            if rung is program_rung:  # deopts where its own guard would
                m = Manifest.of(out.manifest)
                prog = evidence_guarded(out.model, m.model["evidence"], m.guard.fields)
            else:
                prog = _table_program(field, vws.consistent_entries())
                if prog is None:
                    vctx.prior.append(RungRefused("memo", "memo answers are not scalars or records of scalars"))
                    continue
            return ValueCompile(prog, Manifest.of(out.manifest).compiled_as, out.reason, out.eval_run_id, out.artifact_id)
        return ValueCompile(None, "refused", "; ".join(r.citation for r in vctx.prior) or "refused")

    t0 = time.perf_counter()
    try:
        plan = build_region(ctx.task, field, train, compile_value, min_share=contract.program_min_agreement, say=ctx.say)
    except RegionRefused as e:
        raise ctx.refuse(NAME, contract, f"region rung: {e.reason}", [{"name": "region-built", "passed": False,
                                                                       "reason": e.reason}], final=final) from None
    timings = {"build": time.perf_counter() - t0}
    ctx.say("  region:\n" + R.render(plan.region, "    "))
    t0 = time.perf_counter()
    code = compile_region(plan.region)
    timings["codegen"] = time.perf_counter() - t0
    budget = {"calls": max(1, plan.region.max_calls()), "wall_ms": BUDGET_WALL_MS}
    caps = tuple({"module": TOOL_MODULE, "name": n} for n in TOOL_IMPORTS)
    summary = plan_summary(plan)
    draft = ManifestDraft(
        task=ctx.task, generation=ctx.generation, compiled_as="region",
        interface={"input": {"type": "object", "properties": {field: {"type": "string"}}, "required": [field],
                             "additionalProperties": False},
                   "output": {"fields": sorted({k for t in traces for k in (t.output if isinstance(t.output, dict) else {"answer": 0})})}},
        model={"kind": "region", "field": field, "region": R.to_json(plan.region), "text": R.render(plan.region),
               "region_digest": digest_bytes(canonical_json(R.to_json(plan.region)).encode()),
               "values": summary["values"], "compiled_sites": plan.compiled_sites, "notes": plan.notes,
               "code_digest": digest_bytes(code)},
        capabilities=caps,
        extra={"tools": plan.tools, "tool_budget": budget,
               "abi": {"exports": ["memory", "alloc", "run"], "encoding": "canonical-json"}})
    from auto.emit import emit

    art = Artifact.load(emit(code, draft.provisional()), limits=Limits(timeout_ms=GATE_TIMEOUT_MS))
    t0 = time.perf_counter()
    record, h_runs = run_region_gate(contract=contract, artifact=art, plan=plan, train=train, heldout=heldout,
                                     candidate={k: v for k, v in draft.model.items() if k not in ("region",)},
                                     generation=ctx.generation, say=ctx.say)
    all_recs = [r for t in train + heldout for r in plan.recordings(t)]
    guard = _novelty_guard(art, plan.region, [groups[gkeys[i]][0].input for i in train_i],
                           [groups[gkeys[i]][0].input for i in held_i], Replay(all_recs), contract.alpha)
    ctx.say(f"  region guard: {guard['n']} training inputs over {len(guard['paths'])} paths; held-out deopted by "
            f"novelty {guard.get('heldout', {}).get('deopted')} of {guard.get('heldout', {}).get('n')}")
    record["guard"] = guard
    eval_id = ctx.store.put_eval_run(record)
    timings["gate"] = time.perf_counter() - t0
    run = EvalRun.from_record(record)
    if run.verdict is not Verdict.PASS:
        raise RungRefused(NAME, f"region rung: {run.reason}", eval_id, final=final)
    split_checks = {"witnessed": run.check(CheckName.WITNESSED_AGREEMENT), "heldout": run.check(CheckName.HELDOUT_AGREEMENT)}
    parity = {split: {k: c.get(k) for k in ("n", "agree", "rate", "ci95_low", "answered", "precision", "coverage")}
              for split, c in split_checks.items()}
    parity["fields"] = {f: {k: c.get(k) for k in ("n", "agree", "rate", "ci95_low")} for f, c in run.field_checks().items()}
    by_key = {canonical_json({field: t.input[field]}): t for t in heldout}

    def sessions(inp: dict[str, Any]) -> Any:
        own = by_key.get(canonical_json(inp))
        return art.new_session(replay=Replay((plan.recordings(own) if own else []) + all_recs))

    fuel_inputs = [{field: by_key[r.key].input[field]} for r in h_runs if r.answered][:50]
    lat = []
    for inp in fuel_inputs[:50]:
        s = sessions(inp)
        t1 = time.perf_counter_ns()
        art.call(inp, session=s)
        lat.append((time.perf_counter_ns() - t1) / 1000.0)
    costs = [m.cost_usd_micros for m in plan.models]
    cost = None if any(c is None for c in costs) else round(sum(costs), 3)
    timings["total"] = time.perf_counter() - t_start
    ctx.say(f"  region gate: {record['reason']}")
    return emit_generation(ctx, contract, draft, code, art, guard=guard, parity=parity, eval_runs=[eval_id],
                           reason=record["reason"], witnesses=ws.witnesses, store_digest=ws.store_digest,
                           distinct_inputs=len(groups), fuel_inputs=fuel_inputs, latency=lat, timings=timings,
                           model=plan, fuel_sessions=sessions, cost_usd_micros_per_call=cost)
