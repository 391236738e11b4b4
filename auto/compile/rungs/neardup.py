"""The near-duplicate rung: the memo, plus one answer per neighbourhood of inputs that differ only
by what the witnesses show the reference ignores.

A task with one text field whose answers are scalars: the distinct witnessed inputs are
calibrated against the canonicalizer chain of :mod:`auto.compile.neardup` (leave-one-out merges,
a one-sided Clopper–Pearson bound at ``1 − δ/m``; ``ε`` and ``δ`` are the contract's). With a
certified step, the generation is a DSL program::

    lookup(text, {witnessed input: answer, ...},            # the memo's exact entries
           lookup(canon(text), {key: answer, ...}, deopt))  # neighbourhoods that answer

lowered to WebAssembly by the program lowering, so the key is computed in the artifact
(``compiled_as: program``, guard ``program``: the artifact's own deopt flag). The exact entries
are the consistently answered inputs; a neighbourhood answers only when every witnessed input in
it was answered consistently and the same way. The manifest's ``model.near_duplicate`` states the
step, the calibration per step and the guarantee (:mod:`auto.compile.neardup`).

Gate (:data:`~auto.gate.CheckName`): ``runs-without-error``; ``witnessed-agreement`` (every
consistently answered input answered with its witnessed answer: must be all);
``wasm-matches-python-reference`` (answer and deopt flag, on every witness and on probes: each
witnessed input rendered with a greeting, a sign-off and another casing, and with a suffix no
witness has); ``near-duplicate-risk`` (the chosen step's bound ≤ ε).

Refused: no single text field, an answer that is not a scalar, fewer than two distinct inputs,
or no certified step (the refusal gives every step's merges, errors and bound).
"""

from __future__ import annotations

import json
import time
from typing import Any

from auto_runtime import Artifact
from auto_runtime.manifest import Interface

from auto.canonical import canonical_json, digest_bytes
from auto.codegen.program_lower import compile_program
from auto.compile import neardup as nd
from auto.compile.context import RungContext
from auto.compile.generation import CompileOutcome, emit_generation
from auto.compile.manifest import ManifestDraft
from auto.compile.measure import call_latency_us
from auto.compile.rungs.program import output_interface
from auto.compile.witnesses import WitnessSet, input_schema
from auto.emit import emit
from auto.errors import RungRefused
from auto.guards.noise import first_witnessed, reference_noise
from auto.gate import (Check, CheckName, Contract, EvalRun, Verdict, agreement_of_texts, eval_record,
                       first_refusal)
from auto.models.program import ast as A
from auto.models.program.interp import run_program
from auto.models.program.pretty import render, size
from auto.models.program.serial import program_digest, to_json

NAME = "neardup"

GUARD = {"method": "program",
         "statement": "tier-1 on a witnessed input, or on an input whose canonical key (model.near_duplicate.step) "
                      "is that of a neighbourhood of witnessed inputs answered consistently and alike; every other "
                      "input deopts"}

GUARANTEE = ("with probability >= 1 - delta over the distinct witnessed inputs, the chosen step's merge error (a "
             "neighbourhood's answer differs from the reference's witnessed answer, on inputs exchangeable with the "
             "witnessed ones) is <= epsilon")

EXCESS_GUARANTEE = ("with probability >= 1 - delta over the distinct witnessed inputs, the chosen step's merge error "
                    "against a fresh reference call (a neighbourhood's answer differs from an input's first witnessed "
                    "answer, on inputs exchangeable with the witnessed ones) exceeds the reference's own disagreement "
                    "rate between two calls by at most epsilon; assumes " + nd.ASSUMPTIONS)

PROBE_LIMIT = 50
"""At most this many witnessed inputs are rendered as probes."""


def _scalar(v: Any) -> bool:
    return v is None or isinstance(v, (str, bool, int))


def program_of(field_name: str, step: str, exact: list[tuple[str, Any]], classes: list[tuple[str, Any]]) -> A.Node:
    """The generation's program (module docstring): exact entries first, then the neighbourhoods
    of ``step``, else deopt."""
    inner = A.Lookup(nd.canonicalizer(step, field_name), tuple((k, A.Const(v)) for k, v in classes), A.Deopt())
    return A.Lookup(A.Field(field_name), tuple((k, A.Const(v)) for k, v in exact), inner)


