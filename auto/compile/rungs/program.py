"""The program rung: synthesize a DSL program from the witnesses, gate it as WebAssembly, emit.

1. the task's distinct witnessed inputs with their modal outputs;
2. a deterministic split into *train* (synthesis), *selection* (the synthesizer's finalists and
   the program-vs-default choices are decided here) and *held-out* (the gate only) in the
   contract's proportions (60/20/20 by default); categorical answers are stratified by answer,
   record or open-ended answers are split uniformly at random
   (:func:`auto.compile.witnesses.split_three`);
3. :func:`auto.extract.synth.synthesize` on train, with the selection split as its held-out;
4. the witnessed-domain guard (:mod:`auto.extract.domain`): deopt where an extractor that was
   defined on every train/selection input returns null; then
   :func:`auto.codegen.program_lower.compile_program` to WebAssembly, loaded in the sandbox;
5. the program gate (:func:`auto.verify.run_program_gate`): the artifact must agree with the
   Python interpreter on every input, and its held-out agreement — a ``deopt`` counts as a
   disagreement — must reach ``program_min_agreement`` with a 95% Clopper–Pearson lower bound of
   at least ``program_min_agreement_ci95_low``;
6. emit with ``compiled_as: "program"``, the program's JSON, digest, size and readable text in
   ``model``, and the guard ``{"method": "program"}`` (tier-1 unless the program reaches a
   ``Deopt`` node).

A program answers every input its rules cover; it carries no statistical novelty guard (its
generalization is what the held-out gate measures). The manifest says so in ``guard.statement``.
"""

from __future__ import annotations

import time
from typing import Any

from auto_runtime import Artifact

from auto.canonical import canonical_json, digest_bytes
from auto.codegen.program_lower import compile_program
from auto.compile.context import RungContext
from auto.compile.generation import CompileOutcome, emit_generation
from auto.compile.manifest import ManifestDraft
from auto.compile.measure import call_latency_us
from auto.compile.witnesses import MAX_STRATA, WitnessSet, input_schema, main_text_field, split_three
from auto.emit import emit
from auto.errors import RungRefused
from auto.extract.domain import guard_domain
from auto.extract.interp import run_program
from auto.extract.pretty import render, size
from auto.extract.serial import program_digest, to_json
from auto.extract.synth import synthesize
from auto.extract.types import check
from auto.verify import Contract, run_program_gate

NAME = "program"

GUARD_STATEMENT = (
    "tier-1 on every input the program answers; the call deopts where the program reaches a Deopt node, including "
    "its witnessed-domain guard (an extractor that was defined on every witness returns null: model.domain_guard). "
    "No statistical novelty test: the program's generalization is what the held-out gate measured (parity.heldout).")


def output_interface(program: Any, answers: list[Any]) -> dict[str, Any]:
    """The manifest's output interface of a program: its DSL type, and the record keys or the
    enum of witnessed answers where those describe it."""
    kind = check(program)
    out: dict[str, Any] = {"program_type": kind}
    if kind == "record":
        out["keys"] = sorted({k for a in answers if isinstance(a, dict) for k in a})
    elif kind == "text" and len({canonical_json(a) for a in answers}) <= MAX_STRATA:
        out["witnessed_values"] = sorted({a for a in answers if isinstance(a, str)})
    return out


