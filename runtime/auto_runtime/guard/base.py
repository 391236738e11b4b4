"""The guard interface: one decision per artifact output object, and the always-deopt guard.

A guard decides from the artifact's whole parsed output for one input, e.g.
``{"answer": ..., "margin": 0.8, "nonconformity": 0.1}`` or, for programs,
``{"answer": ..., "deopt": false}``; anything that is not a dict (the error of a failed item)
counts as an output without scores and is declined. The forms:

* ``evaluate_output(out) -> GuardDecision`` — the decision with its reason (every guard);
* ``decide_output(out) -> (passed, p_value)`` — the request path's form (reasons only on deopt);
* ``reason_output(out, p_value) -> str`` — the reason for an output that was declined;
* ``evaluate_batch_outputs(outs) -> (passed[N] bool, p_values[N] float, nan = none)``;
* ``describe() -> dict`` — a small JSON-able description (logs, ``auto inspect``).

A new method subclasses :class:`Guard` and implements :meth:`Guard.evaluate_output`; the other
forms default to it. Built-in guards never raise; :class:`~auto_runtime.TieredTask` also deopts
(and counts) a guard that does.
"""

from __future__ import annotations

import logging
import math
from typing import Any, NamedTuple, Sequence

import numpy as np

from auto_runtime.errors import AutoError

log = logging.getLogger("auto_runtime.guard")

NO_SCORE = "no-score: artifact output has no finite nonconformity"
"""The deopt reason when a score-based guard finds no finite ``nonconformity`` in the output."""


class GuardDecision(NamedTuple):
    """Outcome of one guard evaluation.

    ``passed``: use the tier-1 answer. ``p_value``: the method's p-value (``None`` when the method
    has none or no score was available). ``reason``: ``"guard-pass"`` or why the guard declined.
    """

    passed: bool
    p_value: float | None
    reason: str


PASS = GuardDecision(True, None, "guard-pass")
"""A pass without a p-value."""


class GuardConfigError(AutoError):
    """A manifest guard entry cannot be used (raised only inside :func:`~auto_runtime.guard.build_guard`)."""


def safe_len(items: Any) -> int:
    """``len(items)``, or 0 for something that is not a sized sequence. Never raises."""
    try:
        return len(items)
    except Exception:  # noqa: BLE001 - not a sized sequence: nothing to decide
        return 0


_ALL_PASS: dict[int, tuple[np.ndarray, np.ndarray]] = {}
_ALL_PASS_SIZES = 1024
"""Batch sizes whose "every item passes" decision is kept (shared, read-only)."""


def all_pass(n: int) -> tuple[np.ndarray, np.ndarray]:
    """The batch decision "every item passes, no p-value": ``(ones[n] bool, nan[n])``, the same
    two read-only arrays for every call with this ``n`` (so a caller can recognize it by
    identity, and a batch of table hits allocates nothing; writing to them raises ValueError)."""
    got = _ALL_PASS.get(n)
    if got is None:
        passed, p = np.ones(n, dtype=bool), np.full(n, math.nan)
        passed.flags.writeable = False
        p.flags.writeable = False
        got = (passed, p)
        if len(_ALL_PASS) < _ALL_PASS_SIZES:
            _ALL_PASS[n] = got
    return got


def all_deopt(n: int) -> tuple[np.ndarray, np.ndarray]:
    """The batch decision "every item deopts, no p-value": ``(zeros[n] bool, nan[n])``."""
    return np.zeros(n, dtype=bool), np.full(n, math.nan)


def finite_float(x: Any) -> float | None:
    """``float(x)`` for a finite real number (``bool`` excluded; an int too large for a float is
    not finite), else ``None``. Never raises."""
    if x.__class__ is float:
        return x if x - x == 0.0 else None  # inf - inf and nan - nan are nan
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    try:
        f = float(x)
    except (OverflowError, ValueError, TypeError):
        return None
    return f if f - f == 0.0 else None


