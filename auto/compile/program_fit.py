"""Fitting a program to witnesses: K-fold cross-fitting of the synthesis procedure, and the choice of
its complexity by cross-validation when the witnesses are few.

The program rung does not spend witnesses on a fixed held-out split. Its *procedure* — synthesis
(:func:`auto.models.program.synth.synthesize`), the witnessed-domain guard (:mod:`auto.models.program.domain`),
the evidence expression and its event table (:mod:`auto.models.program.evidence`) — runs once per fold
on the other ``K - 1`` folds (stratified by answer when there are few distinct answers, seeded:
:func:`auto.compile.crossfit.fold_assignment`), and predicts the fold's witnesses
(:class:`auto.guards.program.OutOfFold`); the deployed program is the procedure run on every
witness. The out-of-fold agreement estimates the procedure's agreement on fresh inputs from the
same distribution (slightly pessimistic for the deployed program, which saw ``K/(K-1)`` as many
witnesses); the out-of-fold evidence calibrates the program's guard (:mod:`auto.guards.program`).

With at most :data:`FEW_SHOT_MAX` distinct witnesses (20–60 is typical of a new task), the
synthesizer gets every training witness (no internal selection split) and its complexity — the
weight of description length in the ranking, :data:`MDL_SCALES` — is chosen by the K-fold
agreement with the one-standard-error rule (among the settings within one standard error of the
best, the one preferring the smallest programs: L. Breiman et al., *Classification and Regression
Trees*, 1984, the rule CART uses to choose its pruning level by cross-validation). Choosing among
``m`` settings makes the chosen setting's out-of-fold agreement optimistic; the gate therefore
takes its lower bound at confidence ``1 - 0.05 / m`` (Bonferroni: the bounds of all ``m``
settings hold together with probability >= 95%). Above :data:`FEW_SHOT_MAX` the synthesizer keeps
its own selection split (:data:`SELECTION_FRACTION` of each training set) and one setting.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from auto.canonical import canonical_json
from auto.compile.crossfit import fold_assignment
from auto.compile.witnesses import MAX_STRATA
from auto.models.specialist.train import split_witnesses
from auto.models.program import ast as A
from auto.models.program.domain import guard_domain
from auto.models.program.evidence import (EventTable, ProgramEvidence, build_evidence, event_table, events, evaluate_fast,
                                   parts_of, same_answer)
from auto.models.program.synth import WRONG_COST, SynthResult, synthesize
from auto.guards.program import OutOfFold, confidence, novel, score

FEW_SHOT_MAX = 100
"""Up to this many distinct witnesses the synthesizer's complexity is chosen by cross-validation."""
MDL_SCALES = (0.125, 0.25, 0.5, 1.0)
"""The complexity settings compared with few witnesses: multipliers of the MDL ratio (the witnesses
one unit of description length is worth), a geometric grid from the default down. With a few dozen
witnesses the default makes a rule pay for itself only when it covers more witnesses than a rare
label has (a reject rule over 5 of 32), so smaller weights are tried; larger ones only lose rules."""
SELECTION_FRACTION = 0.25
"""Above :data:`FEW_SHOT_MAX`: the share of each training set the synthesizer's ranking is decided on."""
DEFAULT_FOLDS = 5
"""K of the cross-fit."""


@dataclass(frozen=True)
class Procedure:
    """One synthesis procedure: the MDL scale, whether the synthesizer keeps a selection split, and
    whether a record compiles per field (a field may deopt where it is unsure:
    :mod:`auto.models.program.synth.selective`)."""

    mdl_scale: float = 1.0
    selection: bool = True
    per_field: bool = False


@dataclass
class FittedProgram:
    """The procedure's result on one training set.

    Attributes:
        synth: the synthesis result (its ``program`` may be None).
        program: the synthesized program (None when synthesis found none).
        guarded: the program inside its witnessed-domain guard (what the artifact runs).
        guarded_extractors: the extractors the domain guard checks.
        evidence: the evidence of ``program`` (:func:`auto.models.program.evidence.build_evidence`).
        table: its event table on the training witnesses.
    """

    synth: SynthResult
    program: A.Node | None = None
    guarded: A.Node | None = None
    guarded_extractors: list[A.Node] = field(default_factory=list)
    evidence: ProgramEvidence | None = None
    table: EventTable | None = None


