"""The guard of a program with a stated meaning: calibration of the ``program-evidence`` entry.

A program artifact reports, beside its answer, the evidence of every part
(:mod:`auto.models.program.evidence`): the rule that decided it and the kind of evidence behind that rule
on this input (an *event*). The guard (``auto_runtime.guard.program``) answers at tier 1 iff:

1. the program did not deopt (its own ``Deopt`` nodes, including the witnessed-domain guard);
2. **unwitnessed evidence**: no part's evidence is of a kind that marks an unwitnessed
   generalization (a contested precedence, a split version space: :data:`auto.models.program.evidence.UNWITNESSED_KINDS`);
   how often that deopts inputs like the witnesses is measured out of fold;
3. **novelty, per part**: the part's nonconformity ``s = 1 - support(event) / n`` (``support`` =
   the witnesses on which the same event occurred, of ``n``) has a conformal p-value
   ``(1 + #{c >= s}) / (n + 1)`` against the witnesses' own leave-one-out scores (each witness's
   event share among the other ``n - 1``: the jackknife form of full conformal prediction) above
   ``alpha / parts`` (Bonferroni over the parts, so a record is deopted by novelty with probability
   at most ``alpha`` on inputs exchangeable with the witnesses, up to the program being fitted to
   them; Vovk, Gammerman, Shafer, *Algorithmic Learning in a Random World*, 2005). A rule that
   decided few witnesses, or a default reached without its evidence where that is rare, deopts;
4. **selective risk**: the record's confidence, the smallest over its parts of the event's
   Laplace-smoothed precision on the training witnesses, is at least a threshold chosen by
   Learn-then-Test (every threshold tested, Bonferroni-Holm family-wise control, since the
   precision need not rank the risk monotonically; ``mapie.risk_control``, :mod:`auto.guards.risk`), so
   that on inputs exchangeable with the calibration inputs P(tier-1 record != reference | tier-1)
   <= epsilon with probability >= 1 - delta. With too few calibration points to certify epsilon
   (``(1 - epsilon)^n > delta``: fewer than 45 at 0.05 / 0.1) no threshold is applied and the entry
   says so; the program's gate is then its out-of-fold agreement bound alone.

The risk calibration uses out-of-fold predictions (:mod:`auto.compile.program_fit`): each witness
is predicted, and passed or deopted, by the guard of a program synthesized without it (that
fold's event table and leave-one-out scores). The deployed program is synthesized from all
witnesses, so the risk statement holds for it under the cross-validation assumption that
refitting on every witness does not make its admitted answers worse (cross-conformal strength:
V. Vovk, "Cross-conformal predictors", Annals of Mathematics and Artificial Intelligence 74,
2015). Nothing is claimed for inputs that are not exchangeable with the
witnesses: there the evidence conditions are what deopts, and the bench measures them.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field
from typing import Any, Sequence

from auto.errors import ArgumentError
from auto.models.program.evidence import KIND_NAMES, UNWITNESSED_KINDS, EventTable, ProgramEvidence
from auto.guards.risk import calibrate_selective_risk, min_points

CONFIDENCE = "the smallest, over the record's parts, of the deciding event's Laplace-smoothed precision on the training witnesses"


@dataclass(frozen=True)
class OutOfFold:
    """One witness predicted by a program synthesized without it.

    Attributes:
        deopt: the fold's program deopted (its domain guard, or no program in that fold).
        correct: the fold's answer equals the witnessed answer (False on a deopt).
        parts_correct: per part, whether that part was right (empty on a deopt).
        scores: per part, the nonconformity ``1 - support / n`` under the fold's event table.
        confidence: the record confidence under the fold's table (None on a deopt).
        kinds: per part, the kind of its evidence (empty on a deopt).
        novel: the fold's novelty test deopted it (some part's p-value at or below its level).
    """

    deopt: bool
    correct: bool
    parts_correct: dict[str, bool]
    scores: dict[str, float]
    confidence: float | None
    kinds: dict[str, int] = field(default_factory=dict)
    novel: bool = False

    @property
    def unwitnessed(self) -> bool:
        """Some part's evidence is of a kind that marks an unwitnessed generalization (:data:`~auto.models.program.evidence.UNWITNESSED_KINDS`)."""
        return any(k in UNWITNESSED_KINDS for k in (self.kinds or {}).values())


def score(table: EventTable, part: str, event: tuple[int, int]) -> float:
    """The part's nonconformity for ``event``: ``1 - support / n`` (1.0 for an unseen event or n = 0)."""
    if table.n <= 0:
        return 1.0
    return 1.0 - table.support(part, event) / table.n


def confidence(table: EventTable, events: dict[str, tuple[int, int]]) -> float:
    """The record's confidence: the smallest part precision (:meth:`EventTable.precision`)."""
    return min(table.precision(p, e) for p, e in events.items()) if events else 0.0


