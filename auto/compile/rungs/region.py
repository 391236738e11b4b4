"""The region rung: a task whose runs call tools or several models compiles across its steps.

1. the task's runs with their steps, read once (:func:`read_region_runs`); a task whose runs have
   no tool call and at most one model call is not a region (the rung steps aside: a refusal that
   does not ``apply``, and the ladder goes on); the task input must be one text field;
2. (:func:`split_runs`) a deterministic split of the distinct inputs into *train* and *held-out* (the contract's
   ``heldout_fraction``, stratified by the tools a run calls); nothing of the held-out inputs is
   seen by any step;
3. :func:`auto.compile.steps.build.build_region` on the training runs: every value through the
   ladder's own program and memo rungs on the ladder's refusal loop (:class:`ValueLadder`; each
   gated, each with its eval run and step artifact), templates, kept model calls, the commit
   before every effect;
4. lowering (:func:`auto.codegen.region_lower.compile_region`) and the hermetic gate
   (:func:`gate_region`, :func:`auto.compile.steps.gate.run_region_gate`): tools replayed from the
   recordings; fuel and latency measured as every rung measures them
   (:mod:`auto.compile.measure`), each call replaying its tools (:func:`replay_sessions`);
5. (:func:`region_manifest`) emit ``compiled_as: "region"`` with the three tool imports as ``capabilities``, ``tools``
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
from collections import Counter
from dataclasses import dataclass, replace
from dataclasses import field as dc_field
from pathlib import Path
from typing import Any, Callable

from auto_runtime import Artifact, Limits
from auto_runtime.errors import AutoError
from auto_runtime.manifest import Capability, Interface
from auto_runtime.tools import TOOL_IMPORTS, TOOL_MODULE, Replay

from auto.models import region as R
from auto.canonical import canonical_json, digest_bytes
from auto.codegen.region_lower import compile_region
from auto.compile.climb import Rung, climb
from auto.compile.context import RungContext
from auto.compile.generation import CompileOutcome, emit_generation
from auto.compile.manifest import ManifestDraft
from auto.compile.measure import call_latency_us
from auto.compile.rungs import memo as memo_rung
from auto.compile.rungs import program as program_rung
from auto.compile.steps.build import RegionPlan, RegionRefused, ValueCompile, build_region, plan_summary
from auto.compile.steps.gate import RegionRun, group_by_input, run_region_gate
from auto.compile.steps.traces import TaskTrace, read_task_traces
from auto.compile.steps.value_guard import evidence_guarded
from auto.compile.witnesses import WitnessSet
from auto.models.specialist.train import split_witnesses
from auto.errors import RungRefused
from auto.guards.region import path_of, region_guard_entry
from auto.models.program import ast as A
from auto.gate import Check, CheckName, Contract, EvalRun, Verdict

NAME = "region"

GATE_TIMEOUT_MS = 10_000.0
"""Compute deadline of one call in the gate (ms): verification is off the request path, and a
machine under load must not turn a descheduled call into a refusal."""

BUDGET_WALL_MS = 30_000.0
"""Wall time in tools per call the manifest declares (ms): recorded tool calls of a simulated
reference report latencies in the hundreds of ms; a host tightens it with ``tool_budget``."""

FUEL_INPUTS = 50
"""At most this many answered held-out inputs are fuel-measured and timed per compile (each call
replays its tools)."""


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


def _is_multi_step(t: TaskTrace) -> bool:
    """Whether a run calls a tool or several models (a region's run)."""
    return bool(t.tools) or len(t.models) >= 2


def applies(store: Any, task: str) -> bool:
    """Whether some recorded run of ``task`` calls a tool or several models (a region)."""
    traces, _ = read_task_traces(store, task)
    return any(_is_multi_step(t) for t in traces)


@dataclass
class RegionRuns:
    """The task's multi-step runs, read once per compile, grouped by distinct input and split.

    Attributes:
        traces: the runs that call a tool or several models (every run when all do).
        skipped: why runs were left out (:func:`auto.compile.steps.traces.read_task_traces`).
        final: a refusal is final (the task calls tools: no lower rung may answer for it).
        field: the one text input field.
        groups: runs by canonical input (:func:`auto.compile.steps.gate.group_by_input`).
        train_keys, heldout_keys: the split of ``groups``' keys (the contract's
            ``heldout_fraction``, stratified by the tools a run calls).
    """

    traces: list[TaskTrace]
    skipped: Counter
    final: bool
    field: str = ""
    groups: dict[str, list[TaskTrace]] = dc_field(default_factory=dict)
    train_keys: list[str] = dc_field(default_factory=list)
    heldout_keys: list[str] = dc_field(default_factory=list)

    @property
    def train(self) -> list[TaskTrace]:
        return [t for k in self.train_keys for t in self.groups[k]]

    @property
    def heldout(self) -> list[TaskTrace]:
        return [t for k in self.heldout_keys for t in self.groups[k]]

    def first_inputs(self, keys: list[str]) -> list[dict[str, Any]]:
        """The task input of each distinct input (its first run's)."""
        return [self.groups[k][0].input for k in keys]


def read_region_runs(ctx: RungContext) -> RegionRuns:
    """The task's runs (one read of its traces); steps aside (a refusal that does not apply) when
    no run calls a tool or several models."""
    traces, skipped = read_task_traces(ctx.store, ctx.task)
    multi = [t for t in traces if _is_multi_step(t)]
    if not multi:
        raise RungRefused(NAME, "region rung not attempted: no run of the task calls a tool or several models",
                          applies=False)
    return RegionRuns(multi, skipped, final=any(t.tools for t in traces))


def split_runs(runs: RegionRuns, contract: Contract, ctx: RungContext) -> RegionRuns:
    """``runs`` with their one text input field and their train / held-out split (module
    docstring, step 2); refuses a task whose runs read other inputs, or too few distinct inputs."""
    traces = runs.traces
    keys = {tuple(sorted(t.input)) for t in traces}
    fields = sorted({k for t in traces for k, v in t.input.items() if isinstance(v, str)})
    if len(keys) != 1 or len(fields) != 1 or list(keys)[0] != tuple(fields):
        raise ctx.refuse(NAME, contract, f"region rung: a region reads exactly one text input field; the runs have "
                         f"input keys {sorted(keys)}", [Check(CheckName.ONE_TEXT_FIELD, False)], final=runs.final)
    field = fields[0]
    groups = group_by_input(traces, field)
    gkeys = list(groups)
    strata = ["|".join(t.name for t in groups[k][0].tools) for k in gkeys]
    train_i, held_i = split_witnesses(strata, contract.heldout_fraction, contract.seed)
    if len(train_i) < contract.min_witnesses or not held_i:
        raise ctx.refuse(NAME, contract, f"region rung: {len(train_i)} distinct training inputs and {len(held_i)} held "
                         f"out (needs {contract.min_witnesses} and at least one)",
                         [Check(CheckName.ENOUGH_RUNS, False, {"train": len(train_i), "heldout": len(held_i)})],
                         final=runs.final)
    ctx.say(f"  region rung: {len(traces)} runs over {len(groups)} distinct inputs (field {field!r}): train "
            f"{len(train_i)}, held-out {len(held_i)}" + (f"; {sum(runs.skipped.values())} runs left out "
                                                          f"({dict(runs.skipped)})" if runs.skipped else ""))
    return replace(runs, field=field, groups=groups, train_keys=[gkeys[i] for i in train_i],
                   heldout_keys=[gkeys[i] for i in held_i])


class ValueLadder:
    """``compile_value`` of :func:`auto.compile.steps.build.build_region`: one value of the region
    through the ladder's program rung, then its memo rung (:attr:`rungs`: each gated, each with its
    eval run and step artifact), on the ladder's own refusal loop (:func:`auto.compile.climb.climb`).

    A value is a task of its own, ``<task>.<label>``, witnessed by the training runs' values; its
    step artifact is written beside the region's (``<task>.gen<N>.steps/``). A passing rung's
    outcome carries the value's program in ``model`` (a memo's entries as a ``Lookup``,
    :func:`_table_program`).
    """

    def __init__(self, ws: WitnessSet, contract: Contract, ctx: RungContext, field: str, train: list[TaskTrace]):
        self.ws, self.contract, self.ctx, self.field, self.train = ws, contract, ctx, field, train
        out_dir = Path(ctx.out_path).parent if ctx.out_path else Path(".")
        self.steps_dir = out_dir / f"{ctx.task}.gen{ctx.generation}.steps"
        self.rungs: list[tuple[str, Rung]] = [(program_rung.NAME, self.program_value),
                                              (memo_rung.NAME, self.memo_value)]

    def __call__(self, label: str, pairs: list[tuple[dict[str, Any], Any]]) -> ValueCompile:
        """The value ``label`` from its ``(input object, value)`` pairs, one per training run in
        order: the first rung's program that passes, or ``compiled_as: "refused"`` citing every
        refusal."""
        ctx = self.ctx
        vtask = f"{ctx.task}.{label}"
        vws = WitnessSet.of(vtask, [_Witness(inp, out, t.trace_id) for (inp, out), t in zip(pairs, self.train)],
                            store_digest=self.ws.store_digest)
        vctx = RungContext(store=ctx.store, task=vtask, generation=ctx.generation,
                           out_path=self.steps_dir / f"{vtask}.gen{ctx.generation}.wasm",
                           reference_model=ctx.reference_model, say=lambda m: ctx.say("    " + m.strip()),
                           memo_first=False, proposer=ctx.proposer)
        ctx.say(f"  value {label}: {vws.n} distinct inputs")
        out = climb(self.rungs, vws, self.contract.model_copy(update={"task": vtask}), vctx).outcome
        if out is None:
            return ValueCompile(None, "refused", "; ".join(r.citation for r in vctx.prior) or "refused")
        return ValueCompile(out.model, out.typed_manifest.compiled_as, out.reason, out.eval_run_id, out.artifact_id)

    def program_value(self, vws: WitnessSet, contract: Contract, vctx: RungContext) -> CompileOutcome:
        """The program rung on the value; its outcome's ``model`` is the program with the rung's own
        evidence guard in front of it (:func:`auto.compile.steps.value_guard.evidence_guarded`), so the
        value deopts inside the region exactly where the program's artifact would."""
        out = program_rung.compile_rung(vws, contract, vctx)
        m = out.typed_manifest
        return replace(out, model=evidence_guarded(out.model, m.model["evidence"], m.guard.fields))

    def memo_value(self, vws: WitnessSet, contract: Contract, vctx: RungContext) -> CompileOutcome:
        """The memo rung on the value, its entries as a ``Lookup`` program over the field; refuses
        when an answer is not a scalar or a record of scalars."""
        out = memo_rung.compile_rung(vws, contract, vctx)
        prog = _table_program(self.field, vws.consistent_entries())
        if prog is None:
            raise RungRefused(memo_rung.NAME, "memo answers are not scalars or records of scalars")
        return replace(out, model=prog)


def region_manifest(ctx: RungContext, runs: RegionRuns, plan: RegionPlan, code: bytes) -> ManifestDraft:
    """The region's manifest draft (module docstring, step 5)."""
    field = runs.field
    region_json = R.to_json(plan.region)
    out_fields = sorted({k for t in runs.traces for k in (t.output if isinstance(t.output, dict) else {"answer": 0})})
    return ManifestDraft(
        task=ctx.task, generation=ctx.generation, compiled_as="region",
        interface=Interface(input={"type": "object", "properties": {field: {"type": "string"}}, "required": [field],
                                   "additionalProperties": False},
                            output={"fields": out_fields}),
        model={"kind": "region", "field": field, "region": region_json, "text": R.render(plan.region),
               "region_digest": digest_bytes(canonical_json(region_json).encode()),
               "values": plan_summary(plan)["values"], "compiled_sites": plan.compiled_sites, "notes": plan.notes,
               "code_digest": digest_bytes(code)},
        capabilities=tuple(Capability(TOOL_MODULE, n) for n in TOOL_IMPORTS),
        extra={"tools": plan.tools, "tool_budget": {"calls": max(1, plan.region.max_calls()), "wall_ms": BUDGET_WALL_MS},
               "abi": {"exports": ["memory", "alloc", "run"], "encoding": "canonical-json"}})


@dataclass
class GatedRegion:
    """The region's candidate after its gate: the provisional artifact, the eval run (with the
    novelty guard in its ``extra``) and its stored id, the held-out runs, every recorded tool call."""

    artifact: Artifact
    run: EvalRun
    eval_run_id: str
    heldout_runs: list[RegionRun]
    recordings: list[dict[str, Any]]

    @property
    def guard(self) -> dict[str, Any]:
        return self.run.extra["guard"]


def gate_region(ctx: RungContext, contract: Contract, runs: RegionRuns, plan: RegionPlan, draft: ManifestDraft,
                code: bytes) -> GatedRegion:
    """Load the candidate, run the hermetic gate (:func:`auto.compile.steps.gate.run_region_gate`),
    calibrate the novelty guard, and store the eval run; refuses (with the stored eval run) when
    the gate does."""
    from auto.emit import emit

    art = Artifact.load(emit(code, draft.provisional()), limits=Limits(timeout_ms=GATE_TIMEOUT_MS))
    record, h_runs = run_region_gate(contract=contract, artifact=art, plan=plan, train=runs.train,
                                     heldout=runs.heldout,
                                     candidate={k: v for k, v in draft.model.items() if k not in ("region",)},
                                     generation=ctx.generation, say=ctx.say)
    recordings = [r for t in runs.train + runs.heldout for r in plan.recordings(t)]
    guard = _novelty_guard(art, plan.region, runs.first_inputs(runs.train_keys), runs.first_inputs(runs.heldout_keys),
                           Replay(recordings), contract.alpha)
    held = guard.get("heldout", {})
    ctx.say(f"  region guard: {guard['n']} training inputs over {len(guard['paths'])} paths; held-out deopted by "
            f"novelty {held.get('deopted')} of {held.get('n')}")
    run = EvalRun.from_record(record)
    run = replace(run, extra={**run.extra, "guard": guard})
    eval_id = ctx.store.put_eval_run(run.to_record())
    if run.verdict is not Verdict.PASS:
        raise RungRefused(NAME, f"region rung: {run.reason}", eval_id, final=runs.final)
    return GatedRegion(art, run, eval_id, h_runs, recordings)


def region_parity(run: EvalRun) -> dict[str, Any]:
    """The manifest's parity figures: the gate's witnessed and held-out agreement (every field at
    once) and each answer field's held-out agreement."""
    splits = {"witnessed": run.check(CheckName.WITNESSED_AGREEMENT), "heldout": run.check(CheckName.HELDOUT_AGREEMENT)}
    parity: dict[str, Any] = {
        split: {k: c.get(k) for k in ("n", "agree", "rate", "ci95_low", "answered", "precision", "coverage")}
        for split, c in splits.items()}
    parity["fields"] = {f: {k: c.get(k) for k in ("n", "agree", "rate", "ci95_low")} for f, c in run.field_checks().items()}
    return parity


def replay_sessions(gated: GatedRegion, plan: RegionPlan, runs: RegionRuns) -> Callable[[dict[str, Any]], Any]:
    """``sessions(input)``: a tool session replaying the input's own recorded run first, then
    every recording (fuel and latency are measured through it)."""
    by_key = {canonical_json({runs.field: t.input[runs.field]}): t for t in runs.heldout}

    def sessions(inp: dict[str, Any]) -> Any:
        own = by_key.get(canonical_json(inp))
        return gated.artifact.new_session(replay=Replay((plan.recordings(own) if own else []) + gated.recordings))
    return sessions


def compile_rung(ws: WitnessSet, contract: Contract, ctx: RungContext) -> CompileOutcome:
    """Compile the task as a region (module docstring).

    Raises:
        RungRefused: not a multi-step task (it steps aside: ``applies`` is False); otherwise a
            refusal naming the step or value at fault, final when the task calls tools.
    """
    t_start = time.perf_counter()
    runs = split_runs(read_region_runs(ctx), contract, ctx)
    t0 = time.perf_counter()
    try:
        plan = build_region(ctx.task, runs.field, runs.train, ValueLadder(ws, contract, ctx, runs.field, runs.train),
                            min_share=contract.program_min_agreement, say=ctx.say)
    except RegionRefused as e:
        raise ctx.refuse(NAME, contract, f"region rung: {e.reason}",
                         [Check(CheckName.REGION_BUILT, False, {"reason": e.reason})], final=runs.final) from None
    timings = {"build": time.perf_counter() - t0}
    ctx.say("  region:\n" + R.render(plan.region, "    "))
    t0 = time.perf_counter()
    code = compile_region(plan.region)
    timings["codegen"] = time.perf_counter() - t0
    draft = region_manifest(ctx, runs, plan, code)
    t0 = time.perf_counter()
    gated = gate_region(ctx, contract, runs, plan, draft, code)
    timings["gate"] = time.perf_counter() - t0
    sessions = replay_sessions(gated, plan, runs)
    fuel_inputs = [{runs.field: runs.groups[r.key][0].input[runs.field]}
                   for r in gated.heldout_runs if r.answered][:FUEL_INPUTS]
    lat = call_latency_us(gated.artifact, fuel_inputs, sessions=sessions)
    costs = [m.cost_usd_micros for m in plan.models]
    cost = None if any(c is None for c in costs) else round(sum(costs), 3)
    timings["total"] = time.perf_counter() - t_start
    ctx.say(f"  region gate: {gated.run.reason}")
    return emit_generation(ctx, contract, draft, code, gated.artifact, guard=gated.guard, parity=region_parity(gated.run),
                           eval_runs=[gated.eval_run_id], reason=gated.run.reason, witnesses=ws.witnesses,
                           store_digest=ws.store_digest, distinct_inputs=len(runs.groups), fuel_inputs=fuel_inputs,
                           latency=lat, timings=timings, model=plan, fuel_sessions=sessions,
                           cost_usd_micros_per_call=cost)
