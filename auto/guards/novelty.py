"""Conformal novelty: the component that deopts inputs unlike the calibration inputs.

For an input whose artifact output carries nonconformity ``s`` and calibration scores
``c_1..c_n`` (the artifact's own scores on the calibration split), the conformal p-value is::

    p = (1 + #{i : c_i >= s}) / (n + 1)

and the component deopts iff ``p <= alpha``. Under exchangeability of the input with the
calibration inputs, a fresh input is deopted with probability at most ``alpha`` (Vovk, Gammerman,
Shafer, *Algorithmic Learning in a Random World*, 2005; the formula is the one in
docs/architecture.md and ``auto_runtime.guard``). Nothing is claimed for inputs that are not
exchangeable with the calibration inputs: that is exactly where deopts are wanted.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

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


def leave_one_out_pass(scores: Sequence[float], alpha: float) -> list[bool]:
    """For each calibration score, would the component pass it, judged against the other ``n - 1``?

    The p-value of ``s_i`` is ``(1 + #{j != i : s_j >= s_i}) / n`` (the formula above with the
    point itself left out), so each calibration point is treated as a fresh input would be.

    Args:
        scores: nonconformity scores (any order), length n.
        alpha: level in (0, 1).

    Returns:
        ``n`` booleans, in the order of ``scores``.
    """
    from bisect import bisect_left

    srt = sorted(scores)
    n = len(srt)
    out = []
    for s in scores:
        at_least = n - bisect_left(srt, s) - 1  # the others with c_j >= s_i
        out.append((1 + at_least) / n > alpha if n > 0 else False)
    return out


def calibrate_novelty(cal_scores: Sequence[float], alpha: float) -> dict[str, Any]:
    """The ``conformal-novelty`` component entry of a guard stack.

    Args:
        cal_scores: the artifact's nonconformity scores on the calibration inputs (any order).
        alpha: level in (0, 1): the largest share of exchangeable inputs the component may deopt.

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
    return {**entry, "n": len(srt), "calibration_scores": srt, "threshold": novelty_threshold(srt, alpha),
            "never_deopts": 1.0 / (len(srt) + 1) > alpha}