def p_value(cal: Sequence[float], s: float) -> float:
    """The conformal p-value ``(1 + #{c >= s}) / (len(cal) + 1)`` of ``s`` against the ascending
    calibration scores ``cal`` (both rounded to 9 digits, as the runtime compares them)."""
    s = round(s, 9)
    return (1 + len(cal) - bisect_left(cal, s)) / (len(cal) + 1)


def calibration_scores(table: EventTable, part: str) -> list[float]:
    """The part's calibration scores: the witnesses' leave-one-out scores, rounded to 9 digits
    (ascending)."""
    return list(table.loo_scores(part))


def novel(table: EventTable, events: dict[str, tuple[int, int]], alpha: float) -> bool:
    """Whether the novelty test of a guard built on ``table`` deopts these events (some part's
    p-value <= ``alpha / parts``)."""
    level = alpha / max(1, len(events))
    return any(p_value(table.loo_scores(part), score(table, part, e)) <= level for part, e in events.items())


def calibrate_program_guard(oof: Sequence[OutOfFold], evidence: ProgramEvidence, table: EventTable, *,
                            alpha: float, epsilon: float, delta: float, folds: int,
                            notes: Sequence[str] = ()) -> dict[str, Any]:
    """The manifest's ``program-evidence`` guard entry.

    Args:
        oof: out-of-fold predictions of every witness (:class:`OutOfFold`).
        evidence: the deployed program's evidence (its parts, rules and expressions).
        table: the deployed program's event table on all witnesses (what the runtime scores with).
        alpha: novelty level of a record (each of the ``P`` parts is tested at ``alpha / P``).
        epsilon, delta: the selective-risk level and its failure probability.
        folds: K of the cross-fit (stated).
        notes: caveats carried into the statement.

    Returns:
        ``{"method": "program-evidence", "alpha", "parts": [{"name", "shape", "alpha", "n",
        "calibration_scores", "witnesses", "events": [{"rule", "kind", "support", "precision"}],
        "rules", "rule_text", "heldout_pass"}], "risk": <selective-risk entry, "applies">,
        "calibration": {"method", "folds", "n", "answered", "tier1", "tier1_wrong"}, "statement"}``.
        Scores are rounded to 9 digits (what the runtime compares).

    Raises:
        ArgumentError: ``alpha``, ``epsilon`` or ``delta`` outside (0, 1).
    """
    for name, v in (("alpha", alpha), ("epsilon", epsilon), ("delta", delta)):
        if not (isinstance(v, (int, float)) and 0.0 < v < 1.0):
            raise ArgumentError(f"{name} must be a number in (0, 1), got {v!r}")
    names = [p.name for p in evidence.parts]
    level = alpha / max(1, len(names))
    answered = [o for o in oof if not o.deopt]
    unwitnessed = sum(1 for o in answered if o.unwitnessed)
    novel_n = sum(1 for o in answered if not o.unwitnessed and o.novel)
    passing = [o for o in answered if not o.unwitnessed and not o.novel]
    parts = []
    for pe in evidence.parts:
        cal = calibration_scores(table, pe.name)
        events = [{"rule": r, "kind": k, "support": c, "precision": round(table.precision(pe.name, (r, k)), 9)}
                  for (r, k), c in sorted(table.counts.get(pe.name, {}).items())]
        parts.append({"name": pe.name, "shape": pe.shape, "alpha": level, "n": len(cal), "calibration_scores": cal,
                      "witnesses": table.n, "events": events, "rules": list(pe.rules), "rule_text": list(pe.rule_text),
                      "specific_levels": list(pe.specific)})
    conf = [o.confidence for o in passing]
    corr = [o.correct for o in passing]
    nmin = min_points(epsilon, delta)
    risk = calibrate_selective_risk(conf, corr, epsilon=epsilon, delta=delta, confidence_field="confidence",
                                    allow_constant=True, holm=True)
    risk["confidence"] = CONFIDENCE
    risk["applies"] = risk["threshold"] is not None
    few = len(conf) < nmin
    if few:
        risk["reason"] = (f"{len(conf)} out-of-fold points pass the evidence tests, fewer than the {nmin} that can certify "
                          f"selective risk <= {epsilon:g} at delta {delta:g} even with no errors: no threshold is applied, "
                          "and the out-of-fold agreement bound of the gate is the guarantee")
    thr = risk["threshold"]
    t1 = [o for o in passing if thr is None or (o.confidence is not None and o.confidence >= thr)]
    wrong = sum(1 for o in t1 if not o.correct)
    entry = {"method": "program-evidence", "alpha": alpha, "parts": parts, "risk": risk,
             "deopt_kinds": list(UNWITNESSED_KINDS), "kinds": list(KIND_NAMES),
             "calibration": {"method": f"{folds}-fold out-of-fold", "folds": folds, "n": len(oof),
                             "answered": len(answered), "unwitnessed": unwitnessed,
                             "unwitnessed_wrong": sum(1 for o in answered if o.unwitnessed and not o.correct),
                             "novel": novel_n, "novel_wrong": sum(1 for o in answered if not o.unwitnessed and o.novel
                                                                  and not o.correct),
                             "tier1": len(t1), "tier1_wrong": wrong},
             "notes": list(notes)}
    entry["certified"] = thr is not None
    entry["few_shot"] = few
    entry["statement"] = statement(entry)
    return entry