def probes_of(field_name: str, inputs: list[dict[str, Any]], limit: int = PROBE_LIMIT) -> list[dict[str, Any]]:
    """Inputs the gate runs on both sides beyond the witnesses: per witnessed input (at most
    ``limit``), a near-duplicate rendering (greeting, upper case, sign-off) and a never-witnessed
    variant (a suffix)."""
    out = []
    for inp in inputs[:limit]:
        t = inp[field_name]
        out.append({field_name: f"Hello team, {t.upper()} Thanks, Sam"})
        out.append({field_name: f"{t} [probe]"})
    return out


def calibrate_over_noise(ws: WitnessSet, inputs: list[dict[str, Any]], answers: list[Any], consistent: list[bool],
                         field_name: str, contract: Contract) -> tuple[nd.Calibration, float, str]:
    """:func:`auto.compile.neardup.calibrate` with the witness store's noise evidence (re-asked
    inputs, first witnessed answers) and the contract's ``noise_min_reasked``.

    Returns:
        ``(calibration, the level a step's bound is compared with, that level in words)``.
    """
    groups_of = {canonical_json(ws.inputs[k]): outs for k, outs in ws.groups.items()}
    keys = [canonical_json(x) for x in inputs]
    first = first_witnessed(groups_of)
    first_answers = [json.loads(first[k]) if k in first else a for k, a in zip(keys, answers)]
    cal = nd.calibrate(inputs, answers, consistent, field_name, epsilon=contract.epsilon, delta=contract.delta,
                       noise=reference_noise(groups_of, keys), noise_min_reasked=contract.noise_min_reasked,
                       first_answers=first_answers)
    level = cal.level if cal.level is not None else contract.epsilon
    against = (f"epsilon {contract.epsilon:g} + the reference's self-disagreement lower bound "
               f"{cal.noise['lower_bound']:.4g} ({cal.noise['disagreeing']}/{cal.noise['reasked']} re-asked inputs "
               "disagreeing)" if cal.noise and cal.noise.get("used") else f"epsilon {contract.epsilon:g}")
    return cal, level, against


