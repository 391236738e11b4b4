"""The specialist rung: distill a small classifier from the witnesses, calibrate its guard, gate it.

1. distinct inputs with their modal outputs (a divergent input contributes its modal output
   weighted by its share);
2. a deterministic split of distinct inputs (stratified by label) into training, calibration and
   held-out sets (fractions from the contract);
3. distill candidates on the training set and select on the calibration set
   (:func:`auto.models.specialist.train.distill`);
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
from collections import Counter
from functools import partial
from dataclasses import dataclass
from typing import Any, Callable

from auto_runtime import Artifact
from auto_runtime.manifest import Interface

from auto.canonical import canonical_json, digest_bytes
from auto.codegen import TableModel, compile_model, compile_table
from auto.codegen.table import HIT_MARGIN
from auto.compile.context import RungContext
from auto.compile.crossfit import choose_config, cross_fit, fit, folds_for
from auto.progress import LINE_EVERY_S, Progress
from auto.compile.generation import CompileOutcome, emit_generation
from auto.compile.manifest import ManifestDraft
from auto.compile.measure import call_latency_us
from auto.compile.witnesses import WitnessSet, input_schema, main_text_field, split_three, text_fields
from auto.models.specialist.train import default_specs, distill
from auto.emit import emit
from auto.errors import CompileError, RungRefused
from auto.guards.noise import ReferenceNoise, first_witnessed, reference_noise
from auto.guards.stack import calibrate_stack, without_scores
from auto.gate import CheckName, Contract, EvalRun, Verdict, run_selective_gate

NAME = "specialist"

EPSILON_MEANING = (
    "epsilon bounds P(tier-1 answer != the reference's answer on a fresh call | the specialist answers), on inputs "
    "exchangeable with the witnesses; the witnessed answers it is calibrated against are single reference calls, so "
    "the reference's own disagreement with itself is counted against the specialist. Table hits repeat a witnessed "
    "reference answer: their disagreement with a fresh reference answer equals the reference's disagreement with "
    "itself on that input (zero excess) as long as the reference's behaviour on an input does not change.")

EXCESS_EPSILON_MEANING = (
    "epsilon bounds the excess: P(tier-1 answer != the reference's answer on a fresh call | the specialist answers) "
    "minus the reference's own disagreement rate between two calls (its lower bound from the re-asked inputs, "
    "guard.components[].reference_noise), on inputs exchangeable with the witnesses; the specialist is calibrated "
    "against each input's first witnessed answer (one call). Table hits repeat a witnessed reference answer: zero "
    "excess as long as the reference's behaviour on an input does not change.")

CROSSFIT_NOTE = (
    "calibrated on {k}-fold out-of-fold predictions (cross-fit): the Learn-then-Test and conformal statements hold "
    "exactly for the fold models; for the deployed model, trained on every witness, they hold under the assumption "
    "that refitting on all witnesses does not make its admitted answers worse (cross-conformal strength, weaker than "
    "split-conformal)")


OPEN_ENDED_SHARE = 0.75
"""Largest share of distinct inputs whose output no other input has (the Good-Turing estimate of the chance
that a fresh input's output was never witnessed; Good, Biometrika 40, 1953) at which a classifier is still
tried. Above it a classifier over witnessed labels could answer at most a quarter of fresh inputs right.
Counting shared outputs, not distinct ones, keeps a many-label task (77 labels at 40-100 witnesses) a
classification: uniform over 64 labels, 40 witnesses leave about 54% of them singletons, 100 about 21%;
an identifier unique per input leaves 100%."""


def open_ended_share(label_keys: list[str]) -> float:
    """Share of ``label_keys`` (one per distinct input) whose label occurs exactly once; 0.0 when empty."""
    if not label_keys:
        return 0.0
    counts = Counter(label_keys)
    return sum(1 for k in label_keys if counts[k] == 1) / len(label_keys)


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
                           reason=reason, notes=notes, cal_labels=[o.get("answer") for o in cal_out],
                           held_labels=[o.get("answer") for o in held_out])


def _classification_inputs(ws: WitnessSet, contract: Contract,
                           ctx: RungContext) -> tuple[list[Any], Any, str | None, list[str], list[str]]:
    """The witnesses as a classification task, or the refusal that says why they are not one.

    Returns:
        ``(items, excluded, field, label_keys, labels)``: the distinct inputs with their modal
        outputs and what :meth:`WitnessSet.dominant` excluded, the text field the specialist reads,
        each item's canonical label and the sorted distinct labels.

    Raises:
        RungRefused: no input field is a string in every witness, too few distinct inputs (final
            when there are none), a single label, or open-ended outputs
            (:data:`OPEN_ENDED_SHARE`).
    """
    items, excluded = ws.dominant()
    n = len(items)
    field = main_text_field([it[0] for it in items])
    if n and field is None:
        raise ctx.refuse(NAME, contract, "no input field is a string in every witness: a specialist reads one text field",
                         [{"name": "one-text-field", "passed": False}])
    if n < contract.min_witnesses:
        reason = f"only {n} distinct witnessed inputs; the specialist needs {contract.min_witnesses}{ws.redacted_note()}"
        r = _not_attempted(ctx, contract, reason,
                           [{"name": "enough-witnesses", "n": n, "min": contract.min_witnesses, "passed": False}])
        r.final = n == 0
        raise r
    label_keys = [canonical_json(it[1]) for it in items]
    labels = sorted(set(label_keys))
    if len(labels) < 2:
        raise ctx.refuse(NAME, contract, f"every witness has the same output {labels[0]}; nothing to classify "
                         "(a constant is not compiled as a specialist)",
                         [{"name": "two-or-more-labels", "labels": len(labels), "passed": False}])
    singletons = open_ended_share(label_keys)
    if singletons > OPEN_ENDED_SHARE:
        reason = (f"{len(labels)} distinct outputs for {n} distinct inputs, {singletons:.0%} of the inputs with an output "
                  "no other input has: most outputs are unique, so a classifier over witnessed labels cannot generalize "
                  "(open-ended outputs need the program rung)")
        raise _not_attempted(ctx, contract, reason,
                             [{"name": "outputs-are-labels", "labels": len(labels), "n": n,
                               "singleton_share": singletons, "max": OPEN_ENDED_SHARE, "passed": False}])
    return items, excluded, field, label_keys, labels


def compile_rung(ws: WitnessSet, contract: Contract, ctx: RungContext) -> CompileOutcome:
    """Distill, calibrate, gate and emit a specialist generation (memo-first with ``ctx.memo_first``).

    The guard is calibrated by cross-fitting (``contract.calibration == "cross-fit"``, the default:
    every distinct input trains the deployed model and calibrates the guard through its
    out-of-fold prediction) or on a calibration split (``"split"``: train / calibration /
    held-out). The gate (:func:`auto.gate.run_selective_gate`) requires the guard to certify the
    selective risk of the answers it lets through; overall agreement is reported.

    Raises:
        RungRefused: too few witnesses, open-ended outputs (both: the memo rung may follow), a
            single label or too few witnesses per label to split (final: nothing below helps), or
            the gate refused (the eval run is stored and cited either way).
        CompileError, CodegenError: a stage failed for a reason other than the gate.
    """
    items, excluded, field, label_keys, labels = _classification_inputs(ws, contract, ctx)
    n = len(items)
    fit_ = partial(_cross_fitted, groups_of=witness_groups(ws)) if contract.calibration == "cross-fit" else _split_calibrated
    s = fit_(items, label_keys, labels, contract, ctx, field)
    model = s.model
    timings = s.timings
    t0 = time.perf_counter()
    code = compile_model(model)
    draft = ManifestDraft(
        task=ctx.task, generation=ctx.generation, compiled_as="specialist",
        interface=Interface(input=input_schema([it[0] for it in items]), output={"enum": [json.loads(x) for x in labels]}),
        model={"kind": model.kind, "estimator": model.estimator, "classes": [json.loads(c) for c in model.classes],
               "features": model.features.to_dict(), "prototypes": int(model.P.shape[0]), "code_digest": digest_bytes(code),
               "calibration": s.calibration, "excluded_inputs": excluded,
               "fields_not_read": [f for f in text_fields([it[0] for it in items]) if f != field]})
    provisional = Artifact.load(emit(code, draft.provisional()))
    timings["codegen"] = time.perf_counter() - t0
    guard = s.guard(provisional)
    t0 = time.perf_counter()
    if ctx.memo_first:
        table = TableModel([(items[i][0], items[i][1]) for i in s.table_idx], fallback=model)
        code, decl = compile_table(table)
        predictor: Any = table
        draft = draft.with_model(table.compiled_as, kind=table.compiled_as, table_entries=len(table),
                                 specialist_kind=model.kind, table=decl, code_digest=digest_bytes(code))
        candidate = Artifact.load(emit(code, draft.provisional()), table_fast_path=False)  # the gate runs the code
        if guard["fallback_reason"] is None:
            thr = guard["components"][-1]["threshold"]
            if thr is not None and thr > HIT_MARGIN:  # a table hit reports HIT_MARGIN (docs/architecture.md)
                note = (f"the certified margin threshold {thr:.9g} exceeds the margin {HIT_MARGIN} a table hit reports, "
                        "so witnessed (table) inputs deopt as well")
                guard["components"][-1]["notes"].append(note)
                guard["statement"] = f"{guard['statement']}; {note}"
    else:
        predictor = model
        candidate = provisional
    guard["epsilon_refers_to"] = epsilon_meaning(guard)
    timings["codegen"] = timings.get("codegen", 0.0) + time.perf_counter() - t0

    t0 = time.perf_counter()
    held = [(items[i][0], items[i][1]) for i in s.held_idx]
    record = run_selective_gate(
        contract=contract,
        run_batch=candidate.call_batch,
        reference_predict=lambda inp: predictor.predict(inp).answer,
        witnessed=[(it[0], it[1]) for it in items],
        heldout=held,
        labels=[json.loads(x) for x in labels],
        guard=guard,
        estimate=s.estimate,
        candidate={**draft.model, "sklearn_agreement": s.distilled.sklearn_agreement,
                   "candidates": [{"model": c.model, "features": c.features.to_dict(), "train_agreement": c.train_agreement,
                                   "calibration_agreement": c.heldout_agreement,
                                   "calibration_selective_coverage": c.heldout_selective_coverage} for c in s.candidates]},
        generation=ctx.generation,
    )
    timed = [p[0] for p in held] or [items[i][0] for i in s.table_idx]
    lat = call_latency_us(candidate, timed)
    record["guard"] = without_scores(guard)
    eval_id = ctx.store.put_eval_run(record)
    timings["gate"] = time.perf_counter() - t0
    run = EvalRun.from_record(record)
    if run.verdict is not Verdict.PASS:
        raise RungRefused(NAME, run.reason, eval_id, citation=f"specialist refused (eval run {eval_id}: {run.reason})")
    ov, wa = run.check(CheckName.OVERALL_AGREEMENT), run.check(CheckName.WITNESSED_AGREEMENT)
    parity = {"witnessed": {k: wa[k] for k in ("n", "agree", "rate", "ci95_low")},
              "heldout": {"method": ov["method"], **{k: ov[k] for k in ("n", "agree", "rate", "ci95_low")}}}
    return emit_generation(ctx, contract, draft, code, candidate, guard=guard, parity=parity, eval_runs=[eval_id],
                           reason=record["reason"], witnesses=ws.witnesses, store_digest=ws.store_digest, distinct_inputs=n, fuel_inputs=timed,
                           latency=lat, timings=timings, model=model, estimator=s.distilled.estimator)


@dataclass
class _Fitted:
    """What a calibration mode hands to the common part of the rung."""

    model: Any
    distilled: Any
    candidates: list[Any]
    calibration: dict[str, Any]
    guard: Callable[[Any], dict[str, Any]]
    table_idx: list[int]
    held_idx: list[int]
    estimate: dict[str, Any]
    timings: dict[str, float]


def witness_groups(ws: WitnessSet) -> dict[str, list[str]]:
    """Canonical input (as :func:`auto.canonical.canonical_json` writes it) → its canonical outputs in store order."""
    return {canonical_json(ws.inputs[k]): outs for k, outs in ws.groups.items()}


def epsilon_meaning(guard: dict[str, Any]) -> str:
    """What the guard's epsilon bounds: :data:`EXCESS_EPSILON_MEANING` when its risk component is
    the certificate on the excess, else :data:`EPSILON_MEANING`."""
    risk = next((c for c in guard.get("components") or [] if c.get("method") == "selective-risk"), None) or {}
    return EXCESS_EPSILON_MEANING if (risk.get("reference_noise") or {}).get("used") else EPSILON_MEANING


def noise_evidence(groups: dict[str, list[str]], items: list[Any], answers: Any) -> tuple[ReferenceNoise, list[bool]]:
    """The reference's self-disagreement over ``items`` (:func:`auto.guards.noise.reference_noise`)
    and, per item, whether ``answers[i]`` equals its first witnessed answer (the excess
    certificate's labels). ``groups``: canonical input → canonical outputs in store order."""
    keys = [canonical_json(it[0]) for it in items]
    first = first_witnessed(groups)
    single = [canonical_json(a) == first.get(k, canonical_json(it[1])) for a, k, it in zip(answers, keys, items)]
    return reference_noise(groups, keys), single


def _cross_fitted(items: list[Any], label_keys: list[str], labels: list[str], contract: Contract,
                  ctx: RungContext, field: str, groups_of: dict[str, list[str]] | None = None) -> _Fitted:
    largest = max(Counter(label_keys).values())
    if largest < 2:
        raise ctx.refuse(NAME, contract, "no output has two witnessed inputs: cross-fitting needs a label in at least two folds",
                         [{"name": "folds-fit-the-data", "largest_label": largest, "passed": False}])
    # StratifiedKFold needs K <= the largest label's count; a smaller label is spread over as many folds as it has inputs
    folds = min(folds_for(len(items), contract.folds), largest)
    t0 = time.perf_counter()
    config, selection = choose_config(items, contract.seed, field=field)
    with Progress("  cross-fit folds fitted", folds, ctx.say, every_s=LINE_EVERY_S) as fitted:
        cf = cross_fit(items, config, folds=folds, seed=contract.seed, progress=lambda done, _k: fitted.advance())
    final = fit(items, config, contract.seed)
    timings = {"distill": time.perf_counter() - t0}
    ctx.say(f"  {len(items)} distinct inputs, {len(labels)} labels: {config.model} over "
            f"{config.features.n_min}-{config.features.n_max}-grams"
            f"{f' + word 1-{config.features.word_max}-grams x{config.features.word_weight}' if config.features.word_max else ''}, "
            f"{cf.folds}-fold cross-fit agreement "
            f"{cf.agreement:.3f}")

    def guard(_art: Any) -> dict[str, Any]:
        t1 = time.perf_counter()
        noise, single = noise_evidence(groups_of or {}, items, cf.answers)
        g = calibrate_stack(list(cf.scores), list(cf.margins), list(cf.correct), [], [], [], alpha=contract.alpha,
                            epsilon=contract.epsilon, delta=contract.delta, notes=[CROSSFIT_NOTE.format(k=cf.folds)],
                            noise=noise, noise_min_reasked=contract.noise_min_reasked, cal_correct_single=single,
                            cal_labels=list(cf.answers))
        timings["calibrate"] = time.perf_counter() - t1
        return g

    return _Fitted(model=final.model, distilled=final, candidates=list(selection.candidates),
                   calibration={"method": "cross-fit", "folds": cf.folds, "selected_by": "agreement on a 25% selection split"},
                   guard=guard, table_idx=list(range(len(items))), held_idx=[],
                   estimate={"method": f"{cf.folds}-fold out-of-fold", "n": len(items), "agree": sum(cf.correct)},
                   timings=timings)


def _split_calibrated(items: list[Any], label_keys: list[str], labels: list[str], contract: Contract,
                      ctx: RungContext, field: str) -> _Fitted:
    train_idx, cal_idx, held_idx = split_three([it[1] for it in items], contract.heldout_fraction,
                                               contract.calibration_fraction, contract.seed, max_strata=None)
    if not held_idx or not cal_idx:
        raise ctx.refuse(NAME, contract, "too few witnesses per label to hold out a calibration and a held-out set",
                         [{"name": "splits-nonempty", "heldout": len(held_idx), "calibration": len(cal_idx),
                           "passed": False}], final=True)
    ctx.say(f"  {len(items)} distinct inputs, {len(labels)} labels: train {len(train_idx)}, calibration {len(cal_idx)}, "
            f"held-out {len(held_idx)}")
    t0 = time.perf_counter()
    dres = distill([items[i] for i in train_idx], default_specs(field),
                   heldout=[items[i] for i in cal_idx], seed=contract.seed)
    timings = {"distill": time.perf_counter() - t0}
    ctx.say(f"  distilled: {dres.selected.model} over {dres.model.features.n_min}-{dres.model.features.n_max}-grams, "
            f"calibration agreement {dres.selected.heldout_agreement:.3f}")
    held_answers = [dres.model.predict(items[i][0]).label for i in held_idx]

    def guard(art: Any) -> dict[str, Any]:
        # calibrate on the artifact's own outputs (scores, margins and answers computed in WebAssembly)
        t1 = time.perf_counter()
        cal_out = art.call_batch([items[i][0] for i in cal_idx])
        if any("error" in o for o in cal_out):
            raise CompileError("the candidate returned errors on calibration inputs")
        held_out = art.call_batch([items[i][0] for i in held_idx])
        missing = sorted(set(labels) - {label_keys[i] for i in cal_idx})
        # A label absent from the calibration split is recorded, not fatal: the certificate is
        # marginal over inputs exchangeable with the calibration inputs, which a rare label does
        # not invalidate; making it fatal would make every task with one rare label always deopt.
        g = calibrate_guard_stack(
            cal_out, [items[i][1] for i in cal_idx], held_out, [items[i][1] for i in held_idx], contract,
            notes=[f"{len(missing)} witnessed label(s) never occur in the calibration split ({', '.join(missing[:3])}"
                   f"{', ...' if len(missing) > 3 else ''}): the certificate is marginal over all inputs and says nothing "
                   "about answers of those labels in particular"] if missing else None)
        timings["calibrate"] = time.perf_counter() - t1
        return g

    agree = sum(1 for i, a in zip(held_idx, held_answers) if a == label_keys[i])
    return _Fitted(model=dres.model, distilled=dres, candidates=list(dres.candidates),
                   calibration={"method": "split", "train": len(train_idx), "calibration": len(cal_idx),
                                "heldout": len(held_idx)},
                   guard=guard, table_idx=sorted(train_idx + cal_idx), held_idx=held_idx,
                   estimate={"method": "held-out", "n": len(held_idx), "agree": agree}, timings=timings)