def _labels(items: Sequence[Any], folds: int = 1) -> list[str]:
    """The strata of a split: the answers when there are at most :data:`MAX_STRATA` of them and
    some answer has at least ``folds`` witnesses (stratifying K folds needs a label that fills
    them), else one stratum."""
    keys = [canonical_json(it[1]) for it in items]
    if len(set(keys)) > MAX_STRATA or max(Counter(keys).values(), default=0) < folds:
        return ["*"] * len(keys)
    return keys


def fit_procedure(items: Sequence[Any], field_name: str, proc: Procedure, seed: int, *, proposer: Any = None,
                  time_budget_s: float = 30.0) -> FittedProgram:
    """Run the procedure on ``items`` (distinct inputs ``(input, answer, share)``): synthesize, wrap
    in the domain guard, build the evidence and count its events on ``items``."""
    pairs = [(it[0], it[1]) for it in items]
    if proc.selection and len(pairs) >= 8:
        rest, sel = split_witnesses(_labels(items), SELECTION_FRACTION, seed)
        res = synthesize([pairs[i] for i in rest], field=field_name, heldout=[pairs[i] for i in sel],
                         proposer=proposer, mdl_scale=proc.mdl_scale, time_budget_s=time_budget_s,
                         per_field=proc.per_field)
    else:
        res = synthesize(pairs, field=field_name, proposer=proposer, mdl_scale=proc.mdl_scale,
                         time_budget_s=time_budget_s, per_field=proc.per_field)
    out = FittedProgram(res)
    if res.program is None:
        return out
    inputs = [p[0] for p in pairs]
    out.program = res.program
    out.guarded, out.guarded_extractors = guard_domain(res.program, inputs)
    dev = {k: f.default_evidence for k, f in res.per_field.items()}
    out.evidence = build_evidence(res.program, pairs, field_name, dev)
    out.table = event_table(out.evidence, res.program, pairs)
    return out


def _selective(fp: FittedProgram) -> bool:
    """Whether the fitted program has a field that deopts where it is unsure (per field)."""
    return fp.program is not None and any(f.kind == "selective" for f in fp.synth.per_field.values())


RIGHT, WRONG, DEOPT = "right", "wrong", "deopt"
"""A field's out-of-fold outcome on one witness (:func:`field_outcomes`)."""


def field_outcomes(fp: FittedProgram, inp: dict, ref: Any) -> dict[str, str]:
    """Per record field, the fold's part program on one witness not in its training set:
    :data:`RIGHT`, :data:`WRONG` or :data:`DEOPT` (the part deopted where it is unsure, or the fold
    found no program for that field). Each field is judged on its own part, also when another
    field left the fold without a record program (so one field's misfit does not count as the
    others' misses); the record's own outcome is :func:`predict`'s. ``{}`` for a scalar answer."""
    if not isinstance(ref, dict):
        return {}
    out = {}
    for name, f in fp.synth.per_field.items():
        if not name or name not in ref:
            continue
        if f.program is None:
            out[name] = DEOPT
            continue
        d, v = evaluate_fast(f.program, inp)
        out[name] = DEOPT if d else RIGHT if same_answer(v, ref[name]) else WRONG
    return out


def predict(fp: FittedProgram, inp: dict, ref: Any, alpha: float = 0.05) -> OutOfFold:
    """The fitted program's prediction of one witness not in its training set, with its own
    guard's novelty decision at level ``alpha``."""
    if fp.program is None:
        return OutOfFold(True, False, {}, {}, None)
    deopt, _value = evaluate_fast(fp.guarded, inp)
    if deopt:
        return OutOfFold(True, False, {}, {}, None)
    ev = events(fp.evidence, inp)
    if ev is None:
        return OutOfFold(True, False, {}, {}, None)
    parts = {}
    for name, p in parts_of(fp.program):
        d, v = evaluate_fast(p, inp)
        want = ref.get(name) if name and isinstance(ref, dict) else ref
        parts[name] = (not d) and same_answer(v, want)
    return OutOfFold(False, all(parts.values()), parts, {k: score(fp.table, k, e) for k, e in ev.items()},
                     confidence(fp.table, ev), {k: e[1] for k, e in ev.items()}, novel(fp.table, ev, alpha))


