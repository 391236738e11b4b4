"""The one ordered module that calls every stage: witnesses → distill → codegen → verify → emit.

:func:`compile_task` compiles one generation of a task from the witnesses in a store:

1. group the task's witnesses by distinct input (canonical JSON): a divergent input contributes
   its modal output weighted by its share;
2. split distinct inputs deterministically (stratified by label) into training, calibration and
   held-out sets (fractions from the contract);
3. distill candidates on the training set and select on the calibration set;
4. lower the winner to WebAssembly and load it in the sandbox;
5. calibrate the guard stack (:mod:`auto.guards`) on the calibration split, from the artifact's
   own outputs: conformal novelty on the nonconformity scores, and selective risk (Learn-then-Test)
   on the ``(margin, correct)`` pairs, where correct = the artifact's answer equals the witnessed
   (modal) reference answer; then measure the stack's coverage and selective risk on the held-out
   split. Novelty and risk use the *same* calibration points, not disjoint halves: certifying
   ``epsilon = 0.05`` at ``delta = 0.1`` needs at least 45 proceeding points even with no errors
   (``(1 - epsilon)^n <= delta``), and halving a calibration split of ~80 would make the
   certificate unreachable. Sharing is sound here because the novelty component uses no labels,
   and the risk is calibrated only on the points novelty passes, each judged against the other
   ``n - 1`` scores (leave-one-out, as a fresh input would be), so the certificate is about the
   stack's own proceed event. If no threshold controls the risk, the guard always deopts and its
   ``fallback_reason`` says why; the gate still judges the answers;
6. run the gate on every witnessed input and the held-out set *as WebAssembly*; store the eval
   run (either way);
7. on a pass, emit the ``.wasm`` with its manifest and store it; on a refusal raise
   :class:`~auto.errors.GateRefused`.
"""

from __future__ import annotations

import json
import statistics
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from auto_runtime.schema import json_type_name

from auto.canonical import canonical_json, digest_bytes
from auto.errors import CompileError, GateRefused
from auto.guards.stack import without_scores
from auto.verify import Contract, clopper_pearson, eval_record, run_gate

FORMAT = "auto.artifact/1"


@dataclass
class CompileOutcome:
    """A generation that passed the gate (refusals raise :class:`GateRefused` instead).

    Attributes:
        task, generation: what was compiled.
        reason: the gate's one-line verdict.
        eval_run_id: the stored eval run the manifest cites.
        artifact_id: ``sha256:<hex>`` of ``wasm``; artifact_bytes: ``len(wasm)`` (bytes).
        artifact_path: where the file was written (None if not written).
        wasm: the artifact's bytes; manifest: its manifest.
        timings_s: seconds per stage (distill, codegen, calibrate, gate, emit).
        latency_us: measured ``Artifact.call`` latency on held-out inputs at compile time
            (``{"p50", "p95", "n"}``, µs); kept out of the manifest so builds are reproducible.
        model: the compiled model (its ``predict`` is the Python reference of the artifact).
        sklearn_predict: the scikit-learn estimator's own predict on one input (featurize + predict),
            kept in memory so benchmarks can time it beside the artifact.
    """

    task: str
    generation: int
    reason: str
    eval_run_id: str
    artifact_id: str
    artifact_bytes: int
    artifact_path: Path | None
    wasm: bytes
    manifest: dict[str, Any]
    timings_s: dict[str, float] = field(default_factory=dict)
    latency_us: dict[str, Any] | None = None
    model: Any = None
    sklearn_predict: Callable[[dict[str, Any]], Any] | None = None

    def summary(self) -> dict[str, Any]:
        """JSON-friendly summary (no bytes)."""
        m = self.manifest
        return {
            "verdict": "pass",
            "task": self.task,
            "generation": self.generation,
            "reason": self.reason,
            "eval_run_id": self.eval_run_id,
            "artifact_id": self.artifact_id,
            "artifact_bytes": self.artifact_bytes,
            "artifact_path": str(self.artifact_path) if self.artifact_path else None,
            "compiled_as": m["compiled_as"],
            "model": m["model"],
            "parity": m["parity"],
            "guard": without_scores(m["guard"]),
            "latency_us": self.latency_us,
            "fuel_per_call": m["fuel_per_call"],
            "timings_s": self.timings_s,
        }


