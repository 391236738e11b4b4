"""Selective risk: a confidence threshold certified by Learn-then-Test.

The component lets the tier-1 answer through iff the artifact's confidence (``margin``) is at
least a threshold ``tau`` chosen on calibration pairs ``(confidence_i, correct_i)``, where
``correct`` means the artifact's answer equals the witnessed reference answer. The guarantee: on
inputs exchangeable with the calibration inputs,

    selective risk  R(tau) = P(tier-1 answer != reference answer | confidence >= tau)  <=  epsilon

with probability at least ``1 - delta`` over the draw of the calibration set (Learn-then-Test:
Angelopoulos, Bates, Candès, Jordan, Lei, "Learn then Test: Calibrating Predictive Algorithms to
Achieve Risk Control", 2021).

Procedure (statistics through ``mapie.risk_control``, MAPIE 1.6):

1. Candidate thresholds are the distinct calibration confidences, ordered from the most
   conservative (highest) to the least. Thresholds that leave fewer than
   ``n_min = ceil(log(delta) / log(1 - epsilon))`` calibration points above them are not tested:
   even zero errors among fewer points cannot reach ``p <= delta`` (``(1 - epsilon)^n > delta``),
   and an untestable first hypothesis would stop the sequence at once. The rule reads the
   confidences only, never the labels.
2. For each threshold the null hypothesis ``R(tau) > epsilon`` gets the Hoeffding–Bentkus p-value
   for a binary loss (``mapie.risk_control.methods.compute_hoeffding_bentkus_p_value`` with
   ``binary=True``) of the empirical selective risk, computed by ``mapie.risk_control.precision``
   (selective risk is ``1 - precision`` of the rule "proceed iff confidence >= tau" against the
   label "correct"); its effective sample size is the number of calibration points that proceed.
   Conditional on that number, those points' errors are i.i.d. Bernoulli(R(tau)), so the p-value is
   valid.
3. Family-wise error control by fixed-sequence testing from several starts (Bauer, "Multiple
   testing in clinical trials", Statistics in Medicine 10(6), 1991), with a Bonferroni split of
   ``delta`` over the ``m`` chains: every chain walks the thresholds in that fixed order from its
   start towards lower thresholds (more coverage) and rejects while its p-value is at most
   ``delta / m``; it stops at its first non-rejection. Every rejected threshold is certified, and
   the chosen threshold is the lowest certified one, which lets the most inputs through.
   ``BinaryClassificationController`` is not used because its fixed-sequence path reorders the
   thresholds by the direction of the *observed* risk curve, which makes the order depend on the
   labels.

   The starts are anchored at coverage, not at threshold positions: chain 0 starts at the most
   conservative testable threshold (``n_min(epsilon, delta / m)`` points), and one chain starts
   at the first threshold letting through ``ceil(f * n)`` of the ``n`` points for each start
   fraction ``f`` of :data:`START_FRACTIONS` with ``f * n >= START_MIN_POINTS``. ``m`` depends on
   ``n`` only (label-free, the same at every epsilon).

   Why: a single chain begins at the ``n_min`` most confident calibration points and stops at the
   first hypothesis it cannot reject, so a handful of the reference's own confident mistakes among
   them (a wrong witnessed answer the model learns with a large margin) stop the whole test, and
   more witnesses do not help. A chain that starts at an eighth, a quarter or half of the inputs
   averages those mistakes over many points; because its start is a fixed share of the inputs,
   its first hypothesis gets more points as the calibration set grows, so (unlike starts spaced
   over the distinct thresholds) the coverage it certifies grows with the witnesses. Below
   ``START_MIN_POINTS / max(START_FRACTIONS)`` points (360) the procedure is the single-start
   one, the most powerful where data are scarce.

Guarantee: on calibration and test inputs that are exchangeable, with probability at least
``1 - delta`` over the calibration draw, *every* threshold the procedure certifies (so the chosen
one) has selective risk at most ``epsilon``: each chain is a fixed-sequence test of the nulls
``R(tau) > epsilon`` in an order fixed before the labels are read, which controls its family-wise
error at ``delta / m`` (Angelopoulos et al., Learn then Test, Theorem 1 with fixed-sequence
testing), and the union bound over the ``m`` chains gives ``delta``; chains may overlap. The
test suite checks the guarantee by simulation (tests/test_guards_stats.py).

Excess over the reference's own noise (``noise=`` with at least ``noise_min_reasked`` re-asked
inputs, :mod:`auto.guards.noise`): the witnessed answers are single calls of a reference that may
disagree with itself, and the excess silent-wrong is the tier-1 disagreement *minus* the
reference's self-disagreement ``rho``. ``delta`` is split: ``delta_noise = auto.guards.noise.NOISE_DELTA_SHARE *
delta`` for a one-sided Clopper–Pearson lower bound ``rho_low`` of the self-disagreement of the
re-asked inputs (their first two witnesses), and the rest for the test above, run at the level
``epsilon + rho_low`` instead of ``epsilon`` (chain starts and ``n_min`` still from ``epsilon``,
so the order stays label-free). Each calibration point's label is then its *first* witnessed
answer (a single call, as a fresh call is). Guarantee: with probability at least ``1 - delta``,
every certified threshold has ``R(tau) <= epsilon + rho``, i.e. ``R(tau) - rho <= epsilon``
(union bound: ``P(rho_low > rho) <= delta_noise``, and on ``rho_low <= rho`` a rejection at
``epsilon + rho_low`` is a rejection at ``epsilon + rho``, the p-value falling as the level rises),
under the assumptions in :data:`auto.guards.noise.ASSUMPTIONS`. The path is taken whenever the
re-asked inputs number at least ``noise_min_reasked`` (a count, not their answers), also when
``rho_low`` is 0; with fewer, the entry says so and the test is the plain one above at ``delta``.
The entry's ``epsilon_refers_to`` says which guarantee it gives, and ``reference_noise`` holds
the evidence (re-asked inputs, disagreeing pairs, ``rho_low``, ``delta_noise``).
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Sequence

import numpy as np

from auto.errors import ArgumentError
from auto.gate import clopper_pearson
from auto.guards.noise import MAX_LEVEL, ReferenceNoise, excess_plan

PROCEDURE = "fixed-sequence from coverage-anchored starts, Bonferroni over the chains (LTT, mapie.risk_control p-values)"
PROCEDURE_HOLM = "Bonferroni-Holm (LTT, mapie.risk_control)"
"""The family-wise procedure for confidences that need not rank the risk monotonically (a program's
event precision): every threshold is tested, Holm's step-down controls the family-wise error
without an order (S. Holm, "A simple sequentially rejective multiple test procedure", 1979), and
the lowest certified threshold is kept."""
_EPS_GRID_STEP = 0.001  # resolution of smallest_certifiable_epsilon

EXCESS_MEANING = ("epsilon bounds the excess: P(tier-1 answer != a fresh reference answer | tier-1 answers) minus the "
                  "reference's own disagreement rate between two calls, estimated on the re-asked inputs")
WITNESS_MEANING = "epsilon bounds P(tier-1 answer != a single witnessed reference answer | tier-1 answers)"

START_MIN_POINTS = 180
"""A chain starts at a share ``f`` of the ``n`` inputs only where ``f * n`` is at least this many points:
four times the 45 that certify epsilon 0.05 at delta 0.1 without an error, so its first hypothesis has
four times the points the top chain's has. A count, not a function of epsilon: the chains (and so
``delta / m``) are the same at every epsilon, and a level certifiable at epsilon stays certifiable
above it (a rule that grew the chains with epsilon certified 0.045 and not 0.05 on one HWU64 draw)."""

START_FRACTIONS = (0.5, 0.25, 0.125)
"""Coverage shares at which the extra chains start (see the module docstring). With all three in use
(from 1,440 calibration points) ``delta / 4`` per chain costs about
``log(4) / epsilon`` (28) more points at the first hypothesis. Measured on HWU64 through the specialist rung's
own path (``python -m bench.intents.specialist_study coverage``, seed 0): the single-start certificate
covered 0.128 of 400 and 0.083 of 800 distinct utterances; with these chains the coverage is 0, 0.316,
0.512 and 0.626 at 400, 800, 1,200 and 1,600."""


def start_fractions(n: int) -> tuple[float, ...]:
    """The coverage shares at which chains start besides the top one, for ``n`` calibration points
    (label-free, the same at every level): the :data:`START_FRACTIONS` ``f`` with ``f * n >= START_MIN_POINTS``."""
    return tuple(f for f in START_FRACTIONS if f * n >= START_MIN_POINTS)


def n_starts(n: int) -> int:
    """The number of fixed-sequence chains ``m`` for ``n`` calibration points: one plus
    :func:`start_fractions` (label-free; see the module docstring)."""
    return 1 + len(start_fractions(n))


def _check_level(name: str, x: Any) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not 0.0 < float(x) < 1.0:
        raise ArgumentError(f"{name} must be a number in (0, 1), got {x!r}")
    return float(x)


def min_points(epsilon: float, delta: float) -> int:
    """Fewest proceeding calibration points that can certify ``epsilon`` at ``delta``.

    Zero errors among ``n`` points give the p-value ``(1 - epsilon)^n``; it is ``<= delta`` iff
    ``n >= log(delta) / log(1 - epsilon)`` (e.g. 45 for epsilon 0.05, delta 0.1).
    """
    return int(math.ceil(math.log(delta) / math.log1p(-epsilon) - 1e-9))


def _clean(confidence: Any, correct: Any) -> tuple[np.ndarray, np.ndarray] | str:
    """Validated float / bool arrays, or the reason they are unusable."""
    try:
        conf = list(confidence)
        corr = list(correct)
    except TypeError:
        return "confidence and correct must be sequences"
    if len(conf) != len(corr):
        return f"{len(conf)} confidences but {len(corr)} correctness labels"
    for i, c in enumerate(conf):
        if isinstance(c, (bool, np.bool_)) or not isinstance(c, (int, float, np.integer, np.floating)):
            return f"confidence {i} is not a number: {c!r}"
        if not math.isfinite(float(c)):
            return f"confidence {i} is not finite ({float(c)!r})"
    for i, y in enumerate(corr):
        if isinstance(y, (bool, np.bool_)):
            continue
        if isinstance(y, (int, np.integer)) and int(y) in (0, 1):
            continue
        return f"correctness label {i} is not a boolean: {y!r}"
    return np.asarray(conf, dtype=np.float64), np.asarray([bool(y) for y in corr], dtype=bool)


def _p_values(conf: np.ndarray, correct: np.ndarray, thresholds: np.ndarray, epsilons: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per threshold: empirical selective risk, proceeding count, and HB p-values per epsilon.

    Returns:
        ``(risk [T], n_eff [T], p [T, E])``.
    """
    from mapie.risk_control import precision
    from mapie.risk_control.methods import compute_hoeffding_bentkus_p_value

    y = correct.astype(int)
    risk = np.empty(len(thresholds))
    n_eff = np.empty(len(thresholds))
    for k, t in enumerate(thresholds):
        # precision of "proceed" against "correct"; MAPIE returns 1 - precision = selective risk
        risk[k], n_eff[k] = precision.get_value_and_effective_sample_size(y, (conf >= t).astype(int))
    # MAPIE's Bentkus term counts errors as ceil(n * risk); 1 - precision carries rounding error
    # (1 - 0.97 = 0.030000000000000027), which would count one error too many. Snap the risk to
    # k / n exactly and, where the product still rounds above k, step one ulp down.
    errors = np.round(risk * n_eff)
    risk = np.where(n_eff > 0, errors / np.maximum(n_eff, 1), risk)
    risk = np.where((n_eff > 0) & (np.ceil(n_eff * risk) > errors), np.nextafter(risk, 0.0), risk)
    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        p = compute_hoeffding_bentkus_p_value(risk, n_eff, epsilons, binary=True)
    return risk, n_eff, np.nan_to_num(np.asarray(p, dtype=float), nan=1.0)


