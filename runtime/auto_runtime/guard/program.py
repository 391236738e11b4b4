"""``program``: the guard of DSL program artifacts, whose output is ``{"answer": ..., "deopt": <bool>}``.

Passes iff ``out["deopt"] is False``; ``True`` deopts with ``"program deopt"`` (the program itself
declined the input), anything else (missing, not a bool) with ``"no-deopt-flag: ..."``. No
p-value. The entry needs no other field: ``{"method": "program"}``.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from auto_runtime.guard.base import PASS, Guard, GuardDecision


class ProgramGuard(Guard):
    """Guard of DSL program artifacts: pass iff ``out["deopt"] is False`` (see the module
    docstring for the reasons). No p-value. Never raises."""

    method = "program"
    _DEOPT = GuardDecision(False, None, "program deopt")
    _NO_FLAG = GuardDecision(False, None, "no-deopt-flag: artifact output has no boolean 'deopt'")

    def decide_output(self, out: Any) -> tuple[bool, float | None]:
        return (isinstance(out, dict) and out.get("deopt") is False), None

    def evaluate_output(self, out: Any) -> GuardDecision:
        flag = out.get("deopt") if isinstance(out, dict) else None
        if flag is False:
            return PASS
        return self._DEOPT if flag is True else self._NO_FLAG

    def evaluate_batch_outputs(self, outs: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
        return self._batch_or_deopt(outs)
