"""The certificate on the excess over the reference's own disagreement (auto.guards.noise, the
``noise=`` path of auto.guards.risk, the near-duplicate calibration and the contract field)."""

from __future__ import annotations

import random

import numpy as np
import pytest
from scipy.stats import beta

from auto.compile import compile_task
from auto.compile import neardup as nd
from auto.compile.rungs.specialist import noise_evidence
from auto.errors import ContractError, GateRefused
from auto.gate import Contract
from auto.guards.noise import ReferenceNoise, first_witnessed, reference_noise
from auto.guards.risk import calibrate_selective_risk
from auto.store import Store
from test_neardup import _store

LABELS = ["shipping", "billing", "account", "bug", "cancel"]


def _draw(rng: np.random.Generator, n: int, eta: float, spec_err: float, reasked: int):
    """Calibration pairs of a specialist that disagrees with the reference's belief at ``spec_err``,
    labelled by single calls that leave the belief at ``eta``, and ``reasked`` re-asked inputs' pairs."""
    conf = rng.random(n)
    off_belief = rng.random(n) < spec_err
    noisy = rng.random(n) < eta
    correct = ~(off_belief ^ noisy)  # a noisy call that hits the specialist's wrong answer is ignored (rare)
    pairs = (rng.random(reasked) < eta) ^ (rng.random(reasked) < eta)
    return conf, correct, ReferenceNoise(reasked, int(pairs.sum()))


def test_noise_lower_bound_is_the_one_sided_clopper_pearson_bound():
    assert ReferenceNoise(0, 0).lower_bound(0.95) == 0.0 and ReferenceNoise(40, 0).lower_bound(0.95) == 0.0
    assert ReferenceNoise(30, 3).lower_bound(0.95) == pytest.approx(beta.ppf(0.05, 3, 28))
    assert ReferenceNoise(30, 3).lower_bound(0.95) < 0.1 < ReferenceNoise(30, 3).lower_bound(0.5) + 0.1
    with pytest.raises(ValueError):
        ReferenceNoise(3, 1).lower_bound(1.0)


def test_reference_noise_counts_the_first_two_witnesses_of_re_asked_inputs():
    groups = {"a": ['"x"', '"x"', '"y"'], "b": ['"x"', '"y"'], "c": ['"z"'], "d": ['"y"', '"y"']}
    ev = reference_noise(groups)
    assert (ev.reasked, ev.disagreeing) == (3, 1)  # "a": its first two agree; the third call is not paired
    assert reference_noise(groups, ["b", "c", "missing"]) == ReferenceNoise(1, 1)
    assert first_witnessed(groups) == {"a": '"x"', "b": '"x"', "c": '"z"', "d": '"y"'}


def test_a_specialist_at_the_noise_level_is_refused_by_the_old_certificate_and_certified_by_the_new():
    # belief-level errors 2%, per-call noise 4%: against single calls the specialist errs ~6% (> epsilon 5%),
    # while a second reference call disagrees with the first ~7.7%: the excess is negative
    conf, correct, noise = _draw(np.random.default_rng(0), 1500, 0.04, 0.02, 400)
    old = calibrate_selective_risk(conf, correct, epsilon=0.05, delta=0.1)
    assert old["threshold"] is None and old["smallest_certifiable_epsilon"] > 0.05
    assert old["reference_noise"] is None and old["risk_level"] == 0.05
    new = calibrate_selective_risk(conf, correct, epsilon=0.05, delta=0.1, noise=noise, noise_min_reasked=30)
    rn = new["reference_noise"]
    assert new["threshold"] is not None and new["calibration_coverage"] > 0.9
    assert rn["used"] and rn["reasked"] == 400 and rn["delta_noise"] == 0.05 and new["delta_risk"] == 0.05
    assert rn["lower_bound"] == pytest.approx(noise.lower_bound(0.95), abs=1e-8)
    assert new["risk_level"] == pytest.approx(0.05 + rn["lower_bound"], abs=1e-8)
    assert "excess" in new["epsilon_refers_to"] and new["smallest_certifiable_epsilon"] < 0.05


def test_a_specialist_genuinely_worse_than_the_noise_is_still_refused():
    conf, correct, noise = _draw(np.random.default_rng(1), 1500, 0.04, 0.15, 400)
    new = calibrate_selective_risk(conf, correct, epsilon=0.05, delta=0.1, noise=noise, noise_min_reasked=30)
    assert new["threshold"] is None and new["reference_noise"]["used"]
    assert "excess selective risk <= 0.05" in new["reason"]