def score_of(out: Any) -> Any:
    """The output's ``nonconformity`` value (``None`` when ``out`` is not a dict or lacks it)."""
    return out.get("nonconformity") if isinstance(out, dict) else None


class Guard:
    """Base class: a guard method configured from one manifest entry (see the module docstring)."""

    method: str = "?"
    usable: bool = True

    def evaluate_output(self, out: Any) -> GuardDecision:
        """The full decision (with reason) for one artifact output object.

        Args:
            out: the artifact's parsed output for one input (a non-dict is declined).
        """
        raise NotImplementedError

    def decide_output(self, out: Any) -> tuple[bool, float | None]:
        """``(passed, p_value)`` for one artifact output object; get the reason from
        :meth:`reason_output` only when it is needed (deopts). Default: :meth:`evaluate_output`."""
        d = self.evaluate_output(out)
        return d.passed, d.p_value

    def reason_output(self, out: Any, p_value: float | None) -> str:
        """The decline reason for an output whose decision was "deopt" (``p_value`` as returned by
        :meth:`decide_output`). Default: the reason of :meth:`evaluate_output`."""
        return self.evaluate_output(out).reason

    def evaluate_batch_outputs(self, outs: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
        """Decide for many output objects.

        Args:
            outs: ``N`` artifact outputs (non-dict items, e.g. the error of a failed item,
                decline).

        Returns:
            ``(passed, p_values)``: bool array ``[N]`` and float array ``[N]`` (``nan`` where
            there is no p-value). Default: :meth:`decide_output` per item.
        """
        decisions = [self.decide_output(o) for o in outs]
        n = len(decisions)
        passed = np.fromiter((d[0] for d in decisions), dtype=bool, count=n)
        p = np.fromiter((math.nan if d[1] is None else d[1] for d in decisions), dtype=float, count=n)
        return passed, p

    def _decision_of_decide(self, out: Any) -> GuardDecision:
        """:meth:`evaluate_output` built from :meth:`decide_output` and :meth:`reason_output` (for
        guards whose fast form is the primary one)."""
        passed, p = self.decide_output(out)
        if passed:
            return GuardDecision(True, p, "guard-pass")
        return GuardDecision(False, p, self.reason_output(out, p))

    def _batch_or_deopt(self, outs: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`Guard.evaluate_batch_outputs`, or every item deopts if that raises (for guards
        that promise never to raise)."""
        try:
            return Guard.evaluate_batch_outputs(self, outs)
        except Exception:  # noqa: BLE001 - deopt everything rather than raise
            return all_deopt(safe_len(outs))

    def describe(self) -> dict[str, Any]:
        """A small JSON-able description (for logs and ``auto inspect``)."""
        return {"method": self.method, "usable": self.usable}


class AlwaysDeopt(Guard):
    """The guard of last resort: every call deopts with reason ``"guard-unusable: <why>"``.

    Args:
        why: the reason (an unusable entry's error, or the entry's own declared reason).
        declared: ``True`` when the manifest itself declares that nothing may answer at tier 1
            (method ``none``, a null ``selective-risk`` threshold, a stack ``fallback_reason``),
            ``False`` for a broken entry.
    """

    method = "always-deopt"
    usable = False

    def __init__(self, why: str, *, declared: bool = False) -> None:
        self.why = why
        self.declared = declared
        self._decision = GuardDecision(False, None, f"guard-unusable: {why}")

    def decide_output(self, out: Any) -> tuple[bool, float | None]:
        return False, None

    def evaluate_output(self, out: Any) -> GuardDecision:
        return self._decision

    def evaluate_batch_outputs(self, outs: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
        return all_deopt(safe_len(outs))

    def reason_output(self, out: Any, p_value: float | None) -> str:
        return self._decision.reason

    def describe(self) -> dict[str, Any]:
        return {"method": self.method, "usable": False, "reason": self.why,
                "declared": self.declared}
