"""The compiler's guard stack (auto.guards): the statistical guarantees, checked by simulation,
the bad-data fallbacks, the shift monitor, and the stack a compiled specialist carries."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binom

from auto.errors import ArgumentError
from auto.guards import (ShiftMonitor, audit_summary, build_stack, calibrate_novelty, calibrate_selective_risk,
                         smallest_certifiable_epsilon)
from auto.guards.novelty import leave_one_out_pass
from auto.guards.risk import min_points
from auto.guards.stack import calibrate_stack, without_scores

EPS, DELTA = 0.05, 0.1


def _draw(rng: np.random.Generator, n: int, p_wrong) -> tuple[np.ndarray, np.ndarray]:
    """Exchangeable synthetic pairs: confidence ~ U(0, 1), wrong with probability p_wrong(confidence)."""
    c = rng.uniform(size=n)
    return c, rng.uniform(size=n) >= p_wrong(c)


def _violations(p_wrong, splits: int, seed: int) -> tuple[int, int]:
    """(splits that certified a threshold, splits whose realized selective risk on 100k test points > EPS)."""
    rng = np.random.default_rng(seed)
    tc, ty = _draw(rng, 100_000, p_wrong)
    order = np.argsort(tc)
    tc, wrong_cum = tc[order], np.cumsum((~ty[order])[::-1])[::-1]  # errors at or above each position
    certified = violated = 0
    for _ in range(splits):
        c, y = _draw(rng, 400, p_wrong)
        e = calibrate_selective_risk(c.tolist(), y.tolist(), epsilon=EPS, delta=DELTA)
        if e["threshold"] is None:
            continue
        certified += 1
        k = int(np.searchsorted(tc, e["threshold"], side="left"))
        realized = wrong_cum[k] / (len(tc) - k)
        violated += realized > EPS
    return certified, violated


# With SPLITS independent splits and a per-split violation probability of at most DELTA, the number of
# violations is stochastically below Binomial(SPLITS, DELTA); its 99.9% quantile is the allowed count
# (so a correct procedure fails this test with probability < 0.1%).
SPLITS = 200
ALLOWED = int(binom.ppf(0.999, SPLITS, DELTA))


@pytest.mark.slow
def test_selective_risk_guarantee_holds_across_random_calibration_splits():
    # P(wrong | c) = 0.5 (1 - c)^3, so R(t) = 0.125 (1 - t)^3: thresholds above ~0.26 control eps = 0.05
    certified, violated = _violations(lambda c: 0.5 * (1 - c) ** 3, SPLITS, seed=1)
    assert certified >= 0.9 * SPLITS  # the procedure has power here, so the check below is not vacuous
    assert violated <= ALLOWED, f"{violated} of {SPLITS} splits exceeded eps={EPS} (allowed {ALLOWED} at delta={DELTA})"


@pytest.mark.slow
def test_no_threshold_is_certified_more_than_delta_of_the_time_when_none_controls_the_risk():
    # every threshold has selective risk 0.06 > eps: any certified threshold is a violation
    certified, violated = _violations(lambda c: np.full_like(c, 0.06), SPLITS, seed=2)
    assert violated == certified and violated <= ALLOWED


def test_smallest_certifiable_epsilon_matches_the_zero_error_bound():
    rng = np.random.default_rng(0)
    c = rng.uniform(size=100).tolist()
    se = smallest_certifiable_epsilon(c, [True] * 100, DELTA)
    exact = 1 - DELTA ** (1 / 100)  # (1 - eps)^100 <= delta with no errors among all 100 points
    assert exact <= se <= exact + 0.001 + 1e-12
    assert calibrate_selective_risk(c, [True] * 100, epsilon=se, delta=DELTA)["threshold"] is not None
    below = calibrate_selective_risk(c, [True] * 100, epsilon=round(se - 0.001, 6), delta=DELTA)
    assert below["threshold"] is None and "too few calibration points: 100 < 104" in below["reason"]


def test_threshold_is_the_lowest_certified_and_heldout_numbers_are_measured():
    rng = np.random.default_rng(3)
    c, y = _draw(rng, 400, lambda c: 0.5 * (1 - c) ** 3)
    hc, hy = _draw(rng, 300, lambda c: 0.5 * (1 - c) ** 3)
    e = calibrate_selective_risk(c.tolist(), y.tolist(), heldout_confidence=hc.tolist(), heldout_correct=hy.tolist())
    t = e["threshold"]
    assert t is not None and e["reason"] is None and e["n"] == 400 and e["procedure"].startswith("fixed-sequence")
    above = c >= t
    assert e["calibration_coverage"] == pytest.approx(above.mean(), abs=1e-6)
    assert e["calibration_selective_risk"] == pytest.approx((~y[above]).mean(), abs=1e-6)
    m = e["starts"]  # chains of the fixed sequence, each at DELTA / m
    assert m == 2 and above.sum() >= min_points(EPS, DELTA / m) and e["p_value"] <= DELTA / m
    hp = hc >= t
    assert e["heldout_n"] == 300 and e["heldout_coverage"] == pytest.approx(hp.mean(), abs=1e-6)
    assert e["heldout_selective_risk"] == pytest.approx((~hy[hp]).mean(), abs=1e-6)
    assert e["heldout_selective_risk"] <= e["heldout_selective_risk_ci95_high"] <= 1
    # the chains stopped right below t: the next calibration confidence is not certified
    from mapie.risk_control.methods import compute_hoeffding_bentkus_p_value

    nxt = c >= c[c < t].max()
    p_next = compute_hoeffding_bentkus_p_value(np.array([(~y[nxt]).mean()]), np.array([float(nxt.sum())]), EPS, binary=True)
    assert float(p_next[0, 0]) > DELTA / m
    assert e["smallest_certifiable_epsilon"] <= EPS


@pytest.mark.parametrize("conf, correct, why", [
    ([0.5] * 30, [True] * 30, "too few calibration points"),
    ([0.7] * 200, [True] * 200, "constant confidence"),
    ([0.1 * (i % 10) for i in range(199)] + [math.nan], [True] * 200, "not finite"),
    ([0.1 * (i % 10) for i in range(200)], ["yes"] * 200, "not a boolean"),
    ([0.1 * (i % 10) for i in range(200)], [True] * 199, "correctness labels"),
    ([0.1 * (i % 10) for i in range(200)], [True] * 200, "missing from calibration"),
    (["high"] * 200, [True] * 200, "not a number"),
    (None, None, "sequences"),
])
def test_bad_data_falls_back_with_a_reason(conf, correct, why):
    reason = "class 'bug' missing from calibration" if why == "missing from calibration" else None
    e = calibrate_selective_risk(conf, correct, reason=reason)
    assert e["threshold"] is None and why in e["reason"]
    stack = build_stack(calibrate_novelty([0.1, 0.2, 0.3] * 10, 0.05), e)
    assert stack["fallback_reason"] and why in stack["fallback_reason"] and "every input deopts" in stack["statement"]


def test_bad_levels_are_usage_errors():
    for kw in ({"epsilon": 0.0}, {"epsilon": 1.0}, {"delta": 1.5}, {"delta": True}):
        with pytest.raises(ArgumentError):
            calibrate_selective_risk([0.5] * 50, [True] * 50, **kw)
    with pytest.raises(ArgumentError):
        calibrate_novelty([0.1], 0.0)
    with pytest.raises(ArgumentError):
        ShiftMonitor(alpha=2.0)


def test_novelty_entry_follows_the_runtime_rule():
    rng = np.random.default_rng(4)
    scores = rng.uniform(size=80).tolist()
    e = calibrate_novelty(scores, 0.05)
    cal = e["calibration_scores"]
    assert e["n"] == 80 and cal == sorted(cal) and e["reason"] is None and not e["never_deopts"]
    for s in rng.uniform(-0.1, 1.1, size=200):
        p = (1 + sum(1 for x in cal if x >= s)) / (len(cal) + 1)
        assert (p > 0.05) == (s <= e["threshold"])
    assert calibrate_novelty([0.2] * 10, 0.05)["never_deopts"]  # 1/11 > 0.05: no score can deopt
    bad = calibrate_novelty([0.1, math.inf], 0.05)
    assert bad["reason"] and build_stack(bad, None)["fallback_reason"].startswith("novelty component unusable")
    assert calibrate_novelty([], 0.05)["reason"] == "no calibration scores"


def test_leave_one_out_pass_judges_each_point_against_the_others():
    scores = [float(i) for i in range(40)]  # the largest score: p = (1 + 0) / 40 = 0.025 <= 0.05
    keep = leave_one_out_pass(scores, 0.05)
    # the second largest: p = (1 + 1) / 40 = 0.05 <= alpha -> deopt too; the third: 3/40 > alpha
    assert keep[-1] is False and keep[-2] is False and all(keep[:-2])


def test_stack_calibration_certifies_the_stacks_own_proceed_event():
    rng = np.random.default_rng(5)
    n = 300
    scores = rng.uniform(size=n)
    conf = rng.uniform(size=n)
    correct = rng.uniform(size=n) >= 0.5 * (1 - conf) ** 3
    g = calibrate_stack(scores.tolist(), conf.tolist(), correct.tolist(), scores[:100].tolist(), conf[:100].tolist(),
                        correct[:100].tolist(), alpha=0.05, epsilon=EPS, delta=DELTA)
    nov, risk = g["components"]
    assert g["method"] == "stack" and g["fallback_reason"] is None
    assert nov["method"] == "conformal-novelty" and risk["method"] == "selective-risk"
    kept = sum(leave_one_out_pass(scores.tolist(), 0.05))
    assert risk["n"] == kept < n and risk["calibration_points_novel"] == n - kept
    # held-out coverage of the stack: novelty passes and confidence >= threshold
    cal = nov["calibration_scores"]
    nov_ok = [(1 + sum(1 for x in cal if x >= s)) / (len(cal) + 1) > 0.05 for s in scores[:100]]
    both = [a and c >= risk["threshold"] for a, c in zip(nov_ok, conf[:100])]
    assert risk["heldout_coverage"] == pytest.approx(sum(both) / 100, abs=1e-6)
    assert "calibration_scores" not in without_scores(g)["components"][0]
    assert f"<= {EPS:g}" in g["statement"] and "exchangeable" in g["statement"]


def test_shift_monitor_alarms_soon_after_p_values_turn_small_and_rarely_on_uniform_ones():
    rng = np.random.default_rng(6)
    delays = []
    for _ in range(30):
        m = ShiftMonitor(alpha=0.01)
        for i in range(400):
            fired = m.update(float(rng.uniform() if i < 100 else rng.uniform(0, 0.05)))
            if fired:
                break
        assert m.alarm and m.alarm_at > 100 - 10  # no alarm long before the shift
        delays.append(m.alarm_at - 100)
    # from 1/3 on the betting expert, each small p multiplies by ~1.47: 1/alpha = 100 is reached in ~15-25 items
    assert max(delays) <= 40
    false_alarms = 0
    for _ in range(60):
        m = ShiftMonitor(alpha=0.01)
        for p in rng.uniform(size=600):
            m.update(float(p))
        false_alarms += m.alarm
        assert m.statistic >= 0 and m.n == 600
    # Ville: P(ever >= 1/alpha) <= alpha = 0.01 per stream; 60 streams -> 99.9% quantile of Binomial(60, 0.01) is 4
    assert false_alarms <= int(binom.ppf(0.999, 60, 0.01))


def test_shift_monitor_state_reset_and_ignored_values():
    m = ShiftMonitor(alpha=0.05)
    for _ in range(20):
        m.update(0.001)
    assert m.alarm and m.statistic >= 20 and m.describe()["alarm_at"] == m.alarm_at
    m.update(None)
    m.update(math.nan)
    m.update(1.5)
    assert m.ignored == 3 and m.n == 20
    m.reset()
    assert not m.alarm and m.statistic == 1.0 and m.n == 0 and m.describe()["threshold"] == pytest.approx(20.0)


def _first_alarm(m: ShiftMonitor, ps) -> int | None:
    for i, p in enumerate(ps):
        if m.update(float(p)):
            return i
    return None


def _mixture_stream(rng: np.random.Generator, pre: int, post: int, share: float = 0.4) -> np.ndarray:
    """``pre`` uniform p-values, then ``post`` where a ``share`` of them are U(0.01, 0.2) (a new category)."""
    tail = np.where(rng.uniform(size=post) < share, rng.uniform(0.01, 0.2, size=post), rng.uniform(size=post))
    return np.concatenate([rng.uniform(size=pre), tail])


def test_step_jumper_catches_a_40_percent_mixture_sooner_than_mapie_jumper():
    rng = np.random.default_rng(11)
    delays: dict[str, list[float]] = {"step-jumper": [], "jumper": []}
    early = 0
    for _ in range(25):
        ps = _mixture_stream(rng, 150, 250)
        for method in delays:
            at = _first_alarm(ShiftMonitor(alpha=0.01, method=method, jump_size=0.02), ps)
            early += at is not None and at < 150
            delays[method].append(math.inf if at is None or at < 150 else at - 150)
    step, jump = np.median(delays["step-jumper"]), np.median(delays["jumper"])
    # the one-sided bets pay ~x5-10 on a p-value <= 0.1-0.2 where the jumper pays at most x1.5
    assert step < 0.8 * jump and step <= 60, (step, jump)
    # 50 runs of 150 null p-values at alpha 0.01: Ville allows <= 0.5 false alarms on average
    assert early <= int(binom.ppf(0.999, 50, 0.01))


def test_step_jumper_is_fair_on_uniform_p_values_and_rarely_alarms_on_null_streams():
    # E[statistic after one p-value] = 1 exactly for uniform p (every bet integrates to 1 on [0, 1])
    grid = (np.arange(20_000) + 0.5) / 20_000
    means = []
    for prior_steps in (0, 7):
        vals = []
        for p in grid[::10]:
            m = ShiftMonitor(alpha=0.05, method="step-jumper")
            for q in (0.03, 0.9, 0.15, 0.6, 0.08, 0.4, 0.99)[:prior_steps]:
                m.update(q)
            before = m.statistic
            m.update(float(p))
            vals.append(m.statistic / before)
        means.append(float(np.mean(vals)))
    assert means == pytest.approx([1.0, 1.0], abs=2e-3)
    rng = np.random.default_rng(12)
    alarms = {"uniform": 0, "conservative": 0}
    for _ in range(150):
        u = rng.uniform(size=300)
        for kind, ps in (("uniform", u), ("conservative", np.sqrt(u))):  # sqrt(U): P(p <= t) = t^2 <= t
            m = ShiftMonitor(alpha=0.05, method="step-jumper")
            alarms[kind] += _first_alarm(m, ps) is not None
    # Ville: P(ever >= 20) <= 0.05 per stream (uniform or conservative p-values)
    assert alarms["uniform"] <= int(binom.ppf(0.999, 150, 0.05))
    assert alarms["conservative"] <= alarms["uniform"] and alarms["conservative"] <= 2


def test_mapie_jumper_is_two_sided_but_step_jumper_ignores_large_p_values():
    # a stream whose p-values are all large (calibration stranger than the traffic) alarms the
    # two-sided jumper, never the one-sided bets
    ps = np.linspace(0.85, 1.0, 200)
    assert _first_alarm(ShiftMonitor(alpha=0.05, method="jumper"), ps) is not None
    step = ShiftMonitor(alpha=0.05, method="step-jumper")
    assert _first_alarm(step, ps) is None and step.max_statistic <= 1.0


def test_plugin_martingale_learns_the_p_value_density():
    rng = np.random.default_rng(13)
    m = ShiftMonitor(alpha=0.01, method="plugin", burn_in=10)
    ps = np.concatenate([rng.uniform(size=30), rng.uniform(0.0, 0.05, size=200)])
    at = _first_alarm(m, ps)
    assert at is not None and at >= 30 and m.statistic >= 100
    null = ShiftMonitor(alpha=0.01, method="plugin", burn_in=10)
    assert _first_alarm(null, rng.uniform(size=200)) is None


def test_online_p_values_are_uniform_when_scores_are_exchangeable_with_the_reference():
    from scipy.stats import kstest

    rng = np.random.default_rng(14)
    m = ShiftMonitor(alpha=0.01, method="step-jumper", seed=3)
    m.reset(rng.normal(size=80).tolist())
    ps = []
    for s in rng.normal(size=400):
        ps.append(m.online_p_value(float(s)))
        m.update_score(float(s))
    assert kstest(ps, "uniform").pvalue > 1e-3 and not m.alarm
    assert m.reference_n == 80 and m.n == 400
    # a score above every reference score gets p <= 1/(m+1); below every one, p >= m/(m+1)
    fresh = ShiftMonitor(alpha=0.01)
    fresh.reset([0.1, 0.2, 0.3])
    assert 0.0 <= fresh.online_p_value(5.0) <= 0.25 and 0.75 <= fresh.online_p_value(-5.0) <= 1.0
    # ties are broken at random: p = (#greater + U (#equal + 1)) / (m + 1)
    p = fresh.online_p_value(0.2)
    assert 0.25 <= p <= 0.75
    # the shifted scores (larger = stranger) raise the alarm
    shifted = ShiftMonitor(alpha=0.01, method="step-jumper")
    shifted.reset(rng.normal(size=80).tolist())
    for s in rng.normal(loc=3.0, size=60):
        shifted.update_score(float(s))
    assert shifted.alarm and shifted.alarm_at <= 30


def test_update_score_bad_values_rebase_and_usage_errors():
    m = ShiftMonitor(alpha=0.05, method="step-jumper")
    m.reset([0.1, float("nan"), "x", 0.3])  # type: ignore[list-item]
    assert m.reference_n == 2 and m.describe()["reference_dropped"] == 2
    for bad in (None, math.nan, math.inf, True, "0.2"):
        m.update_score(bad)  # type: ignore[arg-type]
    assert m.ignored == 5 and m.n == 0 and m.statistic == 1.0
    m.rebase(np.linspace(0.0, 1.0, 50).tolist())  # new reference, same (initial) wealth
    assert m.reference_n == 50 and m.statistic == 1.0
    for i in range(5):  # each stranger than everything before: p <= 1/51
        m.update_score(10.0 + i)
    wealth = m.statistic
    assert wealth > 20.0 and m.alarm and m.alarm_at <= 5
    m.rebase([0.5] * 40)
    assert m.statistic == wealth and m.reference_n == 40 and m.n == 5 and m.alarm
    m.reset()
    assert m.statistic == 1.0 and m.reference_n == 0 and m.n == 0
    with pytest.raises(ArgumentError):
        m.online_p_value(math.nan)
    with pytest.raises(ArgumentError):
        ShiftMonitor(method="cusum")
    with pytest.raises(ArgumentError):
        ShiftMonitor(method="plugin", burn_in=0)
    with pytest.raises(ArgumentError):
        ShiftMonitor(jump_size=1.0)


def test_audit_summary():
    s = audit_summary({"n": 50, "disagreements": 2, "errors": 1})
    assert s["silent_wrong"] == 2 and s["silent_wrong_rate"] == pytest.approx(0.04)
    assert 0 < s["silent_wrong_ci95_low"] < 0.04 < s["silent_wrong_ci95_high"] < 0.2
    empty = audit_summary(type("A", (), {"n": 0, "disagreements": 0, "errors": 0})())
    assert empty["silent_wrong_rate"] is None and empty["silent_wrong_ci95_high"] is None
    with pytest.raises(ArgumentError):
        audit_summary({"n": 3, "disagreements": 4})


def _compile(store_path, tmp_path, name, memo=True, **contract_kw):
    from auto.compile import compile_task
    from auto.store import Store
    from auto.gate import Contract

    kw = {"programs": False}
    with Store(store_path) as st:
        return compile_task(st, "triage", contract=Contract(task="triage", **contract_kw), generation=90,
                            out_path=tmp_path / name, memo=memo, **kw)


def test_compiled_specialist_carries_the_stack(triage_artifact):
    _, outcome = triage_artifact
    g = outcome.manifest["guard"]
    assert g["method"] == "stack" and isinstance(g["statement"], str)
    nov, risk = g["components"]
    assert nov["method"] == "conformal-novelty" and nov["n"] == len(nov["calibration_scores"]) > 0
    assert risk["method"] == "selective-risk" and risk["epsilon"] == 0.05 and risk["delta"] == 0.1
    assert risk["confidence_field"] == "margin" and risk["n"] <= nov["n"]
    # cross-fit (the default): every distinct input calibrates through its out-of-fold prediction
    held = outcome.manifest["parity"]["heldout"]
    assert "out-of-fold" in held["method"] and held["n"] == nov["n"] == outcome.manifest["provenance"]["distinct_inputs"]
    assert outcome.manifest["model"]["calibration"]["method"] == "cross-fit"
    # the gate passed, so the guard certified a threshold that lets some inputs through
    assert g["fallback_reason"] is None and risk["threshold"] is not None and 0 < risk["calibration_coverage"] <= 1
    assert any("cross-fit" in n for n in risk["notes"]) and "cross-fit" in g["statement"]
    assert "fresh call" in g["epsilon_refers_to"]
    summary = outcome.summary()["guard"]
    assert all("calibration_scores" not in c for c in summary["components"])


@pytest.mark.slow
def test_split_calibration_measures_the_stack_on_held_out_inputs(triage_store, tmp_path):
    out = _compile(triage_store, tmp_path, "split.wasm", calibration="split")
    g = out.manifest["guard"]
    nov, risk = g["components"]
    assert risk["heldout_n"] == out.manifest["parity"]["heldout"]["n"] > 0
    assert out.manifest["parity"]["heldout"]["method"] == "held-out"
    assert 0 <= risk["heldout_coverage"] <= 1 and nov["n"] < out.manifest["provenance"]["distinct_inputs"]


@pytest.mark.slow
def test_uncertifiable_risk_is_a_refusal_that_says_the_guard_would_deopt_everything(triage_store, tmp_path):
    from auto.errors import GateRefused

    with pytest.raises(GateRefused) as e:  # needs >= 114 error-free points above the threshold
        _compile(triage_store, tmp_path, "strict.wasm", epsilon=0.02, delta=0.1, memo=False)
    assert "the guard would deopt every input outside the table" in e.value.reason
    assert "selective risk <= 0.02" in e.value.reason


def test_online_p_values_are_mapies_to_the_bit():
    import random

    from mapie.exchangeability_testing import OnlineMartingaleTest

    rng = random.Random(4)
    ref = [round(rng.random(), 2) for _ in range(50)]  # rounded: ties occur
    mon = ShiftMonitor(alpha=0.05, method="step-jumper", seed=7)
    mon.reset(ref)
    twin = OnlineMartingaleTest(test_method="jumper_martingale", test_level=0.05, warn=False, jump_size=mon.jump_size,
                                burn_in=mon.burn_in, random_state=mon.seed + mon.resets - 1)
    history = list(ref)
    ties = 0
    for _ in range(300):
        s = round(rng.random() * 1.2, 2)
        ties += s in history
        theirs = twin.compute_p_value(s, history)
        mon.update_score(s)
        assert mon.last_p_value == theirs
        history.append(s)
    assert ties > 20  # the tie-breaking path was exercised


def test_certifiable_coverage_grows_with_witnesses_despite_confident_mistakes():
    # the reference's own confident mistakes: 8% wrong among the most confident 8% of inputs, 1.5%
    # in the bulk, 30% at low confidence. A single fixed sequence starts among the most confident
    # points and stops there at every size; the multi-start chains certify more as n grows.
    def draw(n: int) -> tuple[list[float], list[bool]]:
        rng = np.random.default_rng(n)
        c = rng.uniform(size=n)
        p = np.where(c > 0.92, 0.08, np.where(c > 0.3, 0.015, 0.3))
        return c.tolist(), (rng.uniform(size=n) >= p).tolist()

    covs = []  # (at 400 points this draw is at the edge: the smallest certifiable epsilon is 0.052)
    for n in (800, 1600, 3200):
        e = calibrate_selective_risk(*draw(n), epsilon=EPS, delta=DELTA)
        assert e["threshold"] is not None, (n, e["reason"])
        covs.append(e["calibration_coverage"])
    assert covs[0] > 0.6 and min(covs[1:]) >= covs[0] - 0.02, covs
    assert calibrate_selective_risk(*draw(3200), epsilon=EPS, delta=DELTA)["starts"] == 4


def test_chains_start_at_shares_of_the_inputs_not_at_threshold_positions():
    # 100 distinct top confidences holding 4 confident mistakes among the first 70, then 500 inputs on five
    # tied levels with 1% errors, then 200 at the bottom with 40% errors. Starts spaced over the 106 distinct
    # thresholds all fall among the top 100 and stop at the mistakes (nothing certified, though the smallest
    # certifiable epsilon is below 0.05); a chain anchored at half of the inputs certifies 3/4 of them.
    conf = list(np.linspace(1.0, 0.6, 100))
    ok = [i not in (5, 20, 40, 66) for i in range(100)]
    for lvl in range(5):
        conf += [0.5 - 0.05 * lvl] * 100
        ok += [j != 50 for j in range(100)]
    conf += [0.0] * 200
    ok += [j % 5 >= 2 for j in range(200)]
    e = calibrate_selective_risk(conf, ok, epsilon=EPS, delta=DELTA)
    assert e["threshold"] == pytest.approx(0.3) and e["calibration_coverage"] == 0.75
    assert e["starts"] == 3  # the top chain, and chains at 1/2 and 1/4 of the 800 inputs (1/8 = 100 < 4 * 45)
    assert e["smallest_certifiable_epsilon"] <= EPS


def test_start_shares_are_label_free_and_grow_with_the_calibration_size():
    from auto.guards.risk import START_MIN_POINTS, n_starts, start_fractions

    assert n_starts(2 * START_MIN_POINTS - 1) == 1  # below 360 points: the single-start procedure
    assert start_fractions(2 * START_MIN_POINTS) == (0.5,)
    assert start_fractions(8 * START_MIN_POINTS) == (0.5, 0.25, 0.125) and n_starts(10**6) == 4


def test_a_level_certifiable_below_epsilon_is_certifiable_at_epsilon():
    # 380 points, none wrong among the top 50, two wrong just below, 20% wrong from rank 60 on. The chains do
    # not depend on epsilon, so every level from the smallest certifiable one up is certified (a rule that
    # added a chain between 0.045 and 0.05 certified 0.045, not 0.05, and 0.06 again)
    conf = np.linspace(1, 0, 380).tolist()
    ok = [not (i in (51, 53) or (i >= 60 and i % 5 == 0)) for i in range(380)]
    se = smallest_certifiable_epsilon(conf, ok, DELTA)
    assert se is not None
    for eps in np.round(np.arange(se, 0.2, 0.003), 6):
        assert calibrate_selective_risk(conf, ok, epsilon=float(eps), delta=DELTA)["threshold"] is not None, eps
    assert calibrate_selective_risk(conf, ok, epsilon=round(se - 0.001, 6), delta=DELTA)["threshold"] is None
