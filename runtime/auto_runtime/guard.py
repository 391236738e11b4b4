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

``selective-risk`` (:class:`SelectiveRisk`)
    The specialist's confidence thresholded by Learn-then-Test (Angelopoulos, Bates, Candès,
    Jordan, Lei, *Learn then Test: Calibrating Predictive Algorithms to Achieve Risk Control*,
    2021; the compiler runs it through ``mapie.risk_control``). The guard passes iff
    ``out[confidence_field]`` (default ``"margin"``) is a finite number ``>= threshold``; under
    exchangeability with the calibration inputs, P(tier-1 answer != reference | passed) <= epsilon
    with probability >= 1 - delta over the calibration draw. ``"threshold": null`` (no threshold
    controls the risk) makes the guard always deopt, with the entry's ``reason``. Declined reason:
    ``"confidence 0.12 < threshold 0.42 (selective risk eps=0.05, delta=0.1)"``; a missing or
    non-finite confidence: ``"no-confidence: artifact output has no finite 'margin'"``. No p-value.

``program`` (:class:`ProgramGuard`)
    For DSL program artifacts, whose output is ``{"answer": ..., "deopt": <bool>}``: passes iff
    ``out["deopt"] is False``; ``True`` deopts with ``"program deopt"``, anything else (missing,
    not a bool) with ``"no-deopt-flag: ..."``. No p-value. The entry needs no other field.

``stack`` (:class:`GuardStack`)
    ``{"method": "stack", "components": [entry, ...], "fallback_reason": null | str, ...}``:
    proceed iff every component passes. All components are evaluated for every input (so the
    p-value is known even when another component declines); the decision's p-value is the first
    ``conformal-novelty`` component's (``None`` without one); the deopt reason is the first
    failing component's reason, in entry order. A string ``fallback_reason`` makes the whole
    guard always deopt with that reason. A component that is not an object, has an unknown
    method (or ``stack``: no nesting) or is unusable makes the whole stack :class:`AlwaysDeopt`
    naming the component; a component that declares always-deopt (a null ``selective-risk``
    threshold) makes the stack always deopt with that component's reason.

Guards decide from the artifact's whole output object (``decide_output``, ``evaluate_output``,
``evaluate_batch_outputs``, ``reason_output``), which is what :class:`~auto_runtime.TieredTask`
calls. The score-based forms (``decide(score)``, ``evaluate(score)``, ...) remain for methods
that need only the ``nonconformity`` score; the output-based defaults delegate to them with
``out.get("nonconformity")``. Output-only methods (``selective-risk``, ``program``, ``stack``)
decline a bare score with a ``needs-output`` reason.

Deopt reasons starting with ``"guard-unusable: "`` mean the entry made the guard always deopt:
a broken entry (logged as a warning), or a declared one (method ``none``, a null threshold, a
``fallback_reason``; :attr:`AlwaysDeopt.declared` is true, nothing is logged).

:class:`TightenedGuard` wraps a guard after a shift alarm (``TieredTask.tighten``): it always
deopts with ``"shift alarm: <reason>"`` but still reports the wrapped guard's p-value.

