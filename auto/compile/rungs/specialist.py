"""The specialist rung: distill a small classifier from the witnesses, calibrate its guard, gate it.

1. distinct inputs with their modal outputs (a divergent input contributes its modal output
   weighted by its share);
2. a deterministic split of distinct inputs (stratified by label) into training, calibration and
   held-out sets (fractions from the contract);
3. distill candidates on the training set and select on the calibration set
   (:func:`auto.distill.distill`);
4. lower the winner to WebAssembly and load it in the sandbox; with ``memo_first`` the artifact
   answers the training and calibration inputs from an exact-match table in front of the
   specialist (held-out inputs stay out of the table, so the gate measures the specialist on
   inputs it never saw);
5. calibrate the guard stack (:mod:`auto.guards`) on the calibration split, from the artifact's
   own outputs: conformal novelty on the nonconformity scores, and selective risk
   (Learn-then-Test) on the ``(margin, correct)`` pairs, where correct = the artifact's answer
   equals the witnessed (modal) reference answer; then measure the stack's coverage and
   selective risk on the held-out split. Novelty and risk use the *same* calibration points, not
   disjoint halves: certifying ``epsilon = 0.05`` at ``delta = 0.1`` needs at least 45 proceeding
   points even with no errors (``(1 - epsilon)^n <= delta``), and halving a calibration split of
   ~80 would make the certificate unreachable. Sharing is sound here because the novelty
   component uses no labels, and the risk is calibrated only on the points novelty passes, each
   judged against the other ``n - 1`` scores (leave-one-out, as a fresh input would be), so the
   certificate is about the stack's own proceed event. If no threshold controls the risk, the
   guard always deopts and its ``fallback_reason`` says why; the gate still judges the answers;
6. run the gate on every witnessed input and the held-out set *as WebAssembly*; store the eval
   run (either way); on a pass emit the generation.
"""

from __future__ import annotations

import json
import time
from typing import Any

from auto_runtime import Artifact

from auto.canonical import canonical_json, digest_bytes
from auto.codegen import TableModel, compile_model
from auto.codegen.table import HIT_MARGIN
from auto.compile.context import RungContext
from auto.compile.generation import CompileOutcome, emit_generation
from auto.compile.manifest import ManifestDraft
from auto.compile.measure import call_latency_us
from auto.compile.witnesses import WitnessSet, input_schema, split_three
from auto.distill import distill
from auto.emit import emit
from auto.errors import CompileError, RungRefused
from auto.guards.stack import calibrate_stack, without_scores
from auto.verify import Contract, run_gate

NAME = "specialist"


def _not_attempted(ctx: RungContext, contract: Contract, reason: str, checks: list[dict[str, Any]]) -> RungRefused:
    r = ctx.refuse(NAME, contract, reason, checks)
    r.citation = f"specialist not attempted (eval run {r.eval_run_id}: {reason})"
    return r


def calibrate_guard_stack(cal_out: list[dict[str, Any]], cal_reference: list[Any], held_out: list[dict[str, Any]],
                          held_reference: list[Any], contract: Contract, reason: str | None = None,
                          notes: list[str] | None = None) -> dict[str, Any]:
    """The specialist's guard stack from the artifact's outputs on the calibration and held-out splits.

    Args:
        cal_out, held_out: ABI outputs (``{"answer", "margin", "nonconformity"}``; an ``error``
            output never proceeds) of the specialist on the calibration / held-out inputs.
        cal_reference, held_reference: the witnessed (modal) reference answers, same order.
        contract: gives ``alpha``, ``epsilon`` and ``delta``.
        reason: a known reason the risk calibration is unusable (the stack then always deopts).
        notes: caveats recorded in the risk component and the statement (not fatal).

    Returns:
        The manifest ``guard`` entry (:func:`auto.guards.stack.calibrate_stack`).
    """

    def cols(outs: list[dict[str, Any]], ref: list[Any]) -> tuple[list[Any], list[Any], list[bool]]:
        ok = ["error" not in o for o in outs]
        return ([o.get("nonconformity") if k else None for o, k in zip(outs, ok)],
                [o.get("margin") if k else None for o, k in zip(outs, ok)],
                [k and canonical_json(o.get("answer")) == canonical_json(r) for o, r, k in zip(outs, ref, ok)])

    cs, cc, cy = cols(cal_out, cal_reference)
    hs, hc, hy = cols(held_out, held_reference)
    return calibrate_stack(cs, cc, cy, hs, hc, hy, alpha=contract.alpha, epsilon=contract.epsilon, delta=contract.delta,
                           reason=reason, notes=notes)


