"""``selective-risk``: the specialist's confidence thresholded by Learn-then-Test.

The threshold is chosen by Learn-then-Test (Angelopoulos, Bates, Candès, Jordan, Lei, *Learn then
Test: Calibrating Predictive Algorithms to Achieve Risk Control*, 2021; the compiler runs it
through ``mapie.risk_control``). The guard passes iff ``out[confidence_field]`` (default
``"margin"``) is a finite number ``>= threshold``; under exchangeability with the calibration
inputs, P(tier-1 answer != reference | passed) <= epsilon with probability >= 1 - delta over the
calibration draw. ``"threshold": null`` (no threshold controls the risk) makes the guard always
deopt, with the entry's ``reason`` (built by the registry as a declared
:class:`~auto_runtime.guard.base.AlwaysDeopt`). Declined reason:
``"confidence 0.12 < threshold 0.42 (selective risk eps=0.05, delta=0.1)"``; a missing or
non-finite confidence: ``"no-confidence: artifact output has no finite 'margin'"``. No p-value.
"""

from __future__ import annotations

import math
from itertools import repeat
from typing import Any, Sequence

import numpy as np

from auto_runtime.guard.base import PASS, Guard, GuardDecision, finite_float

_DICT = {dict}
_FLOAT = {float}


class SelectiveRisk(Guard):
    """Selective-risk guard: pass iff ``out[confidence_field]`` is a finite number
    ``>= threshold`` (see the module docstring for the guarantee and its source).

    Args:
        threshold: the calibrated confidence threshold (finite).
        confidence_field: the output field holding the confidence (``"margin"``: top-1 minus
            top-2 score, docs/architecture.md).
        epsilon: the certified selective-risk bound, in (0, 1), or ``None`` (quoted in reasons).
        delta: the certificate's failure probability, in (0, 1), or ``None``.
        n: the calibration sample size (informational), or ``None``.

    Decisions have no p-value. Never raises.
    """

    method = "selective-risk"

    def __init__(self, threshold: float, *, confidence_field: str = "margin",
                 epsilon: float | None = None, delta: float | None = None,
                 n: int | None = None) -> None:
        self.threshold = float(threshold)
        self.confidence_field = confidence_field
        self.epsilon = epsilon
        self.delta = delta
        self.n = n
        eps = "?" if epsilon is None else f"{epsilon:.4g}"
        dlt = "?" if delta is None else f"{delta:.4g}"
        self._suffix = f"(selective risk eps={eps}, delta={dlt})"
        self._no_conf = GuardDecision(
            False, None, f"no-confidence: artifact output has no finite {confidence_field!r}")

    def _confidence(self, out: Any) -> float | None:
        if out.__class__ is not dict and not isinstance(out, dict):
            return None
        return finite_float(out.get(self.confidence_field))

    def decide_output(self, out: Any) -> tuple[bool, float | None]:
        if out.__class__ is dict:
            c = out.get(self.confidence_field)
            if c.__class__ is float:  # the runtime's parsed outputs; nan >= t is False
                return (c >= self.threshold and c != math.inf), None
        c = self._confidence(out)
        return (c is not None and c >= self.threshold), None

    def evaluate_output(self, out: Any) -> GuardDecision:
        c = self._confidence(out)
        if c is None:
            return self._no_conf
        if c >= self.threshold:
            return PASS
        return GuardDecision(
            False, None, f"confidence {c:.4g} < threshold {self.threshold:.4g} {self._suffix}")

    def evaluate_batch_outputs(self, outs: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
        try:
            n = len(outs)
            field = self.confidence_field
            if set(map(type, outs)) == _DICT:  # the runtime's parsed outputs: C loops, no frame per item
                vals = list(map(dict.get, outs, repeat(field)))
            else:
                vals = [o.get(field) if o.__class__ is dict else None for o in outs]
            if not vals or set(map(type, vals)) == _FLOAT:
                c = np.fromiter(vals, dtype=np.float64, count=n)
            else:
                c = np.fromiter(
                    (math.nan if f is None else f
                     for f in (self._confidence(o) for o in outs)), dtype=np.float64, count=n)
            passed = np.isfinite(c) & (c >= self.threshold)
            return passed, np.full(n, math.nan)
        except Exception:  # noqa: BLE001 - deopt everything rather than raise
            return self._batch_or_deopt(outs)

    def describe(self) -> dict[str, Any]:
        return {"method": self.method, "usable": True, "threshold": self.threshold,
                "confidence_field": self.confidence_field, "epsilon": self.epsilon,
                "delta": self.delta, "n": self.n}
