"""``exact-match``: the guard of exact-match table artifacts ("memo").

The artifact answers from its table only for an input it has witnessed byte for byte (the
canonical JSON the runtime writes), and reports ``nonconformity`` 0 exactly then (1 on a miss).
The guard passes iff the score is a number equal to 0 and deopts otherwise with reason
``"unseen input (exact-match guard)"`` (a missing or non-finite score: the ``no-score`` reason).
No p-value. The entry needs no other field: ``{"method": "exact-match"}``. Meant for table-only
artifacts; a memo-first artifact (table in front of a specialist) keeps ``conformal-novelty``,
where a hit's score 0 gives ``p = 1`` (a specialist's own score can also print as 0.000000000, so
``exact-match`` would let it by).
"""

from __future__ import annotations

import math
from itertools import repeat
from typing import Any, Sequence

import numpy as np

from auto_runtime.guard.base import NO_SCORE, PASS, Guard, GuardDecision, all_deopt, all_pass, safe_len, score_of

UNSEEN = "unseen input (exact-match guard)"
_DICT = {dict}
_FLOAT = {float}


def _exact_code(x: Any) -> int:
    """0: a number equal to 0 (pass); 1: another finite number (unseen); 2: no usable score."""
    c = x.__class__
    if c is float:
        if x == 0.0:
            return 0
        return 1 if x - x == 0.0 else 2  # inf - inf and nan - nan are nan
    if c is int:
        return 0 if x == 0 else 1
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return 2
    try:
        f = float(x)
    except (OverflowError, ValueError, TypeError):
        return 1 if isinstance(x, int) else 2
    return 0 if f == 0.0 else (1 if f - f == 0.0 else 2)


class ExactMatch(Guard):
    """Exact-match guard: pass iff the output's ``nonconformity`` is exactly 0 (a table hit).

    Decisions have no p-value. Declined reasons: ``"unseen input (exact-match guard)"`` for a
    finite nonzero score, the ``no-score`` reason for a missing, non-numeric (``bool`` included)
    or non-finite one. Never raises.
    """

    method = "exact-match"
    _DECISIONS = (PASS, GuardDecision(False, None, UNSEEN), GuardDecision(False, None, NO_SCORE))

    def evaluate_output(self, out: Any) -> GuardDecision:
        try:
            return self._DECISIONS[_exact_code(score_of(out))]
        except Exception:  # noqa: BLE001 - by contract a guard never raises in the request path
            return self._DECISIONS[2]

    def decide_output(self, out: Any) -> tuple[bool, float | None]:
        score = out.get("nonconformity") if out.__class__ is dict else None
        if score.__class__ is float and score == 0.0:
            return True, None
        return self.evaluate_output(out).passed, None

    def evaluate_batch_outputs(self, outs: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
        try:
            n = len(outs)
            if n and set(map(type, outs)) == _DICT:  # the runtime's parsed outputs: C loops, no frame per item
                scores = list(map(dict.get, outs, repeat("nonconformity")))
                if set(map(type, scores)) == _FLOAT and scores.count(0.0) == n:  # every one a hit
                    return all_pass(n)
            else:
                scores = [o.get("nonconformity") if o.__class__ is dict else score_of(o) for o in outs]
            if n and set(map(type, scores)) == {float}:  # the runtime's parsed outputs
                passed = np.array(scores, dtype=np.float64) == 0.0
            else:
                passed = np.fromiter((_exact_code(x) == 0 for x in scores), dtype=bool, count=n)
            return passed, np.full(n, math.nan)
        except Exception:  # noqa: BLE001 - deopt everything rather than raise
            return all_deopt(safe_len(outs))

    def describe(self) -> dict[str, Any]:
        return {"method": self.method, "usable": True}