To add a method (e.g. conformal risk control, a shift martingale), subclass :class:`Guard`,
implement ``evaluate`` (and optionally ``evaluate_batch``) or the output-based forms, and
register a factory that takes the manifest entry and raises :class:`GuardConfigError` when the
entry is unusable.
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

    # -- output-based forms (what TieredTask calls) -------------------------------------------

    def decide_output(self, out: Any) -> tuple[bool, float | None]:
        """``(passed, p_value)`` for one artifact output object.

        Args:
            out: the artifact's parsed output for one input, e.g.
                ``{"answer": ..., "margin": 0.8, "nonconformity": 0.1}`` or, for programs,
                ``{"answer": ..., "deopt": false}``. Anything that is not a dict counts as an
                output without scores (the guard declines).

        The default delegates to :meth:`decide` with ``out.get("nonconformity")``. Never raises
        for built-in methods.
        """
        return self.decide(out.get("nonconformity") if isinstance(out, dict) else None)

    def evaluate_output(self, out: Any) -> GuardDecision:
        """The full decision (with reason) for one artifact output object; see
        :meth:`decide_output`. Default: :meth:`evaluate` of ``out.get("nonconformity")``."""
        return self.evaluate(out.get("nonconformity") if isinstance(out, dict) else None)

    def evaluate_batch_outputs(self, outs: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
        """Decide for many output objects.

        Args:
            outs: ``N`` artifact outputs (non-dict items, e.g. the error of a failed item,
                decline).

        Returns:
            ``(passed, p_values)``: bool array ``[N]`` and float array ``[N]`` (``nan`` where
            there is no p-value). Default: :meth:`evaluate_batch` over the ``nonconformity``
            scores.
        """
        return self.evaluate_batch(
            [o.get("nonconformity") if isinstance(o, dict) else None for o in outs])

    def reason_output(self, out: Any, p_value: float | None) -> str:
        """The decline reason for an output whose decision was "deopt" (``p_value`` as returned
        by :meth:`decide_output`; ``nan`` is read as ``None``). Default: :meth:`reason` of
        ``out.get("nonconformity")``."""
        return self.reason(out.get("nonconformity") if isinstance(out, dict) else None, p_value)

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

    def evaluate(self, score: Any) -> GuardDecision:
        return self._decision

    def decide(self, score: Any) -> tuple[bool, float | None]:
        return False, None

    def evaluate_batch(self, scores: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
        n = _safe_len(scores)
        return np.zeros(n, dtype=bool), np.full(n, math.nan)

    def reason(self, score: Any, p_value: float | None) -> str:
        return self._decision.reason

    def decide_output(self, out: Any) -> tuple[bool, float | None]:
        return False, None

    def evaluate_output(self, out: Any) -> GuardDecision:
        return self._decision

    def evaluate_batch_outputs(self, outs: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
        n = _safe_len(outs)
        return np.zeros(n, dtype=bool), np.full(n, math.nan)

    def reason_output(self, out: Any, p_value: float | None) -> str:
        return self._decision.reason

    def describe(self) -> dict[str, Any]:
        return {"method": self.method, "usable": False, "reason": self.why,
                "declared": self.declared}


def _safe_len(items: Any) -> int:
    try:
        return len(items)
    except Exception:  # noqa: BLE001 - not a sized sequence: nothing to decide
        return 0


_NO_SCORE = "no-score: artifact output has no finite nonconformity"


def _finite_number(x: Any) -> bool:
    """A finite real number (``bool`` excluded; an int too large for a float is not finite)."""
    return _finite_float(x) is not None


def _finite_float(x: Any) -> float | None:
    """``float(x)`` for a finite real number (``bool`` excluded), else ``None``. Never raises."""
    if x.__class__ is float:
        return x if x - x == 0.0 else None  # inf - inf and nan - nan are nan
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    try:
        f = float(x)
    except (OverflowError, ValueError, TypeError):
        return None
    return f if f - f == 0.0 else None


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

    def decide_output(self, out: Any) -> tuple[bool, float | None]:
        # inlined decide(out["nonconformity"]): this is the tier-1 request path
        score = out.get("nonconformity") if out.__class__ is dict else (
            out.get("nonconformity") if isinstance(out, dict) else None)
        if score.__class__ is not float:
            score = _finite_float(score)
            if score is None:
                return False, None
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


_PASS = GuardDecision(True, None, "guard-pass")


def _needs_output(method: str) -> GuardDecision:
    return GuardDecision(
        False, None, f"needs-output: the {method} guard decides from the artifact's output "
                     "object (use evaluate_output), not from a bare nonconformity score")


class _OutputOnly(Guard):
    """Base for methods that need the whole output object: the score-based forms decline."""

    def evaluate(self, score: Any) -> GuardDecision:
        return _needs_output(self.method)

    def decide(self, score: Any) -> tuple[bool, float | None]:
        return False, None

    def evaluate_batch(self, scores: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
        n = _safe_len(scores)
        return np.zeros(n, dtype=bool), np.full(n, math.nan)

    def reason(self, score: Any, p_value: float | None) -> str:
        return _needs_output(self.method).reason

    def decide_output(self, out: Any) -> tuple[bool, float | None]:
        d = self.evaluate_output(out)
        return d.passed, d.p_value

    def reason_output(self, out: Any, p_value: float | None) -> str:
        return self.evaluate_output(out).reason

    def evaluate_batch_outputs(self, outs: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
        try:
            n = len(outs)
            passed = np.fromiter((self.decide_output(o)[0] for o in outs), dtype=bool, count=n)
            return passed, np.full(n, math.nan)
        except Exception:  # noqa: BLE001 - deopt everything rather than raise
            n = _safe_len(outs)
            return np.zeros(n, dtype=bool), np.full(n, math.nan)


class SelectiveRisk(_OutputOnly):
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
        return _finite_float(out.get(self.confidence_field))

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
            return _PASS
        return GuardDecision(
            False, None, f"confidence {c:.4g} < threshold {self.threshold:.4g} {self._suffix}")

    def evaluate_batch_outputs(self, outs: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
        try:
            n = len(outs)
            field = self.confidence_field
            vals = [o.get(field) if o.__class__ is dict else None for o in outs]
            if all(v.__class__ is float for v in vals):  # the runtime's parsed outputs
                c = np.fromiter(vals, dtype=np.float64, count=n)
            else:
                c = np.fromiter(
                    (math.nan if f is None else f
                     for f in (self._confidence(o) for o in outs)), dtype=np.float64, count=n)
            passed = np.isfinite(c) & (c >= self.threshold)
            return passed, np.full(n, math.nan)
        except Exception:  # noqa: BLE001 - deopt everything rather than raise
            return super().evaluate_batch_outputs(outs)

    def describe(self) -> dict[str, Any]:
        return {"method": self.method, "usable": True, "threshold": self.threshold,
                "confidence_field": self.confidence_field, "epsilon": self.epsilon,
                "delta": self.delta, "n": self.n}


class ProgramGuard(_OutputOnly):
    """Guard of DSL program artifacts: pass iff ``out["deopt"] is False``.

    Declined reasons: ``"program deopt"`` (the program itself declined the input) or
    ``"no-deopt-flag: ..."`` (no boolean ``deopt`` field). No p-value. Never raises.
    """

    method = "program"
    _DEOPT = GuardDecision(False, None, "program deopt")
    _NO_FLAG = GuardDecision(False, None, "no-deopt-flag: artifact output has no boolean 'deopt'")

    def decide_output(self, out: Any) -> tuple[bool, float | None]:
        return (isinstance(out, dict) and out.get("deopt") is False), None

    def evaluate_output(self, out: Any) -> GuardDecision:
        flag = out.get("deopt") if isinstance(out, dict) else None
        if flag is False:
            return _PASS
        return self._DEOPT if flag is True else self._NO_FLAG


class GuardStack(_OutputOnly):
    """Proceed iff every component passes (see the module docstring for the p-value and reason
    rules).

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
        passed, p = self.decide_output(out)
        if passed:
            return GuardDecision(True, p, "guard-pass")
        return GuardDecision(False, p, self.reason_output(out, p))

    def reason_output(self, out: Any, p_value: float | None) -> str:
        for c in self.components:
            d = c.evaluate_output(out)
            if not d.passed:
                return d.reason
        return "stack declined"  # not reached for a consistent decide/evaluate pair

    def evaluate_batch_outputs(self, outs: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
        n = _safe_len(outs)
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
            return np.zeros(n, dtype=bool), np.full(n, math.nan)

    def describe(self) -> dict[str, Any]:
        return {"method": self.method, "usable": True,
                "components": [c.describe() for c in self.components]}


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

    def _inner_p(self, decide: Callable[[Any], tuple[bool, float | None]], x: Any) -> float | None:
        try:
            return decide(x)[1]
        except Exception:  # noqa: BLE001 - the decision is "deopt" whatever the inner guard does
            return None

    def evaluate(self, score: Any) -> GuardDecision:
        return GuardDecision(False, self._inner_p(self.inner.decide, score), self._reason)

    def decide(self, score: Any) -> tuple[bool, float | None]:
        return False, self._inner_p(self.inner.decide, score)

    def evaluate_batch(self, scores: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
        n = _safe_len(scores)
        try:
            return np.zeros(n, dtype=bool), self.inner.evaluate_batch(scores)[1]
        except Exception:  # noqa: BLE001
            return np.zeros(n, dtype=bool), np.full(n, math.nan)

    def reason(self, score: Any, p_value: float | None) -> str:
        return self._reason

    def decide_output(self, out: Any) -> tuple[bool, float | None]:
        return False, self._inner_p(self.inner.decide_output, out)

    def evaluate_output(self, out: Any) -> GuardDecision:
        return GuardDecision(False, self._inner_p(self.inner.decide_output, out), self._reason)

    def evaluate_batch_outputs(self, outs: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
        n = _safe_len(outs)
        try:
            return np.zeros(n, dtype=bool), self.inner.evaluate_batch_outputs(outs)[1]
        except Exception:  # noqa: BLE001
            return np.zeros(n, dtype=bool), np.full(n, math.nan)

    def reason_output(self, out: Any, p_value: float | None) -> str:
        return self._reason

    def describe(self) -> dict[str, Any]:
        return {"method": self.method, "usable": self.usable, "reason": self.why,
                "inner": self.inner.describe()}


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


def _unit_interval(entry: dict, key: str) -> float | None:
    v = entry.get(key)
    if v is None:
        return None
    if not _finite_number(v) or not 0.0 < v < 1.0:
        raise GuardConfigError(f"{key} must be a number in (0, 1) or null, got {v!r}")
    return float(v)


@register_guard("selective-risk")
def _selective_risk(entry: dict) -> Guard:
    field = entry.get("confidence_field", "margin")
    if not isinstance(field, str) or not field:
        raise GuardConfigError(f"confidence_field must be a non-empty string, got {field!r}")
    if "threshold" not in entry:
        raise GuardConfigError("selective-risk entry has no 'threshold' (null means: always deopt)")
    threshold = entry["threshold"]
    if threshold is None:
        why = entry.get("reason")
        if not isinstance(why, str) or not why.strip():
            why = "no confidence threshold controls the selective risk (threshold null)"
        return AlwaysDeopt(f"selective-risk: {why}", declared=True)
    if not _finite_number(threshold):
        raise GuardConfigError(f"threshold must be a finite number or null, got {threshold!r}")
    epsilon = _unit_interval(entry, "epsilon")
    delta = _unit_interval(entry, "delta")
    n = entry.get("n")
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 0):
        raise GuardConfigError(f"n must be a non-negative integer or null, got {n!r}")
    return SelectiveRisk(float(threshold), confidence_field=field, epsilon=epsilon, delta=delta,
                         n=n)


@register_guard("program")
def _program(entry: dict) -> Guard:
    return ProgramGuard()


@register_guard("stack")
def _stack(entry: dict) -> Guard:
    fallback = entry.get("fallback_reason")
    if fallback is not None:
        if not isinstance(fallback, str) or not fallback.strip():
            raise GuardConfigError(
                f"fallback_reason must be a non-empty string or null, got {fallback!r}")
        return AlwaysDeopt(fallback, declared=True)
    comps = entry.get("components")
    if not isinstance(comps, list) or not comps:
        raise GuardConfigError("stack components must be a non-empty list")
    built: list[Guard] = []
    for i, ce in enumerate(comps):
        if not isinstance(ce, dict):
            raise GuardConfigError(
                f"stack component {i} must be an object, got {type(ce).__name__}")
        method = ce.get("method")
        factory = GUARD_METHODS.get(method) if isinstance(method, str) else None
        if factory is None or method == "stack":
            raise GuardConfigError(f"stack component {i}: unknown component method {method!r}")
        try:
            g = factory(ce)
        except (GuardConfigError, ValueError, TypeError, KeyError) as e:
            raise GuardConfigError(f"stack component {i} ({method}): {e}") from None
        if not isinstance(g, Guard):
            raise GuardConfigError(f"stack component {i} ({method}): factory returned "
                                   f"{type(g).__name__}")
        if isinstance(g, AlwaysDeopt):
            if g.declared:
                return AlwaysDeopt(g.why, declared=True)
            raise GuardConfigError(f"stack component {i} ({method}): {g.why}")
        built.append(g)
    statement = entry.get("statement")
    return GuardStack(built, statement if isinstance(statement, str) else None)


@register_guard("none")
def _no_guard(entry: dict) -> Guard:
    # A manifest that declares no guard (e.g. the compiler's provisional candidate) never answers
    # at tier 1 through TieredTask; that is a declared choice, not a fault, so it is not logged.
    return AlwaysDeopt("the manifest declares no guard (method 'none')", declared=True)


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
