"""``conformal-novelty``: the split-conformal novelty test on the artifact's nonconformity score.

For an output with nonconformity ``s`` and calibration scores ``c_1..c_n``::

    p = (1 + #{i : c_i >= s}) / (n + 1)

and the guard deopts iff ``p <= alpha``. Under exchangeability of the input with the calibration
inputs, a fresh input is deopted with probability at most ``alpha`` (Vovk, Gammerman, Shafer,
*Algorithmic Learning in a Random World*, 2005). ``#{c_i >= s}`` is ``n - bisect_left(sorted_c, s)``
(single output) or ``n - searchsorted(sorted_c, s, side="left")`` (batch, numpy); both give the
same float ``p`` since the division is the same IEEE-754 operation.

Per label (label-conditional, "Mondrian" conformal prediction: Vovk, Gammerman, Shafer, 2005,
ch. 4): with ``by_label`` (the calibration scores of the calibration inputs the artifact answered
with each label, keyed by the label's canonical JSON text), an output is judged against the
scores of its own ``answer``'s label, so at most ``alpha`` of the exchangeable inputs answered
with any one label deopt; an answer whose label has too few scores for a test of its own
(``1 / (n_y + 1) > alpha``), or none, is judged against the pooled scores.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from itertools import repeat
from typing import Any, Mapping, Sequence

import numpy as np

from auto_runtime.guard.base import NO_SCORE, Guard, GuardDecision, finite_float, log, score_of
from auto_runtime.jsonio import canonical_text

_DICT = {dict}


class ConformalNovelty(Guard):
    """Conformal novelty guard (see the module docstring for the formula and its source).

    Args:
        alpha: significance level in (0, 1); deopt iff ``p <= alpha``.
        calibration_scores: the ``n`` calibration nonconformity scores (any order; sorted here).
        by_label: ``{canonical JSON text of a label: its calibration scores}`` (see the module
            docstring), or None (pooled only). Labels with too few scores are dropped here.

    A missing, non-numeric (``bool`` included) or non-finite score deopts with the ``no-score``
    reason and no p-value. Never raises.
    """

    method = "conformal-novelty"

    def __init__(self, alpha: float, calibration_scores: Sequence[float],
                 by_label: Mapping[str, Sequence[float]] | None = None) -> None:
        self.alpha = float(alpha)
        self.calibration = sorted(float(c) for c in calibration_scores)
        self.n = len(self.calibration)
        self._n1 = float(self.n + 1)
        self.by_label: dict[str, tuple[list[float], float]] = {}
        for key, scores in (by_label or {}).items():
            own = sorted(float(c) for c in scores)
            if own and 1.0 / (len(own) + 1) <= self.alpha:
                self.by_label[key] = (own, float(len(own) + 1))
        self._cal_array = np.asarray(self.calibration, dtype=np.float64)
        self.never_deopts = 1.0 / self._n1 > self.alpha
        if self.never_deopts:
            log.warning(
                "conformal-novelty guard with n=%d and alpha=%g can never deopt "
                "(smallest p-value is 1/(n+1)=%.4g)", self.n, self.alpha, 1.0 / self._n1,
            )

    def p_value(self, score: float, answer: Any = None) -> float:
        """``(1 + #{c >= score}) / (n + 1)`` for a finite ``score``, against the scores of
        ``answer``'s label where the guard has them (module docstring)."""
        if self.by_label:
            own = self._own(answer)
            if own is not None:
                cal, n1 = own
                return (len(cal) + 1 - bisect_left(cal, score)) / n1
        return (1 + self.n - bisect_left(self.calibration, score)) / self._n1

    def _own(self, answer: Any) -> tuple[list[float], float] | None:
        try:
            return self.by_label.get(canonical_text(answer))
        except (TypeError, ValueError, RecursionError):
            return None

    def decide_output(self, out: Any) -> tuple[bool, float | None]:
        # the tier-1 request path: no reason string is built
        score = out.get("nonconformity") if out.__class__ is dict else score_of(out)
        if score.__class__ is not float:
            score = finite_float(score)
            if score is None:
                return False, None
        elif score != score or score == math.inf or score == -math.inf:
            return False, None
        if self.by_label:
            p = self.p_value(score, out.get("answer") if out.__class__ is dict else None)
            return p > self.alpha, p
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
        if self.by_label:
            for i, o in enumerate(outs):
                if valid[i] and o.__class__ is dict:
                    p[i] = self.p_value(float(s[i]), o.get("answer"))
        p[~valid] = math.nan
        passed = valid & (p > self.alpha)
        return passed, p

    def describe(self) -> dict[str, Any]:
        return {"method": self.method, "usable": True, "alpha": self.alpha, "n": self.n,
                "never_deopts": self.never_deopts, "labels": len(self.by_label)}
