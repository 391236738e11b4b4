"""The program rung: synthesize a DSL program from the witnesses, guard it, gate it as WebAssembly, emit.

1. the task's distinct witnessed inputs of the dominant shape with their modal outputs (at least
   ``contract.program_min_witnesses``, 20 by default), read through the main text field
   (:func:`auto.compile.witnesses.main_text_field`);
2. :func:`auto.compile.program_fit.fit_program`: the synthesis procedure is cross-fitted over
   ``contract.folds`` folds (5 when the contract leaves it to the data: each fold is a synthesis) (every witness is predicted by a program synthesized without it) and
   run once more on every witness for the deployed program; with few witnesses its complexity is
   chosen by cross-validation. The deployed program is wrapped in its witnessed-domain guard
   (:mod:`auto.models.program.domain`) and carries its evidence expression (:mod:`auto.models.program.evidence`:
   per part, the rule that decided it and the kind of evidence behind it);
3. the guard (:mod:`auto.guards.program`) is calibrated on the out-of-fold evidence: unwitnessed
   evidence deopts, a conformal novelty test per part, and a Learn-then-Test confidence threshold
   when there are enough points to certify ``contract.epsilon``;
4. :func:`auto.codegen.program_lower.compile_program` lowers program and evidence to one module,
   loaded in the sandbox;
5. the program gate (:func:`auto.gate.run_program_gate`): the artifact equals the Python
   interpreter on every witness (answer, deopt flag and evidence), the out-of-fold agreement and
   its lower bound reach the contract's bars, and the guard answers something (and certifies
   its risk when it can);
6. emit with ``compiled_as: "program"``, the program's JSON, evidence, digest, size and readable text
   in ``model``, and the ``program-evidence`` guard.
"""

from __future__ import annotations

import time
from typing import Any

from auto_runtime import Artifact
from auto_runtime.manifest import Interface

from auto.canonical import canonical_json, digest_bytes
from auto.codegen.program_lower import compile_program
from auto.compile.context import RungContext
from auto.compile.fields import categorical_fields
from auto.compile.generation import CompileOutcome, emit_generation
from auto.compile.manifest import ManifestDraft
from auto.compile.measure import call_latency_us
from auto.compile.program_fit import DEFAULT_FOLDS, FEW_SHOT_MAX, fit_program
from auto.compile.witnesses import MAX_STRATA, WitnessSet, input_schema, main_text_field
from auto.emit import emit
from auto.errors import RungRefused
from auto.models.program.interp import run_program
from auto.models.program.pretty import render, size
from auto.models.program.serial import program_digest, to_json
from auto.models.program.types import check
from auto.guards.program import calibrate_program_guard, without_calibration
from auto.gate import CheckName, Contract, EvalRun, Verdict, run_program_gate

NAME = "program"


def output_interface(program: Any, answers: list[Any]) -> dict[str, Any]:
    """The manifest's output interface of a program: its DSL type, and the record keys (with the
    witnessed values of each categorical field, :func:`auto.compile.fields.categorical_fields`:
    ``fields: {key: {"enum": [...]}}``) or the enum of witnessed answers where those describe it."""
    kind = check(program)
    out: dict[str, Any] = {"program_type": kind}
    if kind == "record":
        out["keys"] = sorted({k for a in answers if isinstance(a, dict) for k in a})
        out["fields"] = {k: {"enum": vals} for k, vals in categorical_fields(answers).items()}
    elif kind == "text" and len({canonical_json(a) for a in answers}) <= MAX_STRATA:
        out["witnessed_values"] = sorted({a for a in answers if isinstance(a, str)})
    return out


def _field_plan(res: Any) -> dict[str, dict[str, Any]]:
    """Per record key, how the per-field program computes it: ``{"how": "program" | "selective",
    "kind", "train_agreement", "answered"}`` (``selective``: answers the share ``answered`` of the
    training witnesses and deopts elsewhere; ``program``: answers wherever the record does)."""
    return {k: {"how": "selective" if f.kind == "selective" else "program", "kind": f.kind,
                "train_agreement": f.train_agreement, "answered": f.answered if f.kind == "selective" else None}
            for k, f in sorted(res.per_field.items()) if k}


def _part_reasons(res: Any) -> str:
    return "; ".join(f"field {k!r}: {f.reason}" for k, f in res.per_field.items() if f.program is None and k)


