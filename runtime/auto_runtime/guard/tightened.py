"""The tightened guard: every decision is "deopt" after a shift alarm (``TieredTask.tighten``)."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from auto_runtime.guard.base import Guard, GuardDecision, all_deopt, safe_len


class TightenedGuard(Guard):
    """Wraps ``inner`` after a shift alarm: every decision is "deopt" with reason
    ``"shift alarm: <why>"``, and the p-value is still ``inner``'s (so a shift monitor keeps
    receiving p-values while the task is tightened). Never raises.

    Args:
        inner: the guard being tightened.
        why: the alarm's reason.
    """

    method = "tightened"

    def __init__(self, inner: Guard, why: str) -> None:
        self.inner = inner
        self.why = why
        self.usable = inner.usable
        self._reason = f"shift alarm: {why}"

    def _inner_p(self, out: Any) -> float | None:
        try:
            return self.inner.decide_output(out)[1]
        except Exception:  # noqa: BLE001 - the decision is "deopt" whatever the inner guard does
            return None

    def decide_output(self, out: Any) -> tuple[bool, float | None]:
        return False, self._inner_p(out)

    def evaluate_output(self, out: Any) -> GuardDecision:
        return GuardDecision(False, self._inner_p(out), self._reason)

    def evaluate_batch_outputs(self, outs: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
        n = safe_len(outs)
        try:
            return np.zeros(n, dtype=bool), self.inner.evaluate_batch_outputs(outs)[1]
        except Exception:  # noqa: BLE001
            return all_deopt(n)

    def reason_output(self, out: Any, p_value: float | None) -> str:
        return self._reason

    def describe(self) -> dict[str, Any]:
        return {"method": self.method, "usable": self.usable, "reason": self.why,
                "inner": self.inner.describe()}