def test_the_holm_procedure_takes_the_noise_allowance_too():
    conf, correct, noise = _draw(np.random.default_rng(0), 1500, 0.04, 0.02, 400)
    conf = np.round(conf * 4) / 4  # few distinct confidences, as a program's
    old = calibrate_selective_risk(conf, correct, epsilon=0.05, delta=0.1, holm=True)
    new = calibrate_selective_risk(conf, correct, epsilon=0.05, delta=0.1, holm=True, noise=noise, noise_min_reasked=30)
    assert old["threshold"] is None and new["threshold"] is not None
    assert new["smallest_certifiable_epsilon"] < 0.05 < old["smallest_certifiable_epsilon"]


def test_too_few_re_asked_inputs_keep_the_old_rule():
    conf, correct, _ = _draw(np.random.default_rng(0), 1500, 0.04, 0.02, 0)
    for noise, least in ((ReferenceNoise(12, 2), 30), (ReferenceNoise(400, 30), None)):
        e = calibrate_selective_risk(conf, correct, epsilon=0.05, delta=0.1, noise=noise, noise_min_reasked=least)
        assert e["threshold"] is None and not e["reference_noise"]["used"] and e["reference_noise"]["reason"]
        assert e["risk_level"] == 0.05 and e["delta_risk"] == 0.1


def test_the_excess_certificate_holds_its_delta_by_simulation():
    # the null at its edge: against single calls the specialist errs 0.01 more than two calls disagree
    # (excess 0.06 > epsilon 0.05); certifying any threshold is an error, allowed in at most delta of draws
    rng = np.random.default_rng(7)
    eta, n, trials = 0.04, 600, 60
    rho = 2 * eta * (1 - eta)
    errors = 0
    for _ in range(trials):
        conf = rng.random(n)
        correct = rng.random(n) >= rho + 0.06
        pairs = int((rng.random(300) < rho).sum())
        e = calibrate_selective_risk(conf, correct, epsilon=0.05, delta=0.1, noise=ReferenceNoise(300, pairs),
                                     noise_min_reasked=30)
        errors += e["threshold"] is not None
    assert errors / trials <= 0.1 + 0.08  # delta plus three binomial standard errors of 60 trials


def test_contract_field_default_and_off():
    assert Contract(task="t").noise_min_reasked == 30 and Contract(task="t", noise_min_reasked=None).noise_min_reasked is None
    with pytest.raises(ContractError, match="noise_min_reasked"):
        Contract(task="t", noise_min_reasked=1)


def test_noise_evidence_labels_the_specialist_by_the_first_witness():
    items = [({"text": "a"}, "x", 2 / 3), ({"text": "b"}, "y", 1.0)]
    groups = {'{"text":"a"}': ['"y"', '"x"', '"x"'], '{"text":"b"}': ['"y"']}
    noise, single = noise_evidence(groups, items, ["x", "y"])
    assert noise == ReferenceNoise(1, 1) and single == [False, True]


# near-duplicates -------------------------------------------------------------------------------

NOUNS = {"order": "shipping", "invoice": "billing", "password": "account", "app": "bug", "subscription": "cancel"}
GREET = ["", "Hi, ", "Hello team, ", "hey "]
SIGN = ["", " Thanks, Ana", " Regards, Bob", " Cheers!"]


