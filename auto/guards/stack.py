"""The guard stack: the manifest ``guard`` entry of a specialist, written by the compiler.

Runtime semantics (``auto_runtime.guard``): tier-1 answers iff every component passes —
``conformal-novelty`` (p-value of the input's nonconformity above ``alpha``) and
``selective-risk`` (the output's ``confidence_field`` is a finite number ``>= threshold``). A
``fallback_reason`` (or a component with ``threshold: null``) makes every input deopt, and the
reason says why.
"""

from __future__ import annotations

import math
from typing import Any

from auto.guards.novelty import calibrate_novelty, leave_one_out_pass, novelty_passes
from auto.guards.risk import calibrate_selective_risk


def _fmt(x: Any, spec: str = ".3g") -> str:
    return "n/a" if x is None else format(x, spec)


def _statement(novelty: dict[str, Any] | None, risk: dict[str, Any] | None, fallback: str | None) -> str:
    if fallback is not None:
        return (f"every input deopts to the reference (tier-0): {fallback}. No tier-1 answer is given, so no "
                "tier-1 answer can be silently wrong.")
    parts = []
    if novelty is not None:
        a, n = novelty["alpha"], novelty["n"]
        per = novelty.get("calibration_scores_by_label")
        against = (f"against the calibration scores of its answer's label ({len(per)} labels of the {n} calibration "
                   f"inputs; a label with fewer than {math.ceil(1 / a - 1)} uses all {n})") if per else \
            f"against {n} calibration scores"
        parts.append(
            f"novelty: deopt iff the conformal p-value of the input's nonconformity {against} "
            f"is <= {a:g}; of inputs exchangeable with the calibration inputs at most {a:g} deopt on this test"
            + (" (with so few scores this test never deopts)" if novelty.get("never_deopts") else ""))
    rn = (risk or {}).get("reference_noise") or {}
    if risk is not None and rn.get("used"):
        parts.append(
            f"selective risk: tier-1 only when {risk['confidence_field']} >= {risk['threshold']:.9g}; on inputs exchangeable "
            f"with the {risk['n']} calibration inputs, P(tier-1 answer != a fresh reference answer | tier-1 answers) <= "
            f"{risk['epsilon']:g} + the reference's own disagreement rate between two calls, i.e. excess silent-wrong <= "
            f"{risk['epsilon']:g}, with probability >= {1 - risk['delta']:g} (delta {rn['delta_noise']:g} for the "
            f"self-disagreement's lower bound {rn['lower_bound']:.4g} from {rn['disagreeing']}/{rn['reasked']} re-asked inputs "
            f"disagreeing, the rest for Learn-then-Test at level {risk['risk_level']:.4g}, fixed-sequence testing from "
            f"{risk.get('starts', 1)} coverage-anchored start(s)); assumes {rn['assumptions']}; the smallest excess "
            f"level this calibration certifies is {_fmt(risk.get('smallest_certifiable_epsilon'), 'g')}")
    elif risk is not None:
        parts.append(
            f"selective risk: tier-1 only when {risk['confidence_field']} >= {risk['threshold']:.9g}; on inputs exchangeable "
            f"with the {risk['n']} calibration inputs, P(tier-1 answer != reference answer | tier-1 answers) <= "
            f"{risk['epsilon']:g}, with probability >= {1 - risk['delta']:g} over the calibration draw (Learn-then-Test, "
            f"fixed-sequence testing from {risk.get('starts', 1)} coverage-anchored start(s), delta split evenly over them); the smallest level this calibration size certifies is "
            f"{_fmt(risk.get('smallest_certifiable_epsilon'), 'g')}")
        if risk.get("heldout_n"):
            parts.append(
                f"measured on {risk['heldout_n']} held-out inputs: {_fmt(risk.get('heldout_coverage'))} answered at tier-1, "
                f"selective risk {_fmt(risk.get('heldout_selective_risk'))} (95% CP upper bound "
                f"{_fmt(risk.get('heldout_selective_risk_ci95_high'))})")
    parts.extend((risk or {}).get("notes") or [])
    parts.append("nothing is claimed for inputs that are not exchangeable with the calibration inputs (distribution "
                 "shift); the shift monitor and the shadow audit watch for those")
    return "; ".join(parts)


def build_stack(novelty: dict[str, Any] | None, risk: dict[str, Any] | None,
                fallback_reason: str | None = None) -> dict[str, Any]:
    """Assemble the ``{"method": "stack"}`` manifest entry from its component entries.

    Args:
        novelty: a :func:`auto.guards.novelty.calibrate_novelty` entry, or None (no novelty test).
        risk: a :func:`auto.guards.risk.calibrate_selective_risk` entry, or None (no risk control).
        fallback_reason: set to make the whole guard always deopt (e.g. the compiler could not
            calibrate); otherwise derived: a component with a ``reason`` (unusable novelty data, or
            a risk entry whose ``threshold`` is null) makes the stack fall back with that reason,
            and a stack with no component at all falls back too.

    Returns:
        ``{"method": "stack", "components": [...], "fallback_reason", "statement"}``: the
        components in evaluation order (novelty first: the decision's p-value is its p-value),
        and a plain-language statement of the guarantee at its true strength.
    """
    components = [c for c in (novelty, risk) if c is not None]
    reason = fallback_reason
    if reason is None and not components:
        reason = "no guard component was calibrated"
    if reason is None and novelty is not None and novelty.get("reason"):
        reason = f"novelty component unusable: {novelty['reason']}"
    if reason is None and risk is not None and (risk.get("threshold") is None or risk.get("reason")):
        reason = f"selective-risk component: {risk.get('reason') or 'no threshold'}"
    return {"method": "stack", "components": components, "fallback_reason": reason,
            "statement": _statement(novelty, risk, reason)}