@dataclass
class ProgramFit:
    """Cross-fit of the chosen procedure, and the deployed program.

    Attributes:
        procedure: the chosen procedure.
        folds: K.
        oof: one :class:`~auto.guards.program.OutOfFold` per item, in item order.
        fields_oof: per item (in item order), each record field's outcome (:func:`field_outcomes`).
        settings: per procedure compared, ``{"mdl_scale", "selection", "agree", "n", "rate"}``.
        final: the procedure on every item (the deployed program).
        seconds: wall time of the whole fit.
    """

    procedure: Procedure
    folds: int
    oof: list[OutOfFold]
    settings: list[dict[str, Any]]
    final: FittedProgram
    seconds: float
    fields_oof: list[dict[str, str]] = field(default_factory=list)

    @property
    def compared(self) -> int:
        """How many procedures the choice compared (the Bonferroni factor of the gate's bound): every
        procedure tried, whether or not it was cross-fitted to the end."""
        return len(self.settings)

    @property
    def agree(self) -> int:
        """Out-of-fold witnesses answered right (a deopt is a miss)."""
        return sum(o.correct for o in self.oof)

    @property
    def answered(self) -> int:
        """Out-of-fold witnesses the fold programs answered (did not deopt)."""
        return sum(not o.deopt for o in self.oof)

    def field_agreement(self) -> dict[str, dict[str, int]]:
        """Per record field, over the out-of-fold witnesses: ``{"witnesses", "answered", "agree"}``
        (``answered``: the field's fold part did not deopt; ``agree``: it answered right), each
        field judged on its own part (:func:`field_outcomes`); ``{}`` for a scalar answer."""
        out: dict[str, dict[str, int]] = {}
        for rec in self.fields_oof:
            for name, o in rec.items():
                c = out.setdefault(name, {"witnesses": 0, "answered": 0, "agree": 0})
                c["witnesses"] += 1
                c["answered"] += o != DEOPT
                c["agree"] += o == RIGHT
        return dict(sorted(out.items()))

    def part_agreement(self) -> dict[str, dict[str, Any]]:
        """Per part: out-of-fold ``{"n", "agree", "rate"}`` (a deopt counts as a miss for every part)."""
        names = [n for n, _p in parts_of(self.final.program)] if self.final.program is not None else []
        out = {}
        for name in names:
            k = sum(1 for o in self.oof if not o.deopt and o.parts_correct.get(name))
            out[name] = {"n": len(self.oof), "agree": k, "rate": k / len(self.oof) if self.oof else None}
        return out


def cross_fit(items: Sequence[Any], field_name: str, proc: Procedure, *, folds: int, seed: int, alpha: float = 0.05,
              time_budget_s: float = 30.0, max_misses: int | None = None,
              ) -> tuple[list[OutOfFold], list[dict[str, str]]] | None:
    """Out-of-fold predictions of ``proc`` for every item (in item order), and each record field's
    outcome (:func:`field_outcomes`); ``alpha`` is the novelty level of each fold's guard. With
    ``max_misses``, None as soon as more witnesses than that are missed (the procedure cannot
    reach the gate's agreement; the remaining folds are not run)."""
    k = max(2, min(folds, len(items)))
    fold = fold_assignment(_labels(items, k), k, seed)
    out: list[OutOfFold | None] = [None] * len(items)
    per: list[dict[str, str]] = [{} for _ in items]
    misses = 0
    for f in range(k):
        test = [i for i in range(len(items)) if fold[i] == f]
        if not test:
            continue
        fp = fit_procedure([items[i] for i in range(len(items)) if fold[i] != f], field_name, proc, seed,
                           time_budget_s=time_budget_s)
        for i in test:
            out[i] = predict(fp, items[i][0], items[i][1], alpha)
            per[i] = field_outcomes(fp, items[i][0], items[i][1])
            misses += not out[i].correct
        if max_misses is not None and misses > max_misses:
            return None
    return [o if o is not None else OutOfFold(True, False, {}, {}, None) for o in out], per