def _noisy_stream(bases: int, reasked: int, eta: float, seed: int = 0) -> list[tuple[str, str]]:
    """``bases`` tickets, each written three ways (greeting, sign-off), answered by a reference that
    leaves the right label at ``eta`` per call; the first ``reasked`` written tickets are asked a
    second time (after all first calls)."""
    rng = random.Random(seed)

    def call(y: str) -> str:
        return rng.choice([lab for lab in LABELS if lab != y]) if rng.random() < eta else y

    tickets = []
    for i in range(bases):
        noun = list(NOUNS)[i % len(NOUNS)]
        w = chr(97 + (i // 5) // 26) + chr(97 + (i // 5) % 26)
        for g, s in zip(GREET[:3], SIGN[1:]):
            tickets.append((f"{g}trouble with the {noun} of item {w}{s}", NOUNS[noun]))
    return [(x, call(y)) for x, y in tickets] + [(x, call(y)) for x, y in tickets[:reasked]]


def test_neardup_merges_the_old_bound_refuses_are_certified_over_the_noise(tmp_path):
    stream = _noisy_stream(150, 200, 0.08)
    _store(tmp_path / "s.db", stream)
    with Store(tmp_path / "s.db") as st, pytest.raises(GateRefused, match="no canonicalization step certified at epsilon"):
        compile_task(st, "nd", rungs=["neardup"], out_path=tmp_path / "old.wasm",
                     contract=Contract(task="nd", noise_min_reasked=None))
    with Store(tmp_path / "s.db") as st:
        o = compile_task(st, "nd", rungs=["neardup"], out_path=tmp_path / "g.wasm")
    near = o.manifest["model"]["near_duplicate"]
    rn = near["reference_noise"]
    assert rn["used"] and rn["reasked"] == 200 and rn["disagreeing"] > 10 and near["level"] > 0.05
    assert "exceeds the reference's own disagreement" in near["guarantee"]
    chosen = next(s for s in near["steps"] if s["step"] == near["step"])
    assert chosen["upper"] <= near["level"] and chosen["merges"] > 100


def test_neardup_merges_genuinely_worse_than_the_noise_are_still_refused():
    # the reference answers by the amount: deleting identifiers merges inputs answered differently
    words = [chr(97 + i // 26) + chr(97 + i % 26) for i in range(60)]
    pairs = [(f"refund {amt} dollars for item {w}", "escalation" if amt >= 500 else "refund")
             for w in words for amt in (120, 900)]
    inputs = [{"ticket": x} for x, _ in pairs]
    answers = [y for _, y in pairs]
    cal = nd.calibrate(inputs, answers, [True] * len(pairs), "ticket", epsilon=0.05, delta=0.1,
                       noise=ReferenceNoise(200, 16), noise_min_reasked=30, steps=("identifiers",))
    assert cal.noise["used"] and cal.level > 0.05 and cal.chosen is None and cal.steps[0].wrong >= 100


# the specialist -------------------------------------------------------------------------------

def _specialist_stream(n: int, reasked: int, eta: float, seed: int = 0) -> list[tuple[str, str]]:
    """``n`` distinct utterances whose label is their keyword, answered by a reference that leaves it
    at ``eta`` per call; the first ``reasked`` are asked again after all first calls."""
    rng = random.Random(seed)
    fill = ["please", "could you", "i need to", "help me", "now", "today", "quickly", "again", "for me", "thanks"]
    out = []
    for i in range(n):
        noun = list(NOUNS)[i % len(NOUNS)]
        out.append((f"{rng.choice(fill)} {noun} {rng.choice(fill)} {rng.choice(fill)} ref {i}", NOUNS[noun]))

    def call(y: str) -> str:
        return rng.choice([lab for lab in LABELS if lab != y]) if rng.random() < eta else y

    return [(x, call(y)) for x, y in out] + [(x, call(y)) for x, y in out[:reasked]]


def _text_store(path, items, task="sp"):
    """The witnesses ``items`` as task spans of ``task`` with the input field ``text``."""
    _store(path, items, task, field="text")


def test_the_specialist_refused_on_single_noisy_witnesses_is_certified_over_the_noise(tmp_path):
    _text_store(tmp_path / "s.db", _specialist_stream(600, 300, 0.07))
    with Store(tmp_path / "s.db") as st, pytest.raises(GateRefused, match="no threshold controls selective risk <= 0.05"):
        compile_task(st, "sp", rungs=["specialist"], out_path=tmp_path / "old.wasm",
                     contract=Contract(task="sp", noise_min_reasked=None))
    with Store(tmp_path / "s.db") as st:
        o = compile_task(st, "sp", rungs=["specialist"], out_path=tmp_path / "g.wasm")
    guard = o.manifest["guard"]
    risk = next(c for c in guard["components"] if c["method"] == "selective-risk")
    rn = risk["reference_noise"]
    assert risk["threshold"] is not None and rn["used"] and rn["reasked"] == 300 and rn["disagreeing"] > 20
    assert "excess" in guard["epsilon_refers_to"] and "excess silent-wrong <= 0.05" in guard["statement"]
