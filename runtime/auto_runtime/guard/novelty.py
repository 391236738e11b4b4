"""``conformal-novelty``: the split-conformal novelty test on the artifact's nonconformity score.

For an output with nonconformity ``s`` and calibration scores ``c_1..c_n``::

    p = (1 + #{i : c_i >= s}) / (n + 1)

and the guard deopts iff ``p <= alpha``. Under exchangeability of the input with the calibration
inputs, a fresh input is deopted with probability at most ``alpha`` (Vovk, Gammerman, Shafer,
*Algorithmic Learning in a Random World*, 2005). ``#{c_i >= s}`` is ``n - bisect_left(sorted_c, s)``
(single output) or ``n - searchsorted(sorted_c, s, side="left")`` (batch, numpy); both give the
same float ``p`` since the division is the same IEEE-754 operation.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from itertools import repeat
from typing import Any, Sequence

import numpy as np

from auto_runtime.guard.base import NO_SCORE, Guard, GuardDecision, finite_float, log, score_of

_DICT = {dict}


class ConformalNovelty(Guard):
    """Conformal novelty guard (see the module docstring for the formula and its source).

    Args:
        alpha: significance level in (0, 1); deopt iff ``p <= alpha``.
        calibration_scores: the ``n`` calibration nonconformity scores (any order; sorted here).

    A missing, non-numeric (``bool`` included) or non-finite score deopts with the ``no-score``
    reason and no p-value. Never raises.
    """

    method = "conformal-novelty"

    def __init__(self, alpha: float, calibration_scores: Sequence[float]) -> None:
        self.alpha = float(alpha)
        self.calibration = sorted(float(c) for c in calibration_scores)
        self.n = len(self.calibration)
        self._n1 = float(self.n + 1)
        self._cal_array = np.asarray(self.calibration, dtype=np.float64)
        self.never_deopts = 1.0 / self._n1 > self.alpha
        if self.never_deopts:
            log.warning(
                "conformal-novelty guard with n=%d and alpha=%g can never deopt "
                "(smallest p-value is 1/(n+1)=%.4g)", self.n, self.alpha, 1.0 / self._n1,
            )

    def p_value(self, score: float) -> float:
        """``(1 + #{c >= score}) / (n + 1)`` for a finite ``score``."""
        return (1 + self.n - bisect_left(self.calibration, score)) / self._n1

    def decide_output(self, out: Any) -> tuple[bool, float | None]:
        # the tier-1 request path: no reason string is built
        score = out.get("nonconformity") if out.__class__ is dict else score_of(out)
        if score.__class__ is not float:
            score = finite_float(score)
            if score is None:
                return False, None
        elif score != score or score == math.inf or score == -math.inf:
            return False, None
        p = (1 + self.n - bisect_left(self.calibration, score)) / self._n1
        return p > self.alpha, p

    def evaluate_output(self, out: Any) -> GuardDecision:
        return self._decision_of_decide(out)

    def reason_output(self, out: Any, p_value: float | None) -> str:
        if p_value is None or p_value != p_value:
            return NO_SCORE
        return f"novelty p={p_value:.4g}<=alpha={self.alpha:.4g}"

    def evaluate_batch_outputs(self, outs: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
        if set(map(type, outs)) == _DICT:  # the runtime's parsed outputs: C loops, no frame per item
            scores = list(map(dict.get, outs, repeat("nonconformity")))
        else:
            scores = [o.get("nonconformity") if o.__class__ is dict else score_of(o) for o in outs]
        s = None
        try:
            s = np.array(scores, dtype=np.float64)  # None -> nan
            if s.ndim != 1 or bool in set(map(type, scores)):
                s = None
        except (TypeError, ValueError):
            s = None
        if s is None:
            s = np.fromiter(
                (math.nan if f is None else f for f in map(finite_float, scores)), dtype=np.float64,
                count=len(scores),
            )
        valid = np.isfinite(s)
        k = self.n - np.searchsorted(self._cal_array, s, side="left")
        p = (1 + k) / self._n1
        p[~valid] = math.nan
        passed = valid & (p > self.alpha)
        return passed, p

    def describe(self) -> dict[str, Any]:
        return {"method": self.method, "usable": True, "alpha": self.alpha, "n": self.n,
                "never_deopts": self.never_deopts}