def fit_program(items: Sequence[Any], field_name: str, *, folds: int = DEFAULT_FOLDS, seed: int = 0, alpha: float = 0.05,
                min_agreement: float | None = None, proposer: Any = None, say: Callable[[str], None] | None = None,
                time_budget_s: float = 30.0, per_field: bool = False) -> ProgramFit:
    """Choose the procedure (by cross-validation with few witnesses), cross-fit it and fit the
    deployed program on every item.

    A procedure that finds no program on all the items is not cross-fitted (its folds, with fewer
    witnesses, would not do better), and above :data:`FEW_SHOT_MAX` witnesses, with
    ``min_agreement``, a cross-fit stops once it has missed more witnesses than that agreement
    allows; a compile that cannot pass costs one synthesis per procedure, not one per fold.

    Args:
        items: the distinct witnessed inputs ``(input, modal answer, share)``.
        field_name: the input's text field.
        folds: K (at most the number of items).
        seed: fold assignment and selection split seed.
        alpha: the novelty level of the fold programs' guards (the contract's ``alpha``).
        min_agreement: the gate's out-of-fold agreement (0..1), to stop hopeless cross-fits early.
        proposer: optional LLM-guided proposer, used for the deployed program only.
        say: progress callback.
        time_budget_s: each synthesis's wall-clock budget, in seconds (per part).
        per_field: a record compiles per field (:class:`Procedure`); a procedure whose program
            has a field that deopts where unsure is scored by out-of-fold ``right - WRONG_COST *
            wrong`` (a deopt is neither, as in the synthesizer's ranking) and its cross-fit never
            stops early (its deopts are not misses); the others as without ``per_field``.

    Returns:
        The :class:`ProgramFit`; its ``final.program`` is None when no procedure found a program,
        and its ``oof`` is empty when no procedure was cross-fitted to the end.
    """
    t0 = time.perf_counter()
    say = say or (lambda _m: None)
    k = max(2, min(folds, len(items)))
    if len(items) <= FEW_SHOT_MAX:
        procs = [Procedure(s, selection=False, per_field=per_field) for s in MDL_SCALES]
    else:
        procs = [Procedure(1.0, selection=True, per_field=per_field)]
    # with few witnesses every procedure is cross-fitted to the end (cheap, and its per-field agreement is reported)
    max_misses = (None if min_agreement is None or len(items) <= FEW_SHOT_MAX
                  else int(math.floor((1.0 - min_agreement) * len(items) + 1e-9)))
    runs = []
    fulls: dict[Procedure, FittedProgram] = {}
    settings = []
    for proc in procs:
        full = fit_procedure(items, field_name, proc, seed, time_budget_s=time_budget_s)
        fulls[proc] = full
        oof = per = None
        if full.program is not None:
            cf = cross_fit(items, field_name, proc, folds=k, seed=seed, alpha=alpha, time_budget_s=time_budget_s,
                           max_misses=None if _selective(full) else max_misses)
            oof, per = cf if cf is not None else (None, None)
        agree = sum(o.correct for o in oof) if oof is not None else None
        score = agree
        if oof is not None and _selective(full):  # a wrong answer costs WRONG_COST deopts, as in the synthesizer's ranking
            score = agree - WRONG_COST * sum(1 for o in oof if not o.deopt and not o.correct)
        settings.append({"mdl_scale": proc.mdl_scale, "selection": proc.selection, "agree": agree, "n": len(items),
                         "rate": agree / len(items) if agree is not None and items else None,
                         "note": None if oof is not None else ("no program on all witnesses" if full.program is None
                                                               else f"stopped: more than {max_misses} out-of-fold misses")})
        if oof is not None:
            runs.append((proc, oof, score, per))
    if len(procs) > 1:
        say("  out-of-fold agreement by complexity: " + ", ".join(
            f"mdl x{st['mdl_scale']:g} " + (f"{st['agree']}/{len(items)}" if st["agree"] is not None else st["note"])
            for st in settings))
    if not runs:  # nothing to deploy: the first procedure's full fit says why
        best_full = next((f for f in fulls.values() if f.program is not None), fulls[procs[0]])
        return ProgramFit(procs[0], k, [], settings, best_full, time.perf_counter() - t0)
    best = max(r[2] for r in runs)
    n = max(1, len(items))
    p_hat = min(1.0, max(0.0, best / n))
    se = math.sqrt(p_hat * (1 - p_hat) / n) * n  # one standard error, in witnesses
    # the simplest procedure within one standard error of the best (largest MDL scale)
    chosen = max((r for r in runs if r[2] >= best - se - 1e-9), key=lambda r: (r[0].mdl_scale, r[2]))
    if len(runs) > 1:
        say(f"  chose mdl x{chosen[0].mdl_scale:g}")
    final = fulls[chosen[0]] if proposer is None else fit_procedure(items, field_name, chosen[0], seed, proposer=proposer,
                                                                     time_budget_s=time_budget_s)
    return ProgramFit(chosen[0], k, chosen[1], settings, final, time.perf_counter() - t0, chosen[3])


__all__ = ["DEFAULT_FOLDS", "DEOPT", "FEW_SHOT_MAX", "MDL_SCALES", "RIGHT", "SELECTION_FRACTION", "WRONG", "FittedProgram",
           "Procedure", "ProgramFit", "cross_fit", "field_outcomes", "fit_procedure", "fit_program", "predict"]
