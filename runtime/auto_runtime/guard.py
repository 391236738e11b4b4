"""Guards: decide, per input, whether the artifact's answer may be used (tier 1) or the call must
deoptimize to the reference (tier 0).

A guard is built from the manifest's ``guard`` entry by :func:`build_guard`, which looks the
entry's ``method`` up in a registry (:data:`GUARD_METHODS`, extended with :func:`register_guard`).
``build_guard`` never raises: an entry that cannot be used (not an object, unknown method, missing
or invalid fields, empty calibration) becomes an :class:`AlwaysDeopt` guard whose ``reason``
says why, so a bad guard costs answers from the reference, never an exception in the request
path.

Methods:

``none``
    The manifest declares no guard: every call deopts (:class:`AlwaysDeopt`), without a warning.

``conformal-novelty`` (:class:`ConformalNovelty`)
    Split-conformal novelty test. For an input with nonconformity ``s`` (the artifact's
    ``nonconformity`` output) and calibration scores ``c_1..c_n``::

        p = (1 + #{i : c_i >= s}) / (n + 1)

    and the guard deopts iff ``p <= alpha``. Under exchangeability of the input with the
    calibration inputs, a fresh input is deopted with probability at most ``alpha``
    (Vovk, Gammerman, Shafer, *Algorithmic Learning in a Random World*, 2005; the formula is the
    one in docs/architecture.md). ``#{c_i >= s}`` is ``n - bisect_left(sorted_c, s)`` (single
    call) or ``n - searchsorted(sorted_c, s, side="left")`` (batch, numpy); both give the same
    float ``p`` since the division is the same IEEE-754 operation.

``exact-match`` (:class:`ExactMatch`)
    For exact-match table artifacts ("memo"): the artifact answers from its table only for an
    input it has witnessed byte for byte (the canonical JSON the runtime writes), and reports
    ``nonconformity`` 0 exactly then (1 on a miss). The guard passes iff the score is a number
    equal to 0 and deopts otherwise with reason ``"unseen input (exact-match guard)"`` (a missing
    or non-finite score: the ``no-score`` reason). No p-value. The entry needs no other field:
    ``{"method": "exact-match"}``. Meant for table-only artifacts; a memo-first artifact (table
    in front of a specialist) keeps ``conformal-novelty``, where a hit's score 0 gives ``p = 1``
    (a specialist's own score can also print as 0.000000000, so ``exact-match`` would let it by).

To add a method (e.g. conformal risk control, a shift martingale), subclass :class:`Guard`,
implement ``evaluate`` (and optionally ``evaluate_batch``), and register a factory that takes the
manifest entry and raises :class:`GuardConfigError` when the entry is unusable.
"""

from __future__ import annotations

import logging
import math
from bisect import bisect_left
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

log = logging.getLogger("auto_runtime.guard")


class GuardDecision(NamedTuple):
    """Outcome of one guard evaluation.

    ``passed``: use the tier-1 answer. ``p_value``: the method's p-value (``None`` when the method
    has none or no score was available). ``reason``: ``"guard-pass"`` or why the guard declined.
    """

    passed: bool
    p_value: float | None
    reason: str


class GuardConfigError(ValueError):
    """A manifest guard entry cannot be used (raised only inside :func:`build_guard`)."""


