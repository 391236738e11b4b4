"""The program rung of the compile ladder: synthesize a DSL program, gate it as WebAssembly, emit.

The ladder (:func:`auto.pipeline.compile_task`) tries a program first, a distilled specialist if
no program passes, then the exact-match memo, and otherwise refuses. This module is the first
rung:

1. the task's distinct witnessed inputs with their modal outputs (from the pipeline);
2. a deterministic split into *train* (synthesis), *selection* (the synthesizer's finalists and the
   program-vs-default choices are decided here) and *held-out* (the gate only) in the contract's
   proportions (60/20/20 by default). Categorical answers are stratified by answer; record or
   open-ended answers (e.g. an order id, unique per input) are split uniformly at random;
3. :func:`auto.extract.synth.synthesize` on train, with the selection split as its held-out;
4. the witnessed-domain guard (:mod:`auto.extract.domain`): deopt where an extractor that was
   defined on every train/selection input returns null; then
   :func:`auto.codegen.program_lower.compile_program` to WebAssembly, loaded in the sandbox;
5. the program gate (:func:`auto.verify.run_program_gate`): the artifact must agree with the
   Python interpreter on every input, and its held-out agreement — a ``deopt`` counts as a
   disagreement — must reach ``program_min_agreement`` with a 95% Clopper–Pearson lower bound
   of at least ``program_min_agreement_ci95_low``;
6. emit with ``compiled_as: "program"``, the program's JSON, digest, size and readable text in
   ``model``, and the guard ``{"method": "program"}`` (tier-1 unless the program reaches a
   ``Deopt`` node).

A program answers every input its rules cover; it carries no statistical novelty guard (its
generalization is what the held-out gate measures). The manifest says so in ``guard.statement``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from auto.canonical import canonical_json, digest_bytes
from auto.errors import CompileError, GateRefused
from auto.verify import Contract, eval_record

MAX_STRATA = 20
"""Answers with at most this many distinct values are split stratified by answer."""


def split_three(answers: list[Any], contract: Contract) -> tuple[list[int], list[int], list[int]]:
    """Deterministic train / selection / held-out index split (each ascending).

    Held-out takes ``contract.heldout_fraction`` of the items, selection
    ``contract.calibration_fraction`` of all items (from the rest). Stratified by answer when there
    are at most :data:`MAX_STRATA` distinct answers, otherwise uniform (seeded by ``contract.seed``).
    """
    from auto.distill import split_witnesses

    keys = [canonical_json(a) for a in answers]
    strata = keys if len(set(keys)) <= MAX_STRATA else ["*"] * len(keys)
    rest, held = split_witnesses(strata, contract.heldout_fraction, contract.seed)
    sel_frac = contract.calibration_fraction / (1.0 - contract.heldout_fraction)
    tr_local, sel_local = split_witnesses([strata[i] for i in rest], sel_frac, contract.seed + 1)
    return [rest[i] for i in tr_local], [rest[i] for i in sel_local], held


def single_text_field(inputs: list[dict[str, Any]]) -> str:
    """The one input field that is a string in every witness (the program's ``Field``).

    Raises:
        CompileError: no such field, or more than one.
    """
    keys: set[str] | None = None
    for d in inputs:
        ks = {k for k, v in d.items() if isinstance(v, str)}
        keys = ks if keys is None else keys & ks
    if not keys or len(keys) != 1:
        raise CompileError("a program reads exactly one text field; the witnesses have "
                           f"{sorted(keys or [])} as string fields in every input")
    return next(iter(keys))


def output_interface(program: Any, answers: list[Any]) -> dict[str, Any]:
    """The manifest's output interface of a program: its DSL type, and the record keys or the
    enum of witnessed answers where those describe it."""
    from auto.extract.types import check

    kind = check(program)
    out: dict[str, Any] = {"program_type": kind}
    if kind == "record":
        keys = sorted({k for a in answers if isinstance(a, dict) for k in a})
        out["keys"] = keys
    elif kind == "text" and len({canonical_json(a) for a in answers}) <= MAX_STRATA:
        out["witnessed_values"] = sorted({a for a in answers if isinstance(a, str)})
    return out


def compile_program_rung(
    store: Any,
    task: str,
    items: list[tuple[dict[str, Any], Any, float]],
    *,
    contract: Contract,
    generation: int,
    out_path: str | Path | None,
    reference_model: str | None,
    ws: list[Any],
    proposer: Any = None,
    say: Callable[[str], None] = lambda _m: None,
) -> Any:
    """Synthesize, gate and emit a program generation of ``task``.

    Args:
        store: the :class:`auto.store.Store` (eval run and artifact are stored there).
        task: the task name.
        items: distinct inputs as ``(input, modal output, share)``, sorted by canonical input.
        contract: thresholds (``program_min_agreement``, ``program_min_agreement_ci95_low``,
            fractions, seed).
        generation, out_path, reference_model: as for :func:`auto.pipeline.compile_task`.
        ws: every witness of the task (provenance).
        proposer: optional LLM-guided proposer (:mod:`auto.extract.propose`).
        say: progress callback.

    Returns:
        The :class:`auto.pipeline.CompileOutcome` of the emitted program generation.

    Raises:
        GateRefused: no program was found, or the program failed the gate (the eval run is stored
            and cited; its reason says which check failed and why).
        CompileError, CodegenError: a stage failed for a reason other than the gate.
    """
    from auto_runtime import Artifact

    from auto.codegen.program_lower import compile_program
    from auto.emit import emit
    from auto.extract.domain import guard_domain
    from auto.extract.interp import run_program
    from auto.extract.pretty import render, size
    from auto.extract.serial import program_digest, to_json
    from auto.extract.synth import synthesize
    from auto.pipeline import FORMAT, _emit_generation, input_schema
    from auto.verify import run_program_gate

    timings: dict[str, float] = {}
    inputs = [it[0] for it in items]
    answers = [it[1] for it in items]
    try:
        field = single_text_field(inputs)
    except CompileError as e:
        raise _refuse(store, contract, generation, f"program rung: {e}", [{"name": "one-text-field", "passed": False}]) from None
    train_idx, sel_idx, held_idx = split_three(answers, contract)
    if not held_idx or not sel_idx or len(train_idx) < 2:
        raise _refuse(store, contract, generation, "program rung: too few witnesses to hold out a selection and a held-out split",
                      [{"name": "splits-nonempty", "train": len(train_idx), "selection": len(sel_idx),
                        "heldout": len(held_idx), "passed": False}])
    say(f"  program rung: {len(items)} distinct inputs over field {field!r}: train {len(train_idx)}, "
        f"selection {len(sel_idx)}, held-out {len(held_idx)}")

    t0 = time.perf_counter()
    res = synthesize([(items[i][0], items[i][1]) for i in train_idx], field=field,
                     heldout=[(items[i][0], items[i][1]) for i in sel_idx], proposer=proposer)
    timings["synthesize"] = time.perf_counter() - t0
    synth_summary = {"train_agreement": res.train_agreement, "selection_agreement": res.heldout_agreement,
                     "candidates": res.candidates, "seconds": round(res.seconds, 3), "reason": res.reason}
    if res.program is None:
        raise _refuse(store, contract, generation, f"program rung: no program found ({res.reason})",
                      [{"name": "program-synthesized", "passed": False, **synth_summary}])
    program, guarded = guard_domain(res.program, [items[i][0] for i in train_idx + sel_idx])
    say(f"  synthesized a program of {size(res.program)} nodes: train agreement {res.train_agreement:.3f}"
        + (f", selection {res.heldout_agreement:.3f}" if res.heldout_agreement is not None else "")
        + (f"; witnessed-domain guard on {len(guarded)} extractor(s): {size(program)} nodes with it" if guarded else ""))

    t0 = time.perf_counter()
    code = compile_program(program)
    timings["codegen"] = time.perf_counter() - t0
    pj = to_json(program)
    base = {
        "format": FORMAT,
        "task": task,
        "generation": generation,
        "compiled_as": "program",
        "interface": {"input": input_schema(inputs), "output": output_interface(program, answers)},
        "abi": {"exports": ["memory", "alloc", "run", "run_batch"], "encoding": "canonical-json"},
        "capabilities": [],
        "model": {
            "kind": "program",
            "field": field,
            "program": pj,
            "program_digest": program_digest(program),
            "size": size(program),
            "text": render(program),
            "domain_guard": [render(e) for e in guarded],
            "code_digest": digest_bytes(code),
        },
    }
    art = Artifact.load(emit(code, {**base, "guard": {"method": "none"}, "provisional": True}))

    t0 = time.perf_counter()
    record = run_program_gate(
        contract=contract,
        run_batch=art.call_batch,
        reference_run=lambda inp: run_program(program, inp),
        witnessed=[(it[0], it[1]) for it in items],
        heldout=[(items[i][0], items[i][1]) for i in held_idx],
        candidate={k: v for k, v in base["model"].items() if k != "program"} | {"synthesis": synth_summary},
        generation=generation,
    )
    lat: list[float] = []
    for i in held_idx[:200]:
        t1 = time.perf_counter_ns()
        art.call(items[i][0])
        lat.append((time.perf_counter_ns() - t1) / 1000.0)
    guard = {"method": "program",
             "statement": ("tier-1 on every input the program answers; the call deopts where the program reaches a "
                           "Deopt node, including its witnessed-domain guard (an extractor that was defined on every "
                           "witness returns null: model.domain_guard). No statistical novelty test: the program's "
                           "generalization is what the held-out gate measured (parity.heldout).")}
    record["guard"] = guard
    eval_id = store.put_eval_run(record)
    timings["gate"] = time.perf_counter() - t0
    if record["verdict"] != "pass":
        raise GateRefused(f"program rung: {record['reason']}", eval_id)
    checks = {c["name"]: c for c in record["checks"]}
    parity = {split: {k: checks[name].get(k) for k in ("n", "agree", "rate", "ci95_low", "answered", "precision", "coverage")}
              for split, name in (("witnessed", "witnessed-agreement"), ("heldout", "heldout-agreement"))}
    parity["selection"] = {"n": len(sel_idx), "rate": res.heldout_agreement}
    return _emit_generation(store, task, generation, code, base, guard, parity, contract, eval_id, record["reason"], ws,
                            len(items), reference_model, [items[i][0] for i in held_idx], lat, out_path, timings,
                            program, None)


def _refuse(store: Any, contract: Contract, generation: int, reason: str, checks: list[dict[str, Any]]) -> GateRefused:
    return GateRefused(reason, store.put_eval_run(eval_record(contract, generation, None, checks, reason)))