def compile_rung(ws: WitnessSet, contract: Contract, ctx: RungContext) -> CompileOutcome:
    """Synthesize, guard, gate and emit a program generation of the task.

    Returns:
        The :class:`~auto.compile.generation.CompileOutcome` of the emitted program generation.

    Raises:
        RungRefused: too few witnesses (nothing stored), no text field, a single output (a
            constant), no program found, or the program failed the gate (the eval run is stored and
            cited; its reason says which check failed and why, with the out-of-fold agreement per field).
        CompileError, CodegenError: a stage failed for a reason other than the gate.
    """
    items, _excluded = ws.dominant()
    if len(items) < contract.program_min_witnesses:
        raise RungRefused(NAME, f"program rung not attempted: only {len(items)} distinct witnessed inputs "
                                f"(needs {contract.program_min_witnesses}){ws.redacted_note()}")
    inputs = [it[0] for it in items]
    answers = [it[1] for it in items]
    field = main_text_field(inputs)
    if field is None:
        raise ctx.refuse(NAME, contract, "program rung: a program reads one text field; no field is a string in "
                         "every witness", [{"name": "one-text-field", "passed": False}])
    if len({canonical_json(a) for a in answers}) == 1:
        raise ctx.refuse(NAME, contract, f"program rung: every witness has the same output {canonical_json(answers[0])}; a "
                         "constant answers every input alike, so nothing in the witnesses can say where it stops applying",
                         [{"name": "two-or-more-outputs", "outputs": 1, "passed": False}])
    # a record compiles per field: a field with no program that fits answers only where it is precise
    # and deopts elsewhere (a record whose fields all fit compiles as it would whole)
    per_field = all(isinstance(a, dict) and a for a in answers)
    return _compile(ws, contract, ctx, items, field, per_field=per_field)