def _thresholds(conf: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct confidences, descending (most conservative first), and the count at or above each."""
    thr = np.unique(conf)[::-1]
    counts = np.searchsorted(np.sort(conf), thr, side="left")
    return thr, len(conf) - counts


def _chain_starts(counts: np.ndarray, n: int, epsilon: float, delta: float) -> tuple[list[int], int]:
    """Indices into the descending thresholds (``counts``: points at or above each, ascending) where
    the chains start at ``epsilon``, and the number of chains ``m`` (the Bonferroni divisor). A
    start past the last threshold is dropped (its chain tests nothing); duplicates are kept once."""
    fr = start_fractions(n)
    m = 1 + len(fr)
    need = [min_points(epsilon, delta / m)] + [max(min_points(epsilon, delta / m), int(math.ceil(f * n))) for f in fr]
    starts = sorted({int(np.searchsorted(counts, k, side="left")) for k in need})
    return [i for i in starts if i < len(counts)], m


def _walk(p: np.ndarray, starts: Sequence[int], level: float) -> list[int]:
    """Every index a chain rejects: from each start, the run of consecutive indices with ``p <= level``."""
    out: set[int] = set()
    for i in starts:
        while i < len(p) and p[i] <= level:
            out.add(i)
            i += 1
    return sorted(out)


def _fst(conf: np.ndarray, correct: np.ndarray, epsilon: float, delta: float, holm: bool = False,
         level: float | None = None) -> dict[str, Any]:
    """The test at ``level`` (default ``epsilon``); chain starts and ``n_min`` come from ``epsilon``."""
    level = epsilon if level is None else level
    thr, counts = _thresholds(conf)
    if holm:
        from mapie.risk_control import FWERBonferroniHolm, control_fwer

        keep = counts >= min_points(epsilon, delta)
        thr = thr[keep]
        if len(thr) == 0:
            return {"threshold": None, "tested": 0, "starts": 1}
        risk, n_eff, p = _p_values(conf, correct, thr, np.array([level]))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            rejected = list(control_fwer(p[:, 0], delta, fwer_method=FWERBonferroniHolm()))
        m = 1
    else:
        starts, m = _chain_starts(counts, len(conf), epsilon, delta)
        if not starts:
            return {"threshold": None, "tested": 0, "starts": m}
        lo = starts[0]  # thresholds above the top chain's start are never tested
        thr = thr[lo:]
        risk, n_eff, p = _p_values(conf, correct, thr, np.array([level]))
        rejected = _walk(p[:, 0], [s - lo for s in starts], delta / m)
    if len(rejected) == 0:
        return {"threshold": None, "tested": len(thr), "first_p_value": float(p[0, 0]), "starts": m}
    k = int(np.max(rejected))
    return {"threshold": float(thr[k]), "tested": len(thr), "p_value": float(p[k, 0]), "starts": m,
            "calibration_selective_risk": float(risk[k]), "calibration_coverage": float(n_eff[k] / len(conf))}


def _smallest_eps(conf: np.ndarray, correct: np.ndarray, delta: float, shift: float = 0.0) -> float | None:
    """The smallest grid ``epsilon`` certified with the test run at ``epsilon + shift`` (``shift``:
    the noise allowance ``rho_low``; 0 for the plain certificate)."""
    thr, counts = _thresholds(conf)
    grid = np.round(np.arange(1, int(round(1 / _EPS_GRID_STEP))) * _EPS_GRID_STEP, 6)
    for chunk in np.array_split(grid, 10):
        plan = [_chain_starts(counts, len(conf), float(e), delta) for e in chunk]
        ok_idx = [j for j, (st, _) in enumerate(plan) if st]
        if not ok_idx:
            continue
        starts = np.unique(np.concatenate([plan[j][0] for j in ok_idx]))
        _, _, p = _p_values(conf, correct, thr[starts], np.minimum(chunk + shift, MAX_LEVEL))
        pos = {int(s): i for i, s in enumerate(starts)}
        for j in ok_idx:  # a chain certifies something iff its first hypothesis is rejected at delta / m
            st, m = plan[j]
            if any(p[pos[int(i)], j] <= delta / m for i in st):
                return float(chunk[j])
    return None


def _smallest_eps_holm(conf: np.ndarray, correct: np.ndarray, delta: float, shift: float = 0.0) -> float | None:
    """The smallest grid epsilon at which Holm's procedure rejects some threshold: its smallest
    p-value is at most ``delta / m`` (``m`` the thresholds with enough points at that epsilon)."""
    thr, counts = _thresholds(conf)
    grid = np.round(np.arange(1, int(round(1 / _EPS_GRID_STEP))) * _EPS_GRID_STEP, 6)
    for chunk in np.array_split(grid, 10):
        nmin = np.array([min_points(float(e), delta) for e in chunk])
        if not (counts >= nmin.min()).any():
            continue
        _, _, p = _p_values(conf, correct, thr, np.minimum(chunk + shift, MAX_LEVEL))
        for j, e in enumerate(chunk):
            ok = counts >= nmin[j]
            m = int(ok.sum())
            if m and float(p[ok, j].min()) <= delta / m:
                return float(e)
    return None


def smallest_certifiable_epsilon(confidence: Sequence[float], correct: Sequence[bool], delta: float) -> float | None:
    """The smallest selective-risk level the procedure certifies on these calibration pairs.

    Scans ``epsilon`` over the grid 0.001, 0.002, …, 0.999 and returns the first value at which
    :func:`calibrate_selective_risk` would return a threshold (fixed-sequence testing certifies a
    threshold iff its first hypothesis is rejected). Tells the reader what the calibration size
    can support: with no errors at all, ``n`` points certify at best ``1 - delta^(1/n)``.

    Args:
        confidence: per calibration input, the artifact's confidence (``margin``), length n.
        correct: per calibration input, whether its answer equals the reference answer.
        delta: in (0, 1).

    Returns:
        The grid value (within 0.001 above the exact minimum), or None when the data are unusable
        (see :func:`calibrate_selective_risk`) or no level below 1 can be certified.

    Raises:
        ArgumentError: ``delta`` is not in (0, 1).
    """
    delta = _check_level("delta", delta)
    data = _clean(confidence, correct)
    if isinstance(data, str) or len(data[0]) == 0:
        return None
    return _smallest_eps(data[0], data[1], delta)


def _heldout(threshold: float | None, conf: Any, correct: Any) -> dict[str, Any]:

    none = {"heldout_n": 0, "heldout_coverage": None, "heldout_selective_risk": None,
            "heldout_selective_risk_ci95_high": None}
    if conf is None or correct is None:
        return none
    try:
        c = [float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else math.nan for x in conf]
        y = [bool(v) for v in correct]
    except (TypeError, ValueError):
        return none
    if len(c) != len(y) or not c:
        return none
    proceed = [threshold is not None and x == x and x >= threshold for x in c]  # NaN never proceeds
    n_p = sum(proceed)
    wrong = sum(1 for p, ok in zip(proceed, y) if p and not ok)
    _, high = clopper_pearson(wrong, n_p)
    return {"heldout_n": len(c), "heldout_coverage": round(n_p / len(c), 6),
            "heldout_selective_risk": round(wrong / n_p, 6) if n_p else None,
            "heldout_selective_risk_ci95_high": round(high, 6) if high is not None else None}


def _unusable(conf: np.ndarray, nmin: int, epsilon: float, delta: float, allow_constant: bool) -> str | None:
    """Why the calibration confidences cannot certify ``epsilon`` at ``delta`` whatever the labels, or None."""
    n = len(conf)
    if n < nmin:
        return (f"too few calibration points: {n} < {nmin}, the fewest that can certify selective risk "
                f"<= {epsilon:g} at delta {delta:g} even with no errors ((1 - eps)^n <= delta)")
    if np.all(conf == conf[0]) and not allow_constant:
        return f"constant confidence ({conf[0]:g}) on all {n} calibration points: no threshold separates inputs"
    return None


def _refusal(entry: dict[str, Any], plan: Any, noise: ReferenceNoise | None) -> str:
    """The reason of an entry whose test certified no threshold."""
    eps, se = entry["epsilon"], entry["smallest_certifiable_epsilon"]
    what = (f"excess selective risk <= {eps:g} (risk <= {plan.level:.4g} = epsilon + the reference's self-disagreement "
            f"lower bound {plan.lower_bound:.4g} from {noise.reasked} re-asked inputs)" if plan.used and noise is not None
            else f"selective risk <= {eps:g}")
    unused = (plan.entry or {}).get("reason")
    return (f"no threshold controls {what} at delta {entry['delta']:g} with {entry['n']} calibration points"
            + (f" (the smallest certifiable epsilon is {se:g})" if se is not None else " (no level below 1 is certifiable)")
            + (f"; {unused}" if unused else ""))


def calibrate_selective_risk(
    confidence: Sequence[float],
    correct: Sequence[bool],
    *,
    epsilon: float = 0.05,
    delta: float = 0.1,
    heldout_confidence: Sequence[float] | None = None,
    heldout_correct: Sequence[bool] | None = None,
    confidence_field: str = "margin",
    reason: str | None = None,
    allow_constant: bool = False,
    holm: bool = False,
    noise: ReferenceNoise | None = None,
    noise_min_reasked: int | None = None,
    correct_single: Sequence[bool] | None = None,
) -> dict[str, Any]:
    """The ``selective-risk`` component entry of a guard stack (procedure: module docstring).

    Args:
        confidence: per calibration input, the artifact's confidence (its ``confidence_field``
            output, e.g. ``margin``: top-1 minus top-2 score), length n.
        correct: per calibration input, whether the artifact's answer equals the witnessed
            reference answer (bools, or 0/1 ints), length n.
        epsilon: the selective-risk level in (0, 1).
        delta: the allowed probability in (0, 1) that the calibration draw certifies a threshold
            whose true selective risk exceeds ``epsilon``.
        heldout_confidence, heldout_correct: optional held-out pairs (never used to choose the
            threshold); a confidence that is not a finite number (e.g. ``-inf`` for an input
            another component already deopts) never proceeds. They give the measured
            ``heldout_coverage`` (share that proceeds), ``heldout_selective_risk`` (share of
            proceeding inputs answered wrongly) and its 95% Clopper–Pearson upper bound.
        confidence_field: the artifact output field the runtime compares with the threshold.
        reason: set by the caller when it already knows the calibration data are unusable (e.g.
            a class that never occurs in the calibration split); the entry then falls back.
        allow_constant: test a constant confidence as the one threshold that lets every
            calibration point through (a program's confidence takes few values and may take one),
            instead of refusing it as a confidence that separates nothing.
        holm: test every threshold with Bonferroni-Holm (:data:`PROCEDURE_HOLM`) instead of the
            fixed sequence, for a confidence that need not rank the risk monotonically.
        noise: the reference's self-disagreement evidence (:func:`auto.guards.noise.reference_noise`);
            with at least ``noise_min_reasked`` re-asked inputs the certificate is on the excess
            over it (module docstring), else the plain one.
        noise_min_reasked: the contract's ``noise_min_reasked`` (None: the plain certificate).
        correct_single: per calibration input, whether its answer equals its *first* witnessed
            answer (one reference call), same length as ``correct``: the labels of the excess
            certificate (default ``correct``, which for inputs witnessed several times compares
            with a modal answer and so understates the disagreement with a fresh call).

    Returns:
        ``{"method": "selective-risk", "confidence_field", "threshold", "epsilon", "delta", "n",
        "procedure", "min_points", "thresholds_tested", "starts" (the fixed sequence's chains, 1
        with ``holm``; absent when the data were unusable), "smallest_certifiable_epsilon",
        "calibration_coverage", "calibration_selective_risk", "p_value", "heldout_n",
        "heldout_coverage", "heldout_selective_risk", "heldout_selective_risk_ci95_high",
        "reason", "epsilon_refers_to", "risk_level" (the level the test ran at: ``epsilon``, or
        ``epsilon + rho_low``), "delta_risk" (its share of ``delta``), "reference_noise" (``None``
        without ``noise``; else ``{"reasked", "disagreeing", "rate", "min_reasked", "used",
        "lower_bound", "delta_noise", "assumptions", "reason"}``)}``. ``threshold`` None means no threshold controls the risk and the component
        always deopts; ``reason`` then says why (too few points, constant confidence, NaN, labels
        that are not booleans, lengths that differ, no threshold certified, or the caller's
        reason). Never raises on bad data.

    Raises:
        ArgumentError: ``epsilon`` or ``delta`` is not in (0, 1).
    """
    epsilon = _check_level("epsilon", epsilon)
    delta = _check_level("delta", delta)
    plan = excess_plan(noise, noise_min_reasked, epsilon, delta)
    level, delta_risk, shift, excess = plan.level, plan.delta_risk, plan.lower_bound, plan.used
    correct = correct_single if excess and correct_single is not None else correct
    nmin = min_points(epsilon, delta_risk)
    entry: dict[str, Any] = {
        "method": "selective-risk", "confidence_field": confidence_field, "threshold": None,
        "epsilon": epsilon, "delta": delta, "n": 0, "procedure": PROCEDURE_HOLM if holm else PROCEDURE, "min_points": nmin,
        "thresholds_tested": 0, "smallest_certifiable_epsilon": None, "calibration_coverage": None,
        "calibration_selective_risk": None, "p_value": None, "reason": None,
        "epsilon_refers_to": EXCESS_MEANING if excess else WITNESS_MEANING, "risk_level": level,
        "delta_risk": delta_risk, "reference_noise": plan.entry,
    }
    data = _clean(confidence, correct)
    if isinstance(data, str):
        return {**entry, **_heldout(None, heldout_confidence, heldout_correct), "reason": f"unusable calibration data: {data}"}
    conf, corr = data
    entry["n"] = n = len(conf)
    reason = reason if reason is not None else _unusable(conf, nmin, epsilon, delta_risk, allow_constant)
    if n > 0 and not (np.all(conf == conf[0]) and n < nmin):
        se = _smallest_eps_holm(conf, corr, delta_risk, shift) if holm else _smallest_eps(conf, corr, delta_risk, shift)
        entry["smallest_certifiable_epsilon"] = se
    if reason is not None:
        return {**entry, **_heldout(None, heldout_confidence, heldout_correct), "reason": reason}
    res = _fst(conf, corr, epsilon, delta_risk, holm=holm, level=level)
    entry["thresholds_tested"] = res["tested"]
    entry["starts"] = res["starts"]
    if res["threshold"] is None:
        why = _refusal(entry, plan, noise)
        return {**entry, **_heldout(None, heldout_confidence, heldout_correct), "reason": why}
    entry.update(threshold=res["threshold"], p_value=round(res["p_value"], 9),
                 calibration_coverage=round(res["calibration_coverage"], 6),
                 calibration_selective_risk=round(res["calibration_selective_risk"], 6))
    return {**entry, **_heldout(res["threshold"], heldout_confidence, heldout_correct)}