def input_schema(inputs: list[dict[str, Any]]) -> dict[str, Any]:
    """The input JSON schema implied by the witnesses: the keys every witness has, their types."""
    keys = set(inputs[0])
    for d in inputs[1:]:
        keys &= set(d)
    props: dict[str, Any] = {}
    for k in sorted(keys):
        types = sorted({json_type_name(d[k]) for d in inputs})
        props[k] = {"type": types[0] if len(types) == 1 else types}
    return {"type": "object", "properties": props, "required": sorted(keys), "additionalProperties": False}


def _pctl(xs: list[float], q: int) -> float | None:
    if not xs:
        return None
    if len(xs) == 1:
        return round(xs[0], 2)
    return round(statistics.quantiles(xs, n=100, method="inclusive")[q - 1], 2)


def _reference_model(store: Any, task: str) -> str:
    for s in store.spans(task=task, kind="llm"):
        a = s.get("attributes") or {}
        name = a.get("gen_ai.response.model") or a.get("gen_ai.request.model")
        if name:
            return f"simulated: {name}" if a.get("auto.reference_model.simulated") else str(name)
    return "unknown (no model-call spans recorded)"


def _refuse(store: Any, contract: Contract, generation: int, reason: str, checks: list[dict[str, Any]]) -> GateRefused:
    return GateRefused(reason, store.put_eval_run(eval_record(contract, generation, None, checks, reason)))


def compile_task(
    store: Any,
    task: str,
    *,
    contract: Contract | None = None,
    generation: int | None = None,
    out_path: str | Path | None = None,
    reference_model: str | None = None,
    memo: bool = True,
    programs: bool = True,
    proposer: Any = None,
    progress: Callable[[str], None] | None = None,
) -> CompileOutcome:
    """Compile one generation of ``task``: the ladder program → specialist → memo → refusal.

    With ``programs`` (the default) a DSL program is synthesized and gated first
    (:mod:`auto.extract.rung`); a program that passes its gate is the generation. Otherwise the
    specialist rung runs (:func:`compile_specialist`, which falls back to the memo rung), and the
    program rung's refusal is prefixed to its reason, so a final refusal names every rung that
    failed and why.

    Args:
        programs: try the program rung first.
        proposer: optional LLM-guided program proposer (:mod:`auto.extract.propose`).
        Others: as for :func:`compile_specialist`.

    Returns:
        The :class:`CompileOutcome` of the generation that passed a gate.

    Raises:
        GateRefused: every rung refused (the last rung's eval run is attached; the reason lists
            each rung's refusal). IntegrityError, CompileError, CodegenError: as for
            :func:`compile_specialist`.
    """
    say = progress or (lambda _m: None)
    contract = contract or Contract.default_for(task)
    if generation is None:
        latest = store.latest_artifact(task)
        generation = (latest.generation + 1) if latest else 1
    note = None
    if programs:
        store.verify().raise_for_mismatch()
        ws = store.witnesses(task)
        items = distinct_items(ws)
        if len(items) < contract.min_witnesses:
            note = f"program rung not attempted: only {len(items)} distinct witnessed inputs (needs {contract.min_witnesses})"
        else:
            from auto.extract.rung import compile_program_rung

            try:
                return compile_program_rung(store, task, items, contract=contract, generation=generation, out_path=out_path,
                                            reference_model=reference_model, ws=ws, proposer=proposer, say=say)
            except GateRefused as e:
                note = f"{e.reason} (eval run {e.eval_run_id})"
        say(f"  {note}")
    try:
        outcome = compile_specialist(store, task, contract=contract, generation=generation, out_path=out_path,
                                     reference_model=reference_model, memo=memo, progress=progress)
    except GateRefused as e:
        if note is None:
            raise
        raise GateRefused(f"{note}; {e.reason}", e.eval_run_id) from None
    if note is not None:
        outcome.reason = f"{note}; {outcome.reason}"
    return outcome