def without_scores(guard: dict[str, Any]) -> dict[str, Any]:
    """A copy of a guard entry without calibration scores (for summaries and eval runs): its own, its
    stack components' and its program parts' (with their event tables)."""
    out = {k: v for k, v in guard.items() if k != "calibration_scores"}
    if isinstance(guard.get("calibration_scores_by_label"), list):
        out["calibration_scores_by_label"] = [{k: v for k, v in g.items() if k != "calibration_scores"}
                                              if isinstance(g, dict) else g for g in guard["calibration_scores_by_label"]]
    for key in ("components", "parts"):
        if isinstance(guard.get(key), list):
            out[key] = [without_scores(c) if isinstance(c, dict) else c for c in guard[key]]
    if key == "parts" and isinstance(guard.get("parts"), list):
        out["parts"] = [{k: v for k, v in c.items() if k != "events"} if isinstance(c, dict) else c for c in out["parts"]]
    return out


def calibrate_stack(
    cal_scores: list[float],
    cal_confidence: list[float],
    cal_correct: list[bool],
    held_scores: list[float],
    held_confidence: list[float],
    held_correct: list[bool],
    *,
    alpha: float,
    epsilon: float,
    delta: float,
    reason: str | None = None,
    notes: list[str] | None = None,
    noise: Any = None,
    noise_min_reasked: int | None = None,
    cal_correct_single: list[bool] | None = None,
    cal_labels: list[Any] | None = None,
    held_labels: list[Any] | None = None,
) -> dict[str, Any]:
    """Calibrate novelty and selective risk on one calibration split and measure the stack held out.

    Novelty is calibrated on every calibration score. Selective risk is calibrated on the
    calibration points the novelty component lets through, each judged against the *other*
    ``n - 1`` scores (:func:`auto.guards.novelty.leave_one_out_pass`, as a fresh input would be),
    so its certificate is about the stack's own proceed event (novelty passes and confidence
    ``>= threshold``), not about confidence alone.

    Args:
        cal_scores, cal_confidence, cal_correct: per calibration input (same length): the
            artifact's nonconformity, its confidence (``margin``), and whether its answer equals
            the witnessed reference answer.
        held_scores, held_confidence, held_correct: the same for the held-out inputs (never used to
            choose anything; they give the entry's measured ``heldout_*`` numbers). A score or
            confidence that is not a finite number never proceeds.
        alpha: novelty level; epsilon, delta: selective-risk level and confidence, all in (0, 1).
        reason: a known reason the risk calibration is unusable (e.g. a class missing from the
            calibration split): the risk component and so the stack fall back.
        notes: caveats that do not invalidate the certificate (e.g. a rare label absent from the
            calibration split); kept in the risk component's ``notes`` and in the statement.
        noise, noise_min_reasked, cal_correct_single: the reference's self-disagreement evidence,
            the fewest re-asked inputs that use it, and per calibration input whether its answer
            equals its first witnessed answer: passed to
            :func:`auto.guards.risk.calibrate_selective_risk` (the certificate on the excess).
        cal_labels, held_labels: the artifact's answer on each calibration / held-out input, or
            None: with ``cal_labels`` the novelty test is per label
            (:func:`auto.guards.novelty.calibrate_novelty`); ``held_labels`` defaults to none known
            (each held-out input judged against the pooled scores).

    Returns:
        The :func:`build_stack` entry; the novelty component also carries ``heldout_coverage``
        (share of held-out inputs it passes) and the risk component's ``heldout_*`` numbers are
        those of the whole stack.

    Raises:
        ArgumentError: ``alpha``, ``epsilon`` or ``delta`` is not in (0, 1).
    """
    novelty = calibrate_novelty(cal_scores, alpha, cal_labels)
    if novelty["reason"] is not None:
        return build_stack(novelty, None)
    keep = leave_one_out_pass([float(s) for s in cal_scores], alpha, cal_labels)
    hl = held_labels if held_labels is not None else [None] * len(held_scores)
    held_pass = [novelty_passes(novelty, s, y) for s, y in zip(held_scores, hl)]  # the runtime's rule
    novelty["heldout_coverage"] = round(sum(held_pass) / len(held_pass), 6) if held_pass else None
    risk = calibrate_selective_risk(
        [c for c, k in zip(cal_confidence, keep) if k], [y for y, k in zip(cal_correct, keep) if k],
        epsilon=epsilon, delta=delta,
        heldout_confidence=[c if ok else -math.inf for c, ok in zip(held_confidence, held_pass)],
        heldout_correct=list(held_correct), reason=reason, noise=noise, noise_min_reasked=noise_min_reasked,
        correct_single=None if cal_correct_single is None else [y for y, k in zip(cal_correct_single, keep) if k])
    risk["calibration_points_novel"] = len(keep) - sum(keep)
    risk["notes"] = list(notes or [])
    return build_stack(novelty, risk)