def compile_rung(ws: WitnessSet, contract: Contract, ctx: RungContext) -> CompileOutcome:
    """Calibrate, build, gate and emit a near-duplicate generation.

    Raises:
        RungRefused: the task does not apply (see the module docstring), no step is certified, or
            a gate check failed (eval run stored and cited).
    """
    items, _excluded = ws.dominant()
    inputs = [it[0] for it in items]
    answers = [it[1] for it in items]
    consistent = [it[2] == 1.0 for it in items]
    names = {k for x in inputs for k in x}
    field_name = next(iter(names)) if len(names) == 1 else None
    if field_name is None or not all(isinstance(x.get(field_name), str) for x in inputs):
        raise ctx.refuse(NAME, contract, "neardup rung: needs inputs of one text field "
                         f"(the witnessed inputs have the fields {sorted(names)})",
                         [{"name": CheckName.ONE_TEXT_FIELD.value, "fields": sorted(names), "passed": False}])
    if not all(_scalar(a) for a in answers):
        raise ctx.refuse(NAME, contract, "neardup rung: an answer is not a scalar (a text, number, bool or null)",
                         [{"name": CheckName.OUTPUTS_ARE_LABELS.value, "passed": False}])
    if len(items) < 2:
        raise ctx.refuse(NAME, contract, f"neardup rung: {len(items)} distinct input(s), nothing to merge",
                         [{"name": CheckName.ENOUGH_WITNESSES.value, "distinct": len(items), "passed": False}])
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    cal, level, against = calibrate_over_noise(ws, inputs, answers, consistent, field_name, contract)
    timings["calibrate"] = time.perf_counter() - t0
    steps = "; ".join(f"{s.step}: {s.wrong}/{s.merges} merges wrong, bound "
                      + ("n/a" if s.upper is None else f"{s.upper:.3f}") for s in cal.steps)
    if cal.chosen is None:
        raise ctx.refuse(NAME, contract, f"neardup rung: no canonicalization step certified at {against} "
                         f"(delta {contract.delta:g}): {steps}",
                         [{"name": CheckName.NEAR_DUPLICATE_RISK.value, **cal.to_dict(), "passed": False}])
    chosen = cal.chosen_evidence()
    exact = sorted((x[field_name], a) for x, a, ok in zip(inputs, answers, consistent) if ok)
    classes = nd.table(cal.chosen, field_name, inputs, answers, consistent)
    program = program_of(field_name, cal.chosen, exact, classes)
    canon = nd.canonicalizer(cal.chosen, field_name)
    ctx.say(f"  neardup rung: step {cal.chosen} certified ({chosen.wrong}/{chosen.merges} merges wrong, bound "
            f"{chosen.upper:.3f} <= {level:.4g}); {len(exact)} exact entries, {len(classes)} neighbourhoods")
    t0 = time.perf_counter()
    code = compile_program(program)
    timings["codegen"] = time.perf_counter() - t0
    # the key's expression in full (the manifest's text names the step only)
    statement = {**cal.to_dict(), "step": cal.chosen, "canonicalizer": render(canon),
                 "exact_entries": len(exact), "neighbourhoods": len(classes),
                 "guarantee": EXCESS_GUARANTEE if cal.noise and cal.noise.get("used") else GUARANTEE}
    draft = ManifestDraft(
        task=ctx.task, generation=ctx.generation, compiled_as="program",
        interface=Interface(input=input_schema(inputs), output=output_interface(program, answers)),
        model={"kind": "program", "field": field_name, "program": to_json(program), "program_digest": program_digest(program),
               "size": size(program), "text": f"lookup({field_name}, <{len(exact)} witnessed inputs>, "
                                              f"lookup(canon[{cal.chosen}]({field_name}), <{len(classes)} "
                                              "neighbourhoods>, deopt))",
               "near_duplicate": statement, "code_digest": digest_bytes(code)})
    art = Artifact.load(emit(code, draft.provisional()))
    t0 = time.perf_counter()
    probes = probes_of(field_name, inputs)
    every = inputs + probes
    outs = art.call_batch(every)
    errors = sum(1 for o in outs if not isinstance(o, dict) or "error" in o)
    checks = [Check(CheckName.RUNS_WITHOUT_ERROR, errors == 0, {"errors": errors, "n": len(outs)},
                    refusal=f"the program returned errors on {errors} inputs")]
    idx = [i for i, ok in enumerate(consistent) if ok]
    # a deopt on a witnessed input is a disagreement (the JSON text of no answer is never "deopt")
    wa = agreement_of_texts([canonical_json(outs[i].get("answer")) if outs[i].get("deopt") is False else "deopt"
                             for i in idx], [canonical_json(answers[i]) for i in idx])
    checks.append(Check(CheckName.WITNESSED_AGREEMENT, wa["n"] > 0 and wa["agree"] == wa["n"], wa,
                        refusal=f"the program repeats {wa['agree']}/{wa['n']} witnessed outputs (must be all)"))
    ref = [run_program(program, x) for x in every]
    mism = sum(1 for o, r in zip(outs, ref) if canonical_json({k: o.get(k) for k in ("answer", "deopt")}) != canonical_json(r))
    checks.append(Check(CheckName.WASM_MATCHES_PYTHON_REFERENCE, mism == 0, {"mismatches": mism, "n": len(every)},
                        refusal=f"WebAssembly and the Python reference disagree on {mism} inputs"))
    checks.append(Check(CheckName.NEAR_DUPLICATE_RISK, chosen.certified, chosen.to_dict() | {"epsilon": contract.epsilon,
                                                                                          "delta": contract.delta,
                                                                                          "level": level,
                                                                                          "reference_noise": cal.noise},
                        refusal=f"the step's merge-error bound {chosen.upper} is above {against}"))
    failed = first_refusal(checks)
    reason = (failed.refusal if failed is not None else
              f"near-duplicate table: {len(exact)} witnessed inputs repeated exactly, {len(classes)} neighbourhoods of "
              f"step {cal.chosen} ({chosen.wrong}/{chosen.merges} leave-one-out merges wrong, bound {chosen.upper:.3f} "
              f"<= {against}); {steps}")
    record = eval_record(contract, ctx.generation, {k: v for k, v in draft.model.items() if k != "program"}, checks, reason)
    record["guard"] = GUARD
    eval_id = ctx.store.put_eval_run(record)
    timings["gate"] = time.perf_counter() - t0
    run = EvalRun.from_record(record)
    if run.verdict is not Verdict.PASS:
        raise RungRefused(NAME, f"neardup rung: {run.reason}", eval_id)
    lat = call_latency_us(art, inputs)
    parity = {"witnessed": {k: wa.get(k) for k in ("n", "agree", "rate", "ci95_low")}, "heldout": None,
              "near_duplicate": {"method": "leave-one-out merges", "n": chosen.merges, "wrong": chosen.wrong,
                                 "upper": chosen.upper, "epsilon": contract.epsilon, "delta": contract.delta,
                                 "level": level, "reference_noise": cal.noise}}
    return emit_generation(ctx, contract, draft, code, art, guard=GUARD, parity=parity, eval_runs=[eval_id],
                           reason=reason, witnesses=ws.witnesses, store_digest=ws.store_digest,
                           distinct_inputs=len(items), fuel_inputs=inputs[:200], latency=lat, timings=timings,
                           model=program)