def group_witnesses(ws: list[Any]) -> tuple[dict[str, list[str]], dict[str, dict[str, Any]]]:
    """Witnesses → ``(outputs by canonical input, input by canonical input)``; outputs are
    canonical JSON texts in witness order."""
    groups: dict[str, list[str]] = defaultdict(list)
    inputs: dict[str, dict[str, Any]] = {}
    for w in ws:
        key = canonical_json(w.input)
        groups[key].append(canonical_json(w.output))
        inputs[key] = w.input
    return groups, inputs


def distinct_items(ws: list[Any], grouped: tuple[dict[str, list[str]], dict[str, dict[str, Any]]] | None = None
                   ) -> list[tuple[dict[str, Any], Any, float]]:
    """Witnesses → distinct inputs ``(input, modal output, share of the modal output)``, sorted by
    canonical input; ties between outputs go to the smaller canonical JSON."""
    groups, inputs = grouped or group_witnesses(ws)
    items: list[tuple[dict[str, Any], Any, float]] = []
    for key in sorted(groups):
        outs = Counter(groups[key])
        modal, n_modal = sorted(outs.items(), key=lambda kv: (-kv[1], kv[0]))[0]
        items.append((inputs[key], json.loads(modal), n_modal / len(groups[key])))
    return items


def compile_specialist(
    store: Any,
    task: str,
    *,
    contract: Contract | None = None,
    generation: int | None = None,
    out_path: str | Path | None = None,
    reference_model: str | None = None,
    memo: bool = True,
    progress: Callable[[str], None] | None = None,
) -> CompileOutcome:
    """Compile one specialist generation of ``task`` (memo rung as its fallback) from the witnesses in ``store``.

    With ``memo`` (the default) the artifact is *memo-first*: inputs witnessed in the training and
    calibration splits are answered from an exact-match table of their modal outputs, every other
    input by the distilled specialist; held-out inputs stay out of the table so the gate measures
    the specialist on inputs it never saw.

    Args:
        store: an :class:`auto.store.Store`.
        task: the task name as recorded.
        contract: the gate's contract (default: :meth:`Contract.default_for`).
        generation: generation number (default: the store's latest for the task + 1).
        out_path: where to write the ``.wasm`` (default: ``<task>.gen<N>.wasm``).
        reference_model: label for provenance (default: read from recorded model-call spans).
        memo: answer witnessed inputs from an exact-match table in front of the specialist.
        progress: optional callback for human-readable progress lines.

    Returns:
        The :class:`CompileOutcome` of a generation that passed the gate.

    Raises:
        IntegrityError: a stored digest does not match its content (``auto store verify``).
        GateRefused: too few witnesses, a single label, or a failed gate check (the eval run
            is stored and its id attached).
        CompileError, CodegenError: a stage failed for a reason other than the gate.
    """
    from auto_runtime import Artifact

    from auto.codegen import TableModel, compile_model
    from auto.codegen.table import HIT_MARGIN
    from auto.distill import distill, split_witnesses
    from auto.emit import emit

    say = progress or (lambda _m: None)
    contract = contract or Contract.default_for(task)
    if generation is None:
        latest = store.latest_artifact(task)
        generation = (latest.generation + 1) if latest else 1
    timings: dict[str, float] = {}
    # 0. never compile from a store whose recorded content no longer matches its digests
    store.verify().raise_for_mismatch()

    # 1. witnesses → distinct inputs with modal output and share
    ws = store.witnesses(task)
    groups, inputs = group_witnesses(ws)
    items = distinct_items(ws, (groups, inputs))
    n = len(items)
    if n < contract.min_witnesses:
        reason = f"only {n} distinct witnessed inputs; the specialist needs {contract.min_witnesses}"
        rid = _refuse(store, contract, generation, reason,
                      [{"name": "enough-witnesses", "n": n, "min": contract.min_witnesses, "passed": False}]).eval_run_id
        if not memo or n == 0:
            raise GateRefused(reason, rid)
        return _memo_fallback(store, task, contract, generation, out_path, reference_model, ws, groups, inputs,
                              f"specialist not attempted (eval run {rid}: {reason})", say, rid)
    label_keys = [canonical_json(it[1]) for it in items]
    labels = sorted(set(label_keys))
    if len(labels) < 2:
        raise _refuse(store, contract, generation, f"every witness has the same output {labels[0]}; nothing to classify "
                      "(a constant is not compiled as a specialist)", [{"name": "two-or-more-labels", "labels": len(labels), "passed": False}])

    if len(labels) > max(2, n // 2):
        reason = (f"{len(labels)} distinct outputs for {n} distinct inputs: most outputs are unique, so a classifier over "
                  "witnessed labels cannot generalize (open-ended outputs need the program rung)")
        rid = _refuse(store, contract, generation, reason,
                      [{"name": "outputs-are-labels", "labels": len(labels), "n": n, "passed": False}]).eval_run_id
        if not memo:
            raise GateRefused(reason, rid)
        return _memo_fallback(store, task, contract, generation, out_path, reference_model, ws, groups, inputs,
                              f"specialist not attempted (eval run {rid}: {reason})", say, rid)

    # 2. split: held-out first, then calibration from the rest (both stratified, seeded)
    rest_idx, held_idx = split_witnesses(label_keys, contract.heldout_fraction, contract.seed)
    cal_frac = contract.calibration_fraction / (1.0 - contract.heldout_fraction)
    tr_local, cal_local = split_witnesses([label_keys[i] for i in rest_idx], cal_frac, contract.seed + 1)
    train_idx = [rest_idx[i] for i in tr_local]
    cal_idx = [rest_idx[i] for i in cal_local]
    if not held_idx or not cal_idx:
        raise _refuse(store, contract, generation, "too few witnesses per label to hold out a calibration and a held-out set",
                      [{"name": "splits-nonempty", "heldout": len(held_idx), "calibration": len(cal_idx), "passed": False}])
    say(f"  {n} distinct inputs, {len(labels)} labels: train {len(train_idx)}, calibration {len(cal_idx)}, held-out {len(held_idx)}")

    # 3. distill (selection on the calibration set)
    t0 = time.perf_counter()
    dres = distill([items[i] for i in train_idx], heldout=[items[i] for i in cal_idx], seed=contract.seed)
    model = dres.model
    timings["distill"] = time.perf_counter() - t0
    say(f"  distilled: {dres.selected.model} over {model.features.n_min}-{model.features.n_max}-grams, "
        f"calibration agreement {dres.selected.heldout_agreement:.3f}")

    # 4. codegen → sandbox
    t0 = time.perf_counter()
    code = compile_model(model)
    timings["codegen"] = time.perf_counter() - t0
    schema = input_schema([it[0] for it in items])
    base = {
        "format": FORMAT,
        "task": task,
        "generation": generation,
        "compiled_as": "specialist",
        "interface": {"input": schema, "output": {"enum": [json_loads(x) for x in labels]}},
        "abi": {"exports": ["memory", "alloc", "run", "run_batch"], "encoding": "canonical-json"},
        "capabilities": [],
        "model": {
            "kind": model.kind,
            "estimator": model.estimator,
            "classes": [json_loads(c) for c in model.classes],
            "features": model.features.to_dict(),
            "prototypes": int(model.P.shape[0]),
            "code_digest": digest_bytes(code),
        },
    }
    provisional = Artifact.load(emit(code, {**base, "guard": {"method": "none"}, "provisional": True}))

    # 5. calibrate the guard stack (scores, margins and answers computed by the artifact itself)
    t0 = time.perf_counter()
    cal_out = provisional.call_batch([items[i][0] for i in cal_idx])
    if any("error" in o for o in cal_out):
        raise CompileError("the candidate returned errors on calibration inputs")

    if memo:
        # the table holds train + calibration witnesses; calibration scores above came from the
        # specialist alone, which is exactly the path a new (non-table) input takes
        table = TableModel([(items[i][0], items[i][1]) for i in sorted(train_idx + cal_idx)], fallback=model)
        code = compile_model(table)
        predictor: Any = table
        base["compiled_as"] = table.compiled_as
        base["model"] = {**base["model"], "kind": table.compiled_as, "table_entries": len(table),
                         "specialist_kind": model.kind, "code_digest": digest_bytes(code)}
        candidate_art = Artifact.load(emit(code, {**base, "guard": {"method": "none"}, "provisional": True}))
    else:
        predictor = model
        candidate_art = provisional
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
    if memo and guard["fallback_reason"] is None:
        thr = guard["components"][-1]["threshold"]
        if thr is not None and thr > HIT_MARGIN:  # a table hit reports HIT_MARGIN (docs/architecture.md)
            note = (f"the certified margin threshold {thr:.9g} exceeds the margin {HIT_MARGIN} a table hit reports, so witnessed "
                    "(table) inputs deopt as well")
            guard["components"][-1]["notes"].append(note)
            guard["statement"] = f"{guard['statement']}; {note}"
    timings["calibrate"] = time.perf_counter() - t0

    # 6. the gate, as WebAssembly
    t0 = time.perf_counter()
    record = run_gate(
        contract=contract,
        run_batch=candidate_art.call_batch,
        reference_predict=lambda inp: predictor.predict(inp).answer,
        witnessed=[(it[0], it[1]) for it in items],
        heldout=[(items[i][0], items[i][1]) for i in held_idx],
        labels=[json_loads(x) for x in labels],
        candidate={**base["model"], "sklearn_agreement": dres.sklearn_agreement,
                   "candidates": [{"model": c.model, "features": c.features.to_dict(), "train_agreement": c.train_agreement,
                                   "calibration_agreement": c.heldout_agreement} for c in dres.candidates]},
        generation=generation,
    )
    lat: list[float] = []
    for i in held_idx[:200]:
        t1 = time.perf_counter_ns()
        candidate_art.call(items[i][0])
        lat.append((time.perf_counter_ns() - t1) / 1000.0)
    record["guard"] = without_scores(guard)
    eval_id = store.put_eval_run(record)
    timings["gate"] = time.perf_counter() - t0
    if record["verdict"] != "pass":
        if not memo:
            raise GateRefused(record["reason"], eval_id)
        # the lowest rung: a table of what was witnessed, which generalizes nothing and so needs
        # no held-out evidence; new inputs deopt (exact-match guard)
        return _memo_fallback(store, task, contract, generation, out_path, reference_model, ws, groups, inputs,
                              f"specialist refused (eval run {eval_id}: {record['reason']})", say, eval_id)

    # 7. emit
    checks = {c["name"]: c for c in record["checks"]}
    parity = {split: {k: checks[name][k] for k in ("n", "agree", "rate", "ci95_low")}
              for split, name in (("witnessed", "witnessed-agreement"), ("heldout", "heldout-agreement"))}
    return _emit_generation(
        store, task, generation, code, base, guard, parity, contract, eval_id, record["reason"], ws, n,
        reference_model, [items[i][0] for i in held_idx], lat, out_path, timings, model, dres.estimator)


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
    from auto.guards.stack import calibrate_stack

    def cols(outs: list[dict[str, Any]], ref: list[Any]) -> tuple[list[Any], list[Any], list[bool]]:
        ok = ["error" not in o for o in outs]
        return ([o.get("nonconformity") if k else None for o, k in zip(outs, ok)],
                [o.get("margin") if k else None for o, k in zip(outs, ok)],
                [k and canonical_json(o.get("answer")) == canonical_json(r) for o, r, k in zip(outs, ref, ok)])

    cs, cc, cy = cols(cal_out, cal_reference)
    hs, hc, hy = cols(held_out, held_reference)
    return calibrate_stack(cs, cc, cy, hs, hc, hy, alpha=contract.alpha, epsilon=contract.epsilon, delta=contract.delta,
                           reason=reason, notes=notes)


def _memo_fallback(store: Any, task: str, contract: Contract, generation: int, out_path: str | Path | None,
                   reference_model: str | None, ws: list[Any], groups: dict[str, list[str]], inputs: dict[str, dict[str, Any]],
                   note: str, say: Callable[[str], None], specialist_eval_id: str) -> CompileOutcome:
    """The memo rung, only where the witnesses show the task repeats itself.

    Divergent inputs (≥ 2 distinct outputs) are never tabulated. The memo is compiled only when the
    inputs seen more than once were answered consistently at the contract's rates — point estimate
    ≥ ``min_agreement`` *and* 95% Clopper–Pearson lower bound ≥ ``min_agreement_ci95_low`` — the
    census's evidence that repeating an observation is sound; without it (or without any repeated
    input) the memo is refused.
    """
    repeated = [k for k, outs in groups.items() if len(outs) >= 2]
    consistent = [k for k in repeated if len(set(groups[k])) == 1]
    rate = len(consistent) / len(repeated) if repeated else None
    low, _ = clopper_pearson(len(consistent), len(repeated))
    evidence = (f"{len(consistent)} of {len(repeated)} repeated inputs answered consistently"
                + (f" (rate {rate:.3f}, 95% CP lower bound {low:.3f})" if rate is not None else ""))
    if rate is None or rate < contract.min_agreement or low < contract.min_agreement_ci95_low:
        reason = (f"{note}; memo refused: {evidence}, the contract needs {contract.min_agreement:.2f} "
                  f"(lower bound {contract.min_agreement_ci95_low:.2f})"
                  if rate is not None else f"{note}; memo refused: no input was witnessed twice, so there is no evidence the task repeats itself")
        raise _refuse(store, contract, generation, reason,
                      [{"name": "memo-determinism-evidence", "repeated": len(repeated), "consistent": len(consistent),
                        "rate": rate, "ci95_low": low, "min_agreement": contract.min_agreement, "passed": False}])
    entries = [(inputs[k], json.loads(groups[k][0])) for k in sorted(groups) if len(set(groups[k])) == 1]
    say(f"  {note}; compiling the exact-match memo of {len(entries)} consistently answered inputs ({evidence})")
    return compile_memo(store, task, entries, contract=contract, generation=generation, out_path=out_path,
                        reference_model=reference_model, _ws=ws, note=f"{note}; memo: {evidence}; "
                        f"{len(groups) - len(entries)} divergent inputs left out",
                        probes=_probes([e[0] for e in entries], set(groups)),
                        evidence={"repeated_inputs": len(repeated), "consistent": len(consistent), "rate": rate,
                                  "ci95_low": low, "specialist_eval_run": specialist_eval_id})


def _probes(inputs: list[dict[str, Any]], seen: set[str], limit: int = 50) -> list[dict[str, Any]]:
    """Never-witnessed variants of witnessed inputs (each string field gets a suffix), for memo gates."""
    out = []
    for inp in inputs[:limit]:
        probe = {k: (v + " [probe]" if isinstance(v, str) else v) for k, v in inp.items()}
        if canonical_json(probe) not in seen:
            out.append(probe)
    return out


def compile_memo(
    store: Any,
    task: str,
    entries: list[tuple[dict[str, Any], Any]],
    *,
    probes: list[dict[str, Any]],
    contract: Contract | None = None,
    generation: int | None = None,
    out_path: str | Path | None = None,
    reference_model: str | None = None,
    note: str | None = None,
    evidence: dict[str, Any] | None = None,
    _ws: list[Any] | None = None,
) -> CompileOutcome:
    """Compile an exact-match table (``compiled_as: memo``) of witnessed inputs → outputs.

    The artifact answers exactly the witnessed inputs with their given outputs and reports
    nonconformity 1.0 on anything else; its guard (``exact-match``) deopts every input that was
    not witnessed. The gate (:func:`auto.verify.run_memo_gate`) requires every witnessed output to
    be repeated exactly and every probe to miss.

    Args:
        store: the store (eval run and artifact are stored there).
        task: task name.
        entries: ``(input, output)`` pairs; one output per distinct input.
        probes: inputs that were never witnessed (all must miss).
        contract, generation, out_path, reference_model: as for :func:`compile_task`.
        note: prefix of the gate's reason (e.g. why the specialist was not used).
        evidence: the repetition evidence that justified tabulating (recorded in the manifest's
            ``parity.repetition`` and the eval run); its ``specialist_eval_run`` is cited too.

    Raises:
        GateRefused: a gate check failed (eval run stored). CompileError: no entries.
    """
    from auto_runtime import Artifact

    from auto.codegen import TableModel, compile_model
    from auto.emit import emit
    from auto.verify import run_memo_gate

    contract = contract or Contract.default_for(task)
    if generation is None:
        latest = store.latest_artifact(task)
        generation = (latest.generation + 1) if latest else 1
    if not entries:
        raise CompileError(f"no witnessed inputs to tabulate for task {task!r}")
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    table = TableModel(entries)
    code = compile_model(table)
    timings["codegen"] = time.perf_counter() - t0
    answers = sorted({canonical_json(e[1]) for e in entries})
    base = {
        "format": FORMAT,
        "task": task,
        "generation": generation,
        "compiled_as": "memo",
        "interface": {"input": input_schema([e[0] for e in entries]), "output": {"enum": [json_loads(a) for a in answers]}},
        "abi": {"exports": ["memory", "alloc", "run", "run_batch"], "encoding": "canonical-json"},
        "capabilities": [],
        "model": {**table.manifest_model(), "code_digest": digest_bytes(code)},
    }
    art = Artifact.load(emit(code, {**base, "guard": {"method": "none"}, "provisional": True}))
    t0 = time.perf_counter()
    record = run_memo_gate(contract=contract, run_batch=art.call_batch, reference_predict=lambda inp: table.predict(inp).answer,
                           witnessed=entries, probes=probes, candidate=base["model"], generation=generation, note=note)
    lat: list[float] = []
    for inp, _ in entries[:200]:
        t1 = time.perf_counter_ns()
        art.call(inp)
        lat.append((time.perf_counter_ns() - t1) / 1000.0)
    guard = {"method": "exact-match",
             "statement": "tier-1 only on inputs byte-identical (canonical JSON) to a witnessed input; every other input deopts"}
    record["guard"] = guard
    if evidence is not None:
        record["repetition_evidence"] = evidence
    eval_id = store.put_eval_run(record)
    timings["gate"] = time.perf_counter() - t0
    if record["verdict"] != "pass":
        raise GateRefused(record["reason"], eval_id)
    checks = {c["name"]: c for c in record["checks"]}
    wa = checks["witnessed-agreement"]
    parity = {"witnessed": {k: wa[k] for k in ("n", "agree", "rate", "ci95_low")}, "heldout": None,
              "probes": {"n": checks["unwitnessed-probes-miss"]["n"], "hits": checks["unwitnessed-probes-miss"]["hits"]},
              "repetition": evidence}
    ws = _ws if _ws is not None else store.witnesses(task)
    extra = [evidence["specialist_eval_run"]] if evidence and evidence.get("specialist_eval_run") else []
    return _emit_generation(store, task, generation, code, base, guard, parity, contract, eval_id, record["reason"], ws,
                            len(entries), reference_model, [e[0] for e in entries], lat, out_path, timings, table, None,
                            extra_eval_runs=extra)


def _emit_generation(store: Any, task: str, generation: int, code: bytes, base: dict[str, Any], guard: dict[str, Any],
                     parity: dict[str, Any], contract: Contract, eval_id: str, reason: str, ws: list[Any], n: int,
                     reference_model: str | None, fuel_inputs: list[dict[str, Any]], lat: list[float],
                     out_path: str | Path | None, timings: dict[str, float], model: Any, estimator: Any,
                     extra_eval_runs: list[str] | None = None) -> CompileOutcome:
    """Write the manifest, emit the ``.wasm``, store it, and write the file (atomically)."""
    from auto.emit import emit, read_manifest

    t0 = time.perf_counter()
    manifest = {
        **base,
        "contract": {"id": contract.id, **contract.model_dump()},
        "eval_runs": [*(extra_eval_runs or []), eval_id],
        "provenance": {
            "trace_ids": sorted({w.trace_id for w in ws}),
            "store_digest": store.digest(task),
            "witnesses": len(ws),
            "distinct_inputs": n,
            "reference_model": reference_model or _reference_model(store, task),
        },
        "parity": parity,
        "guard": guard,
        # Wall-clock latency is machine- and load-dependent: it is reported by the compile outcome,
        # not embedded, so the same witnesses always give the same bytes. The fuel count is the
        # deterministic, machine-independent measure of the compiled path's work.
        "latency_us": None,
        "fuel_per_call": _fuel_per_call(code, fuel_inputs),
        "cost_usd_micros_per_call": 0,
    }
    wasm = emit(code, manifest)
    manifest = read_manifest(wasm)  # as stored in the file (with its manifest_digest)
    aid = store.put_artifact(wasm, manifest, task, generation)
    path = Path(out_path) if out_path else Path(f"{task}.gen{generation}.wasm")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(wasm)
    tmp.replace(path)
    timings["emit"] = time.perf_counter() - t0
    latency = {"p50": _pctl(lat, 50), "p95": _pctl(lat, 95), "n": len(lat), "what": "Artifact.call in-process, JSON in/out, no guard"}
    sk = _sklearn_predict(estimator, model.features) if getattr(model, "features", None) is not None else None
    return CompileOutcome(task=task, generation=generation, reason=reason, eval_run_id=eval_id, artifact_id=aid,
                          latency_us=latency, artifact_bytes=len(wasm), artifact_path=path, wasm=wasm, manifest=manifest,
                          timings_s={k: round(v, 4) for k, v in timings.items()}, model=model, sklearn_predict=sk)


def _fuel_per_call(code: bytes, inputs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Fuel (≈ WebAssembly instructions) one ``run`` call consumes, over ``inputs``: p50/p95/max.

    Deterministic for the same code and inputs on any machine (wasmtime fuel metering), unlike
    wall-clock latency. None when there are no inputs.
    """
    import wasmtime

    if not inputs:
        return None
    cfg = wasmtime.Config()
    cfg.consume_fuel = True
    engine = wasmtime.Engine(cfg)
    module = wasmtime.Module(engine, code)
    used: list[int] = []
    budget = 10**10
    for inp in inputs:
        store = wasmtime.Store(engine)
        store.set_fuel(budget)
        ex = wasmtime.Instance(store, module, []).exports(store)
        data = canonical_json(inp).encode("utf-8")
        start = store.get_fuel()
        ptr = ex["alloc"](store, len(data))
        ex["memory"].write(store, data, ptr)
        ex["run"](store, ptr, len(data))
        used.append(start - store.get_fuel())
    used.sort()
    return {"p50": used[len(used) // 2], "p95": used[min(len(used) - 1, int(len(used) * 0.95))], "max": used[-1],
            "n": len(used)}


def _sklearn_predict(est: Any, spec: Any) -> Callable[[dict[str, Any]], Any] | None:
    if est is None:
        return None
    from auto.features import featurize_row

    # classes are canonical JSON texts internally; the task's answer is the JSON value
    return lambda inp: json.loads(est.predict(featurize_row(inp[spec.field], spec))[0])


def json_loads(text: str) -> Any:
    """Parse canonical JSON text (labels are kept as canonical JSON internally)."""
    return json.loads(text)