def _compile(ws: WitnessSet, contract: Contract, ctx: RungContext, items: list[Any], field: str, *,
             per_field: bool) -> CompileOutcome:
    """The rung on ``items``; ``per_field``: a record whose fields may deopt where unsure (when one
    does, the gate judges the records it answers)."""
    timings: dict[str, float] = {}
    inputs = [it[0] for it in items]
    answers = [it[1] for it in items]
    few = len(items) <= FEW_SHOT_MAX
    folds = contract.folds if contract.folds is not None else DEFAULT_FOLDS
    ctx.say(f"  program rung: {len(items)} distinct inputs over field {field!r}, {min(folds, len(items))}-fold "
            "cross-fit" + (" (few witnesses: the complexity is chosen by cross-validation)" if few else ""))
    t0 = time.perf_counter()
    fit = fit_program(items, field, folds=folds, seed=contract.seed, alpha=contract.alpha,
                      min_agreement=contract.program_min_agreement, proposer=ctx.proposer, say=ctx.say,
                      per_field=per_field)
    timings["synthesize"] = time.perf_counter() - t0
    final = fit.final
    parts = fit.part_agreement() if final.program is not None and fit.oof else {}
    oof = {"n": len(fit.oof), "agree": fit.agree, "compared": fit.compared, "method": f"{fit.folds}-fold out-of-fold",
           "parts": parts, "settings": fit.settings, "field_oof": fit.field_agreement()}
    selective = final.program is not None and any(f.kind == "selective" for f in final.synth.per_field.values())
    fields = _field_plan(final.synth) if selective else {}
    if selective:
        # the record answers where every field does; the gate judges the answered records (a
        # field's deopt sends the whole record to the reference, which is never wrong by the
        # definition of parity), and reports how many it answers
        oof.update({"selective": True, "answered": fit.answered, "fields": fields})
    res = final.synth
    # no wall times here: the eval run is content-addressed (its id is in the manifest), so two
    # compiles of the same witnesses give the same bytes; timings are in the outcome's timings_s
    synth_summary = {"train_agreement": res.train_agreement, "selection_agreement": res.heldout_agreement,
                     "candidates": res.candidates, "reason": res.reason,
                     "procedure": {"mdl_scale": fit.procedure.mdl_scale, "selection_split": fit.procedure.selection},
                     "out_of_fold": oof}
    if final.program is not None and not fit.oof:
        raise ctx.refuse(NAME, contract, "program rung: no procedure reaches the out-of-fold agreement "
                         f"{contract.program_min_agreement:.2f} ("
                         + "; ".join(f"mdl x{st['mdl_scale']:g}: {st['note'] or st['agree']}" for st in fit.settings) + ")",
                         [{"name": "out-of-fold-agreement", "passed": False, **synth_summary}])
    if final.program is None:
        per = _part_reasons(res)
        raise ctx.refuse(NAME, contract, f"program rung: no program found ({res.reason})",
                         [{"name": "program-synthesized", "passed": False, **synth_summary,
                           "fields": {k: {"reason": f.reason, "train_agreement": f.train_agreement}
                                      for k, f in res.per_field.items()}, "per_field_reasons": per}])
    program, evidence = final.guarded, final.evidence
    ctx.say(f"  synthesized a program of {size(final.program)} nodes ({size(program)} with its witnessed-domain guard), "
            f"out-of-fold agreement {fit.agree}/{len(fit.oof)}"
            + ("; per field " + ", ".join(f"{k}: {v['agree']}" for k, v in parts.items()) if len(parts) > 1 else ""))
    t0 = time.perf_counter()
    guard = calibrate_program_guard(fit.oof, evidence, final.table, alpha=contract.alpha, epsilon=contract.epsilon,
                                    delta=contract.delta, folds=fit.folds)
    timings["calibrate"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    code = compile_program(program, evidence.expr)
    timings["codegen"] = time.perf_counter() - t0
    draft = ManifestDraft(
        task=ctx.task, generation=ctx.generation, compiled_as="program",
        interface=Interface(input=input_schema(inputs), output=output_interface(program, answers)),
        model={"kind": "program", "field": field, "program": to_json(program), "evidence": to_json(evidence.expr),
               "program_digest": program_digest(program), "size": size(program), "evidence_size": size(evidence.expr),
               "text": render(final.program), "domain_guard": [render(e) for e in final.guarded_extractors],
               "parts": evidence.describe(), "code_digest": digest_bytes(code)}
              | ({"per_field": {"fields": fields,
                                "deopt": "the record deopts (the reference answers it whole) when any field deopts"}}
                 if selective else {}))
    art = Artifact.load(emit(code, draft.provisional()))

    t0 = time.perf_counter()
    record = run_program_gate(
        contract=contract,
        run_batch=art.call_batch,
        reference_run=lambda inp: run_program(program, inp, evidence.expr),
        witnessed=[(it[0], it[1]) for it in items],
        oof=oof,
        guard=guard,
        candidate={k: v for k, v in draft.model.items() if k not in ("program", "evidence")} | {"synthesis": synth_summary},
        generation=ctx.generation,
    )
    lat = call_latency_us(art, inputs)
    record["guard"] = without_calibration(guard)
    eval_id = ctx.store.put_eval_run(record)
    timings["gate"] = time.perf_counter() - t0
    run = EvalRun.from_record(record)
    if run.verdict is not Verdict.PASS:
        raise RungRefused(NAME, f"program rung: {run.reason}", eval_id)
    w, o, g = (run.check(CheckName.WITNESSED_AGREEMENT), run.check(CheckName.OUT_OF_FOLD_AGREEMENT),
               run.check(CheckName.GUARD_ANSWERS))
    parity = {"witnessed": {k: w.get(k) for k in ("n", "agree", "rate", "ci95_low", "answered")},
              "heldout": {"method": o["method"], "n": o["n"], "agree": o["agree"], "rate": o["rate"],
                          "ci95_low": o["ci95_low"], "confidence": o["confidence"], "compared": o["compared"]}
              | ({"of": "answered", "witnesses": len(fit.oof), "answered": fit.answered} if selective else {}),
              "parts": parts,
              "guarded": {"method": o["method"], "n": g["n"], "tier1": g["tier1"], "coverage": g["coverage"],
                          "tier1_wrong": g["tier1_wrong"], "selective_risk": g["selective_risk"],
                          "selective_risk_ci95_high": g["selective_risk_ci95_high"]}}
    return emit_generation(ctx, contract, draft, code, art, guard=guard, parity=parity, eval_runs=[eval_id],
                           reason=record["reason"], witnesses=ws.witnesses, store_digest=ws.store_digest,
                           distinct_inputs=len(items), fuel_inputs=inputs[:200], latency=lat, timings=timings, model=program)
