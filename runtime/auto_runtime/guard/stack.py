"""``stack``: proceed iff every component guard passes.

``{"method": "stack", "components": [entry, ...], "fallback_reason": null | str, ...}``. All
components are evaluated for every input (so the p-value is known even when another component
declines); the decision's p-value is the first ``conformal-novelty`` component's (``None``
without one); the deopt reason is the first failing component's reason, in entry order. How an
entry becomes a stack (fallback reasons, unusable components) is the registry's
(:func:`~auto_runtime.guard.build_guard`).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from auto_runtime.guard.base import Guard, GuardDecision, all_deopt, safe_len
from auto_runtime.guard.novelty import ConformalNovelty


class GuardStack(Guard):
    """Proceed iff every component passes (see the module docstring for the p-value and reason
    rules). Never raises.

    Args:
        components: the component guards, in manifest order (non-empty).
        statement: the manifest's plain-language statement of the guarantee (informational).

    Raises:
        ValueError: ``components`` is empty (only the constructor; decisions never raise).
    """

    method = "stack"

    def __init__(self, components: Sequence[Guard], statement: str | None = None) -> None:
        if not components:
            raise ValueError("a guard stack needs at least one component")
        self.components = tuple(components)
        self.statement = statement
        idx = [i for i, c in enumerate(self.components) if isinstance(c, ConformalNovelty)]
        self._novelty_index = idx[0] if idx else None
        self._novelty = self.components[idx[0]] if idx else None

    def decide_output(self, out: Any) -> tuple[bool, float | None]:
        ok = True
        p = None
        nov = self._novelty
        for c in self.components:
            passed, cp = c.decide_output(out)
            if not passed:
                ok = False
            if c is nov:
                p = cp
        return ok, p

    def evaluate_output(self, out: Any) -> GuardDecision:
        return self._decision_of_decide(out)

    def reason_output(self, out: Any, p_value: float | None) -> str:
        for c in self.components:
            d = c.evaluate_output(out)
            if not d.passed:
                return d.reason
        return "stack declined"  # not reached for a consistent decide/evaluate pair

    def evaluate_batch_outputs(self, outs: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
        n = safe_len(outs)
        passed = np.ones(n, dtype=bool)
        p = np.full(n, math.nan)
        try:
            for i, c in enumerate(self.components):
                cp_passed, cp = c.evaluate_batch_outputs(outs)
                passed &= cp_passed
                if i == self._novelty_index:
                    p = cp
            return passed, p
        except Exception:  # noqa: BLE001 - deopt everything rather than raise
            return all_deopt(n)

    def describe(self) -> dict[str, Any]:
        return {"method": self.method, "usable": True,
                "components": [c.describe() for c in self.components]}