def compile_rung(ws: WitnessSet, contract: Contract, ctx: RungContext) -> CompileOutcome:
    """Distill, calibrate, gate and emit a specialist generation (memo-first with ``ctx.memo_first``).

    Raises:
        RungRefused: too few witnesses, open-ended outputs (both: the memo rung may follow), a
            single label or too few witnesses per label to split (final: nothing below helps), or
            the gate refused (the eval run is stored and cited either way).
        CompileError, CodegenError: a stage failed for a reason other than the gate.
    """
    timings: dict[str, float] = {}
    items = list(ws.items)
    n = len(items)
    if n < contract.min_witnesses:
        reason = f"only {n} distinct witnessed inputs; the specialist needs {contract.min_witnesses}"
        r = _not_attempted(ctx, contract, reason,
                           [{"name": "enough-witnesses", "n": n, "min": contract.min_witnesses, "passed": False}])
        r.final = n == 0
        raise r
    label_keys = [canonical_json(it[1]) for it in items]
    labels = sorted(set(label_keys))
    if len(labels) < 2:
        raise ctx.refuse(NAME, contract, f"every witness has the same output {labels[0]}; nothing to classify "
                         "(a constant is not compiled as a specialist)",
                         [{"name": "two-or-more-labels", "labels": len(labels), "passed": False}], final=True)
    if len(labels) > max(2, n // 2):
        reason = (f"{len(labels)} distinct outputs for {n} distinct inputs: most outputs are unique, so a classifier over "
                  "witnessed labels cannot generalize (open-ended outputs need the program rung)")
        raise _not_attempted(ctx, contract, reason,
                             [{"name": "outputs-are-labels", "labels": len(labels), "n": n, "passed": False}])

    train_idx, cal_idx, held_idx = split_three([it[1] for it in items], contract.heldout_fraction,
                                               contract.calibration_fraction, contract.seed, max_strata=None)
    if not held_idx or not cal_idx:
        raise ctx.refuse(NAME, contract, "too few witnesses per label to hold out a calibration and a held-out set",
                         [{"name": "splits-nonempty", "heldout": len(held_idx), "calibration": len(cal_idx),
                           "passed": False}], final=True)
    ctx.say(f"  {n} distinct inputs, {len(labels)} labels: train {len(train_idx)}, calibration {len(cal_idx)}, "
            f"held-out {len(held_idx)}")

    # distill (selection on the calibration set)
    t0 = time.perf_counter()
    dres = distill([items[i] for i in train_idx], heldout=[items[i] for i in cal_idx], seed=contract.seed)
    model = dres.model
    timings["distill"] = time.perf_counter() - t0
    ctx.say(f"  distilled: {dres.selected.model} over {model.features.n_min}-{model.features.n_max}-grams, "
            f"calibration agreement {dres.selected.heldout_agreement:.3f}")

    # codegen → sandbox
    t0 = time.perf_counter()
    code = compile_model(model)
    timings["codegen"] = time.perf_counter() - t0
    draft = ManifestDraft(
        task=ctx.task, generation=ctx.generation, compiled_as="specialist",
        interface={"input": input_schema([it[0] for it in items]), "output": {"enum": [json.loads(x) for x in labels]}},
        model={"kind": model.kind, "estimator": model.estimator, "classes": [json.loads(c) for c in model.classes],
               "features": model.features.to_dict(), "prototypes": int(model.P.shape[0]), "code_digest": digest_bytes(code)})
    provisional = Artifact.load(emit(code, draft.provisional()))

    # calibrate the guard stack (scores, margins and answers computed by the artifact itself)
    t0 = time.perf_counter()
    cal_out = provisional.call_batch([items[i][0] for i in cal_idx])
    if any("error" in o for o in cal_out):
        raise CompileError("the candidate returned errors on calibration inputs")
    if ctx.memo_first:
        # the table holds train + calibration witnesses; calibration scores above came from the
        # specialist alone, which is exactly the path a new (non-table) input takes
        table = TableModel([(items[i][0], items[i][1]) for i in sorted(train_idx + cal_idx)], fallback=model)
        code = compile_model(table)
        predictor: Any = table
        draft = draft.with_model(table.compiled_as, kind=table.compiled_as, table_entries=len(table),
                                 specialist_kind=model.kind, code_digest=digest_bytes(code))
        candidate = Artifact.load(emit(code, draft.provisional()))
    else:
        predictor = model
        candidate = provisional
    # held-out inputs are never in the table, so the specialist alone answers them in both forms
    held_out = provisional.call_batch([items[i][0] for i in held_idx])
    missing = sorted(set(labels) - {label_keys[i] for i in cal_idx})
    # A label absent from the calibration split is recorded, not fatal: the certificate is marginal
    # over inputs exchangeable with the calibration inputs, which a rare label does not invalidate;
    # making it fatal would make every task with one rare label always deopt.
    guard = calibrate_guard_stack(
        cal_out, [items[i][1] for i in cal_idx], held_out, [items[i][1] for i in held_idx], contract,
        notes=[f"{len(missing)} witnessed label(s) never occur in the calibration split ({', '.join(missing[:3])}"
               f"{', ...' if len(missing) > 3 else ''}): the certificate is marginal over all inputs and says nothing "
               "about answers of those labels in particular"] if missing else None)
    if ctx.memo_first and guard["fallback_reason"] is None:
        thr = guard["components"][-1]["threshold"]
        if thr is not None and thr > HIT_MARGIN:  # a table hit reports HIT_MARGIN (docs/architecture.md)
            note = (f"the certified margin threshold {thr:.9g} exceeds the margin {HIT_MARGIN} a table hit reports, so witnessed "
                    "(table) inputs deopt as well")
            guard["components"][-1]["notes"].append(note)
            guard["statement"] = f"{guard['statement']}; {note}"
    timings["calibrate"] = time.perf_counter() - t0

    # the gate, as WebAssembly
    t0 = time.perf_counter()
    record = run_gate(
        contract=contract,
        run_batch=candidate.call_batch,
        reference_predict=lambda inp: predictor.predict(inp).answer,
        witnessed=[(it[0], it[1]) for it in items],
        heldout=[(items[i][0], items[i][1]) for i in held_idx],
        labels=[json.loads(x) for x in labels],
        candidate={**draft.model, "sklearn_agreement": dres.sklearn_agreement,
                   "candidates": [{"model": c.model, "features": c.features.to_dict(), "train_agreement": c.train_agreement,
                                   "calibration_agreement": c.heldout_agreement} for c in dres.candidates]},
        generation=ctx.generation,
    )
    held_inputs = [items[i][0] for i in held_idx]
    lat = call_latency_us(candidate, held_inputs)
    record["guard"] = without_scores(guard)
    eval_id = ctx.store.put_eval_run(record)
    timings["gate"] = time.perf_counter() - t0
    if record["verdict"] != "pass":
        raise RungRefused(NAME, record["reason"], eval_id,
                          citation=f"specialist refused (eval run {eval_id}: {record['reason']})")

    checks = {c["name"]: c for c in record["checks"]}
    parity = {split: {k: checks[name][k] for k in ("n", "agree", "rate", "ci95_low")}
              for split, name in (("witnessed", "witnessed-agreement"), ("heldout", "heldout-agreement"))}
    return emit_generation(ctx, contract, draft, code, candidate, guard=guard, parity=parity, eval_runs=[eval_id],
                           reason=record["reason"], witnesses=ws.witnesses, distinct_inputs=n, fuel_inputs=held_inputs,
                           latency=lat, timings=timings, model=model, estimator=dres.estimator)
