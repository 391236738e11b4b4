"""Conformal novelty: the component that deopts inputs unlike the calibration inputs.

For an input whose artifact output carries nonconformity ``s`` and calibration scores
``c_1..c_n`` (the artifact's own scores on the calibration split), the conformal p-value is::

    p = (1 + #{i : c_i >= s}) / (n + 1)

and the component deopts iff ``p <= alpha``. Under exchangeability of the input with the
calibration inputs, a fresh input is deopted with probability at most ``alpha`` (Vovk, Gammerman,
Shafer, *Algorithmic Learning in a Random World*, 2005; the formula is the one in
docs/architecture.md and ``auto_runtime.guard``). Nothing is claimed for inputs that are not
exchangeable with the calibration inputs: that is exactly where deopts are wanted.

**Per label** (label-conditional, "Mondrian" conformal prediction: Vovk, Gammerman, Shafer, 2005,
ch. 4; Vovk, Lindsay, Nouretdinov, Gammerman, "Mondrian confidence machine", 2003): with the
answer the artifact gave each calibration input, an input answered with label ``y`` is judged
against the scores of the calibration inputs the artifact also answered ``y`` (``n_y`` of them),
so the test is valid within each label (at most ``alpha`` of exchangeable inputs answered ``y``
deopt, hence at most ``alpha`` overall) and a label whose calibration inputs all lie close to its
prototypes no longer inherits the pooled threshold of the loosest label. A label with too few
calibration scores for its own test to deopt anything (``1 / (n_y + 1) > alpha``), or one no
calibration input was answered with, is judged against the pooled scores.

The specialist's score (:class:`auto.models.specialist.train.CompiledModel`) is the prototype
distance plus the *unexplained mass* of the answer's class: the share of the input's squared
n-gram norm in buckets no training input of that class touches. The rule is fixed before any
measurement (one score, no weight, no threshold of its own): the conformal test above calibrates
it like any score, on the same out-of-fold predictions. Measured on the triage bench (``auto bench
guards``, the specialist's 5-fold cross-fit calibration scores, per label), prototype distance
alone then with the unexplained mass: seed 0, out-of-distribution probes admitted 9/150 (0 wrong)
then 0/150, held-out tickets answered at tier-1 272/300 then 275/300.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from auto.canonical import canonical_json
from auto.errors import ArgumentError


def _check_alpha(alpha: Any) -> float:
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0.0 < float(alpha) < 1.0:
        raise ArgumentError(f"alpha must be a number in (0, 1), got {alpha!r}")
    return float(alpha)


def novelty_threshold(sorted_scores: Sequence[float], alpha: float) -> float | None:
    """The largest score that still passes, ``c_(n-j)`` with ``j = floor(alpha (n + 1)) - 1``.

    ``p <= alpha`` iff ``#{c >= s} <= j`` iff ``s > c_(n-j)`` (ascending order, 1-based), so an
    input passes iff its score is at most the returned value.

    Args:
        sorted_scores: the calibration scores in ascending order (length n).
        alpha: level in (0, 1).

    Returns:
        The threshold, or None when ``1/(n+1) > alpha`` (no score can reach ``p <= alpha``:
        the component never deopts) or there are no scores.
    """
    m = len(sorted_scores)
    j = int(math.floor(alpha * (m + 1) + 1e-12)) - 1
    return float(sorted_scores[m - j - 1]) if 0 <= j < m else None


def _pooled_loo(scores: Sequence[float], alpha: float) -> list[bool]:
    from bisect import bisect_left

    srt = sorted(scores)
    n = len(srt)
    out = []
    for s in scores:
        at_least = n - bisect_left(srt, s) - 1  # the others with c_j >= s_i
        out.append((1 + at_least) / n > alpha if n > 0 else False)
    return out


def label_key(label: Any) -> str:
    """The key a label is grouped by: its canonical JSON text (the runtime groups by the same)."""
    return canonical_json(label)


def leave_one_out_pass(scores: Sequence[float], alpha: float, labels: Sequence[Any] | None = None) -> list[bool]:
    """For each calibration score, would the component pass it, judged against the other ``n - 1``?

    The p-value of ``s_i`` is ``(1 + #{j != i : s_j >= s_i}) / n`` (the formula above with the
    point itself left out), so each calibration point is treated as a fresh input would be. With
    ``labels``, a point is judged against the other points of its label when they are enough for
    the label's own test (``1 / n_y <= alpha``, ``n_y - 1`` others), else against the other
    points of every label (the rule the runtime applies: see the module docstring).

    Args:
        scores: nonconformity scores (any order), length n.
        alpha: level in (0, 1).
        labels: the artifact's answer for each score (JSON values), or None (pooled).

    Returns:
        ``n`` booleans, in the order of ``scores``.

    Raises:
        ArgumentError: ``labels`` is not as long as ``scores``.
    """
    pooled = _pooled_loo(scores, alpha)
    if labels is None:
        return pooled
    if len(labels) != len(scores):
        raise ArgumentError(f"{len(labels)} labels for {len(scores)} calibration scores")
    groups: dict[str, list[int]] = {}
    for i, y in enumerate(labels):
        groups.setdefault(label_key(y), []).append(i)
    out = list(pooled)
    for idx in groups.values():
        if 1.0 / len(idx) > alpha:  # too few for a test of the label's own: pooled
            continue
        for i, ok in zip(idx, _pooled_loo([scores[i] for i in idx], alpha)):
            out[i] = ok
    return out


def novelty_passes(entry: dict[str, Any], score: Any, label: Any = None) -> bool:
    """Whether a :func:`calibrate_novelty` entry passes an output of nonconformity ``score`` and
    answer ``label`` (the runtime's rule: ``auto_runtime.guard.novelty``); a score that is not a
    finite number never passes."""
    from bisect import bisect_left

    if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
        return False
    cal = entry["calibration_scores"]
    by = {label_key(g["label"]): g["calibration_scores"] for g in entry.get("calibration_scores_by_label") or []}
    own = by.get(label_key(label)) if by else None
    if own is not None and 1.0 / (len(own) + 1) <= entry["alpha"]:
        cal = own
    n = len(cal)
    return (1 + n - bisect_left(cal, float(score))) / (n + 1) > entry["alpha"]


def calibrate_novelty(cal_scores: Sequence[float], alpha: float, labels: Sequence[Any] | None = None) -> dict[str, Any]:
    """The ``conformal-novelty`` component entry of a guard stack.

    Args:
        cal_scores: the artifact's nonconformity scores on the calibration inputs (any order).
        alpha: level in (0, 1): the largest share of exchangeable inputs the component may deopt.
        labels: the artifact's answer on each calibration input (JSON values, same order), or
            None: with them the entry also carries ``calibration_scores_by_label`` (``[{"label",
            "n", "calibration_scores"}]``, sorted by label key) and the runtime judges an input
            against the scores of its own answer's label (module docstring).

    Returns:
        ``{"method": "conformal-novelty", "alpha", "n", "calibration_scores" (ascending, rounded to
        the artifact's 9 printed digits), "threshold" (largest passing score, see
        :func:`novelty_threshold`), "never_deopts" (True when ``1/(n+1) > alpha``), "reason"}``.
        ``reason`` is None for a usable entry; for unusable data (no scores, a non-number, NaN or
        infinity) it says why, ``calibration_scores`` is empty and the stack must always deopt.
        Never raises on bad data.

    Raises:
        ArgumentError: ``alpha`` is not a number in (0, 1).
    """
    alpha = _check_alpha(alpha)
    entry: dict[str, Any] = {"method": "conformal-novelty", "alpha": alpha, "n": 0, "calibration_scores": [],
                             "threshold": None, "never_deopts": False, "reason": None}
    try:
        scores = list(cal_scores)
    except TypeError:
        return {**entry, "reason": f"calibration scores are not a sequence ({type(cal_scores).__name__})"}
    if not scores:
        return {**entry, "reason": "no calibration scores"}
    for i, s in enumerate(scores):
        if isinstance(s, bool) or not isinstance(s, (int, float)) or not math.isfinite(s):
            return {**entry, "reason": f"calibration score {i} is not a finite number: {s!r}"}
    srt = sorted(round(float(s), 9) for s in scores)
    out = {**entry, "n": len(srt), "calibration_scores": srt, "threshold": novelty_threshold(srt, alpha),
           "never_deopts": 1.0 / (len(srt) + 1) > alpha}
    if labels is not None:
        if len(labels) != len(scores):
            return {**entry, "reason": f"{len(labels)} labels for {len(scores)} calibration scores"}
        groups: dict[str, tuple[Any, list[float]]] = {}
        for y, sc in zip(labels, scores):
            groups.setdefault(label_key(y), (y, []))[1].append(round(float(sc), 9))
        out["calibration_scores_by_label"] = [{"label": y, "n": len(v), "calibration_scores": sorted(v)}
                                              for _k, (y, v) in sorted(groups.items())]
    return out