def statement(entry: dict[str, Any]) -> str:
    """The plain-language statement of a ``program-evidence`` entry: what it guarantees and where
    it says nothing."""
    parts = entry.get("parts") or []
    risk = entry.get("risk") or {}
    cal = entry.get("calibration") or {}
    names = ", ".join(repr(p["name"]) if p["name"] else "the answer" for p in parts)
    kinds = entry.get("kinds") or list(KIND_NAMES)
    deopt = ", ".join(kinds[k] for k in entry.get("deopt_kinds") or [])
    s = [f"tier-1 only when the program does not deopt and, for every part ({names}), the evidence of the rule that "
         f"decided it was witnessed: no part's evidence is of a kind that marks an unwitnessed generalization ({deopt}; out-of-fold, "
         f"{cal.get('unwitnessed', 'n/a')} of {cal.get('n', 'n/a')} witnesses were deopted for it), and the event is "
         f"not novel: the conformal p-value of 1 - (witnesses with the same event) / (witnesses) against the "
         f"{parts[0]['n'] if parts else 0} witnesses' leave-one-out scores exceeds alpha/parts = "
         f"{entry['alpha'] / max(1, len(parts)):.4g} (out-of-fold, {cal.get('novel', 'n/a')} witnesses were deopted "
         f"by it); on inputs exchangeable with the witnesses a record is deopted by the novelty test with probability "
         f"<= {entry['alpha']:g}"]
    if risk.get("threshold") is not None:
        s.append(f"selective risk: tier-1 only when the confidence ({CONFIDENCE}) >= {risk['threshold']:.6g}; on inputs "
                 f"exchangeable with the witnesses P(tier-1 record != reference | tier-1) <= {risk['epsilon']:g} with "
                 f"probability >= {1 - risk['delta']:g} (Learn-then-Test, {risk['procedure']}, {risk['n']} points); the "
                 f"smallest level this calibration size certifies is {risk.get('smallest_certifiable_epsilon')}")
    else:
        s.append(f"no selective-risk certificate ({risk.get('reason')})")
    s.append(f"calibrated on {cal.get('method')} predictions: the statements hold exactly for the fold programs and for "
             "the deployed program (synthesized from every witness) under the assumption that refitting on all witnesses "
             "does not make its admitted answers worse (cross-conformal strength)")
    s.extend(entry.get("notes") or [])
    s.append("nothing is claimed for inputs that are not exchangeable with the witnesses (other phrasings, languages, "
             "formats): there only the evidence conditions deopt, and what they catch is measured, not guaranteed")
    return "; ".join(s)


def without_calibration(entry: dict[str, Any]) -> dict[str, Any]:
    """A copy of the entry without the calibration scores and event tables (eval runs, summaries)."""
    out = dict(entry)
    out["parts"] = [{k: v for k, v in p.items() if k not in ("calibration_scores", "events", "rule_text")}
                    for p in entry.get("parts") or []]
    return out


def decide(entry: dict[str, Any], output: dict[str, Any]) -> bool:
    """The runtime's decision on one artifact output, recomputed here (tests and calibration
    summaries; the runtime's own implementation is ``auto_runtime.guard.program``)."""
    if not isinstance(output, dict) or output.get("deopt") is not False:
        return False
    ev = output.get("evidence")
    if not isinstance(ev, dict):
        return False
    confs = []
    for p in entry["parts"]:
        e = ev.get(p["name"])
        if not isinstance(e, dict) or e.get("kind") in (entry.get("deopt_kinds") or []):
            return False
        sup = {(x["rule"], x["kind"]): x for x in p["events"]}.get((e.get("rule"), e.get("kind")))
        n = p["witnesses"]
        s = round(1.0 - (sup["support"] if sup else 0) / n, 9) if n else 1.0
        if p_value(p["calibration_scores"], s) <= p["alpha"]:
            return False
        confs.append(sup["precision"] if sup else 0.5)
    thr = (entry.get("risk") or {}).get("threshold")
    return thr is None or (bool(confs) and min(confs) >= thr)


__all__ = ["CONFIDENCE", "OutOfFold", "calibrate_program_guard", "calibration_scores", "confidence", "decide",
           "novel", "p_value", "score", "statement", "without_calibration"]