def compile_rung(ws: WitnessSet, contract: Contract, ctx: RungContext) -> CompileOutcome:
    """Synthesize, gate and emit a program generation of the task.

    Returns:
        The :class:`~auto.compile.generation.CompileOutcome` of the emitted program generation.

    Raises:
        RungRefused: too few witnesses (nothing stored), not exactly one text field, no program
            found, or the program failed the gate (the eval run is stored and cited; its reason
            says which check failed and why).
        CompileError, CodegenError: a stage failed for a reason other than the gate.
    """
    items, _excluded = ws.dominant()
    if len(items) < contract.min_witnesses:
        raise RungRefused(NAME, f"program rung not attempted: only {len(items)} distinct witnessed inputs "
                                f"(needs {contract.min_witnesses})")
    timings: dict[str, float] = {}
    inputs = [it[0] for it in items]
    answers = [it[1] for it in items]
    field = main_text_field(inputs)
    if field is None:
        raise ctx.refuse(NAME, contract, "program rung: a program reads one text field; no field is a string in "
                         "every witness", [{"name": "one-text-field", "passed": False}])
    train_idx, sel_idx, held_idx = split_three(answers, contract.heldout_fraction, contract.calibration_fraction,
                                               contract.seed)
    if not held_idx or not sel_idx or len(train_idx) < 2:
        raise ctx.refuse(NAME, contract, "program rung: too few witnesses to hold out a selection and a held-out split",
                         [{"name": "splits-nonempty", "train": len(train_idx), "selection": len(sel_idx),
                           "heldout": len(held_idx), "passed": False}])
    ctx.say(f"  program rung: {len(items)} distinct inputs over field {field!r}: train {len(train_idx)}, "
            f"selection {len(sel_idx)}, held-out {len(held_idx)}")

    t0 = time.perf_counter()
    res = synthesize([(items[i][0], items[i][1]) for i in train_idx], field=field,
                     heldout=[(items[i][0], items[i][1]) for i in sel_idx], proposer=ctx.proposer)
    timings["synthesize"] = time.perf_counter() - t0
    synth_summary = {"train_agreement": res.train_agreement, "selection_agreement": res.heldout_agreement,
                     "candidates": res.candidates, "seconds": round(res.seconds, 3), "reason": res.reason}
    if res.program is None:
        raise ctx.refuse(NAME, contract, f"program rung: no program found ({res.reason})",
                         [{"name": "program-synthesized", "passed": False, **synth_summary}])
    program, guarded = guard_domain(res.program, [items[i][0] for i in train_idx + sel_idx])
    ctx.say(f"  synthesized a program of {size(res.program)} nodes: train agreement {res.train_agreement:.3f}"
            + (f", selection {res.heldout_agreement:.3f}" if res.heldout_agreement is not None else "")
            + (f"; witnessed-domain guard on {len(guarded)} extractor(s): {size(program)} nodes with it" if guarded else ""))

    t0 = time.perf_counter()
    code = compile_program(program)
    timings["codegen"] = time.perf_counter() - t0
    draft = ManifestDraft(
        task=ctx.task, generation=ctx.generation, compiled_as="program",
        interface={"input": input_schema(inputs), "output": output_interface(program, answers)},
        model={"kind": "program", "field": field, "program": to_json(program), "program_digest": program_digest(program),
               "size": size(program), "text": render(program), "domain_guard": [render(e) for e in guarded],
               "code_digest": digest_bytes(code)})
    art = Artifact.load(emit(code, draft.provisional()))

    t0 = time.perf_counter()
    record = run_program_gate(
        contract=contract,
        run_batch=art.call_batch,
        reference_run=lambda inp: run_program(program, inp),
        witnessed=[(it[0], it[1]) for it in items],
        heldout=[(items[i][0], items[i][1]) for i in held_idx],
        candidate={k: v for k, v in draft.model.items() if k != "program"} | {"synthesis": synth_summary},
        generation=ctx.generation,
    )
    held_inputs = [items[i][0] for i in held_idx]
    lat = call_latency_us(art, held_inputs)
    guard = {"method": "program", "statement": GUARD_STATEMENT}
    record["guard"] = guard
    eval_id = ctx.store.put_eval_run(record)
    timings["gate"] = time.perf_counter() - t0
    if record["verdict"] != "pass":
        raise RungRefused(NAME, f"program rung: {record['reason']}", eval_id)
    checks = {c["name"]: c for c in record["checks"]}
    parity = {split: {k: checks[name].get(k) for k in ("n", "agree", "rate", "ci95_low", "answered", "precision", "coverage")}
              for split, name in (("witnessed", "witnessed-agreement"), ("heldout", "heldout-agreement"))}
    parity["selection"] = {"n": len(sel_idx), "rate": res.heldout_agreement}
    return emit_generation(ctx, contract, draft, code, art, guard=guard, parity=parity, eval_runs=[eval_id],
                           reason=record["reason"], witnesses=ws.witnesses, store_digest=ws.store_digest, distinct_inputs=len(items),
                           fuel_inputs=held_inputs, latency=lat, timings=timings, model=program)