class Guard:
    """Base class: a guard method configured from one manifest entry."""

    method: str = "?"
    usable: bool = True

    def evaluate(self, score: Any) -> GuardDecision:
        """Decide for one input given the artifact's ``nonconformity`` score (may be ``None``)."""
        raise NotImplementedError

    def decide(self, score: Any) -> tuple[bool, float | None]:
        """Fast form of :meth:`evaluate`: ``(passed, p_value)``; get the reason from
        :meth:`reason` only when it is needed (deopts)."""
        d = self.evaluate(score)
        return d.passed, d.p_value

    def evaluate_batch(self, scores: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
        """Decide for many inputs.

        Returns:
            ``(passed, p_values)``: a bool array and a float array (``nan`` where there is no
            p-value), both of ``len(scores)``. Reasons for declined items come from
            :meth:`reason`.
        """
        decisions = [self.evaluate(s) for s in scores]
        passed = np.fromiter((d.passed for d in decisions), dtype=bool, count=len(decisions))
        p = np.fromiter(
            (math.nan if d.p_value is None else d.p_value for d in decisions),
            dtype=float, count=len(decisions),
        )
        return passed, p

    def reason(self, score: Any, p_value: float | None) -> str:
        """The decline reason for an item whose batch decision was "deopt"."""
        return self.evaluate(score).reason

    def describe(self) -> dict[str, Any]:
        """A small JSON-able description (for logs and ``auto inspect``)."""
        return {"method": self.method, "usable": self.usable}


class AlwaysDeopt(Guard):
    """The guard of last resort: every call deopts, with ``reason`` saying why."""

    method = "always-deopt"
    usable = False

    def __init__(self, why: str) -> None:
        self.why = why
        self._decision = GuardDecision(False, None, f"guard-unusable: {why}")

    def evaluate(self, score: Any) -> GuardDecision:
        return self._decision

    def evaluate_batch(self, scores: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
        n = len(scores)
        return np.zeros(n, dtype=bool), np.full(n, math.nan)

    def reason(self, score: Any, p_value: float | None) -> str:
        return self._decision.reason

    def describe(self) -> dict[str, Any]:
        return {"method": self.method, "usable": False, "reason": self.why}


_NO_SCORE = "no-score: artifact output has no finite nonconformity"


def _finite_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


class ConformalNovelty(Guard):
    """Conformal novelty guard (see the module docstring for the formula and its source).

    Args:
        alpha: significance level in (0, 1); deopt iff ``p <= alpha``.
        calibration_scores: the ``n`` calibration nonconformity scores (any order; sorted here).
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
        """``(1 + #{c >= score}) / (n + 1)``."""
        return (1 + self.n - bisect_left(self.calibration, score)) / self._n1

    def evaluate(self, score: Any) -> GuardDecision:
        if score.__class__ is not float:
            if not _finite_number(score):
                return GuardDecision(False, None, _NO_SCORE)
            score = float(score)
        elif score != score or score == math.inf or score == -math.inf:
            return GuardDecision(False, None, _NO_SCORE)
        p = (1 + self.n - bisect_left(self.calibration, score)) / self._n1
        if p <= self.alpha:
            return GuardDecision(False, p, f"novelty p={p:.4g}<=alpha={self.alpha:.4g}")
        return GuardDecision(True, p, "guard-pass")

    def decide(self, score: Any) -> tuple[bool, float | None]:
        if score.__class__ is not float:
            if not _finite_number(score):
                return False, None
            score = float(score)
        elif score != score or score == math.inf or score == -math.inf:
            return False, None
        p = (1 + self.n - bisect_left(self.calibration, score)) / self._n1
        return p > self.alpha, p

    def evaluate_batch(self, scores: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
        s = None
        try:
            s = np.array(scores, dtype=np.float64)  # None -> nan
            if s.ndim != 1 or any(x.__class__ is bool for x in scores):
                s = None
        except (TypeError, ValueError):
            s = None
        if s is None:
            s = np.fromiter(
                (x if _finite_number(x) else math.nan for x in scores), dtype=np.float64,
                count=len(scores),
            )
        valid = np.isfinite(s)
        k = self.n - np.searchsorted(self._cal_array, s, side="left")
        p = (1 + k) / self._n1
        p[~valid] = math.nan
        passed = valid & (p > self.alpha)
        return passed, p

    def reason(self, score: Any, p_value: float | None) -> str:
        if p_value is None or p_value != p_value:
            return _NO_SCORE
        return f"novelty p={p_value:.4g}<=alpha={self.alpha:.4g}"

    def describe(self) -> dict[str, Any]:
        return {"method": self.method, "usable": True, "alpha": self.alpha, "n": self.n,
                "never_deopts": self.never_deopts}


_UNSEEN = "unseen input (exact-match guard)"


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
    """Exact-match guard: pass iff the artifact's ``nonconformity`` is exactly 0 (a table hit).

    Decisions have no p-value. Declined reasons: ``"unseen input (exact-match guard)"`` for a
    finite nonzero score, the ``no-score`` reason for a missing, non-numeric (``bool`` included)
    or non-finite one. Never raises.
    """

    method = "exact-match"
    _PASS = GuardDecision(True, None, "guard-pass")
    _DECISIONS = (_PASS, GuardDecision(False, None, _UNSEEN), GuardDecision(False, None, _NO_SCORE))

    def evaluate(self, score: Any) -> GuardDecision:
        try:
            return self._DECISIONS[_exact_code(score)]
        except Exception:  # noqa: BLE001 - by contract a guard never raises in the request path
            return self._DECISIONS[2]

    def decide(self, score: Any) -> tuple[bool, float | None]:
        if score.__class__ is float and score == 0.0:
            return True, None
        return self.evaluate(score).passed, None

    def evaluate_batch(self, scores: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
        try:
            n = len(scores)
            if all(x.__class__ is float for x in scores):  # the runtime's parsed outputs
                passed = np.fromiter(scores, dtype=np.float64, count=n) == 0.0
            else:
                passed = np.fromiter((_exact_code(x) == 0 for x in scores), dtype=bool, count=n)
            return passed, np.full(n, math.nan)
        except Exception:  # noqa: BLE001 - deopt everything rather than raise
            try:
                n = len(scores)
            except Exception:  # noqa: BLE001
                n = 0
            return np.zeros(n, dtype=bool), np.full(n, math.nan)

    def reason(self, score: Any, p_value: float | None) -> str:
        return self.evaluate(score).reason

    def describe(self) -> dict[str, Any]:
        return {"method": self.method, "usable": True}


GuardFactory = Callable[[dict], Guard]
GUARD_METHODS: dict[str, GuardFactory] = {}
"""Registry: manifest ``guard.method`` -> factory(entry) -> :class:`Guard`."""


def register_guard(method: str) -> Callable[[GuardFactory], GuardFactory]:
    """Decorator registering a guard factory under ``method``.

    The factory receives the manifest's ``guard`` object and returns a :class:`Guard`; it raises
    :class:`GuardConfigError` (or any ``ValueError`` / ``TypeError`` / ``KeyError``) when the
    entry is unusable, which :func:`build_guard` turns into :class:`AlwaysDeopt`.
    """

    def deco(factory: GuardFactory) -> GuardFactory:
        GUARD_METHODS[method] = factory
        return factory
    return deco


@register_guard("conformal-novelty")
def _conformal_novelty(entry: dict) -> Guard:
    alpha = entry.get("alpha")
    if not _finite_number(alpha) or not 0.0 < alpha < 1.0:
        raise GuardConfigError(f"alpha must be a number in (0, 1), got {alpha!r}")
    cal = entry.get("calibration_scores")
    if not isinstance(cal, list) or not cal:
        raise GuardConfigError("calibration_scores must be a non-empty list")
    for i, c in enumerate(cal):
        if not _finite_number(c):
            raise GuardConfigError(f"calibration_scores[{i}] is not a finite number: {c!r}")
    n = entry.get("n", len(cal))
    if isinstance(n, bool) or not isinstance(n, int) or n != len(cal):
        raise GuardConfigError(f"n={n!r} but there are {len(cal)} calibration scores")
    return ConformalNovelty(alpha, cal)


@register_guard("exact-match")
def _exact_match(entry: dict) -> Guard:
    return ExactMatch()


@register_guard("none")
def _no_guard(entry: dict) -> Guard:
    # A manifest that declares no guard (e.g. the compiler's provisional candidate) never answers
    # at tier 1 through TieredTask; that is a declared choice, not a fault, so it is not logged.
    return AlwaysDeopt("the manifest declares no guard (method 'none')")


def build_guard(entry: Any) -> Guard:
    """Build the guard a manifest's ``guard`` entry describes. Never raises.

    Returns:
        The configured guard, or :class:`AlwaysDeopt` with the reason the entry is unusable.
    """
    try:
        if not isinstance(entry, dict):
            raise GuardConfigError(f"guard entry must be an object, got {type(entry).__name__}")
        method = entry.get("method")
        factory = GUARD_METHODS.get(method) if isinstance(method, str) else None
        if factory is None:
            raise GuardConfigError(f"unknown guard method {method!r}")
        guard = factory(entry)
        if not isinstance(guard, Guard):
            raise GuardConfigError(f"guard factory for {method!r} returned {type(guard).__name__}")
        return guard
    except Exception as e:  # noqa: BLE001 - by contract a bad guard never raises
        why = str(e) if isinstance(e, GuardConfigError) else f"{type(e).__name__}: {e}"
        log.warning("guard unusable, every call will deopt: %s", why)
        return AlwaysDeopt(why)
