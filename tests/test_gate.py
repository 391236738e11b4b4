"""Contract parsing, Clopper–Pearson bounds and gate verdicts."""

import pytest

from auto.errors import ContractError
from auto.gate import Check, CheckName, Contract, EvalRun, Verdict, agreement, clopper_pearson, eval_record, run_gate


def test_clopper_pearson_known_values():
    # n/n successes: lower bound = (alpha/2)^(1/n) (closed form of the exact interval)
    low, high = clopper_pearson(20, 20)
    assert low == pytest.approx(0.025 ** (1 / 20), rel=1e-9) and high == 1.0
    low, high = clopper_pearson(0, 10)
    assert low == 0.0 and high == pytest.approx(1 - 0.025 ** (1 / 10), rel=1e-9)
    assert clopper_pearson(0, 0) == (None, None)


def test_contract_defaults_and_toml(tmp_path):
    c = Contract.default_for("triage")
    assert c.output == "witnessed-label" and 0 < c.heldout_fraction <= 0.5
    p = tmp_path / "c.toml"
    p.write_text('[contract]\nmin_agreement = 0.99\nheldout_fraction = 0.3\n')
    c2 = Contract.load(p, task="triage")
    assert c2.min_agreement == 0.99 and c2.task == "triage" and c2.id != c.id


@pytest.mark.parametrize("text,needle", [
    ("[contract]\nmin_agreemnt = 0.9\n", "min_agreemnt"),
    ("[contract]\nmin_agreement = 1.5\n", "min_agreement"),
    ("not = [toml", "not valid TOML"),
    ("[contract]\nheldout_fraction = 0.5\ncalibration_fraction = 0.4\n", "20%"),
])
def test_bad_contracts_are_clear_errors(tmp_path, text, needle):
    p = tmp_path / "c.toml"
    p.write_text(text)
    with pytest.raises(ContractError, match=needle):
        Contract.load(p, task="triage")


def test_contract_for_other_task_is_refused(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text('[contract]\ntask = "routing"\n')
    with pytest.raises(ContractError, match="routing"):
        Contract.load(p, task="triage")


def test_a_shared_contract_applies_to_every_task_and_ignores_the_task_it_names(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text('[contract]\ntask = "routing"\nmin_agreement = 0.97\n')
    fields = Contract.load_shared(p)
    assert "task" not in fields and fields["min_agreement"] == 0.97
    assert Contract(task="triage", **fields).min_agreement == 0.97
    p.write_text("[contract]\nmin_agreemnt = 0.9\n")
    with pytest.raises(ContractError, match="min_agreemnt"):
        Contract.load_shared(p)


def _gate(answers_by_text, witnessed, heldout, contract=None, labels=("a", "b")):
    def run_batch(inputs):
        return [{"answer": answers_by_text[i["t"]]} if i["t"] in answers_by_text else {"error": "missing_field"} for i in inputs]

    return run_gate(contract=contract or Contract(task="t", min_agreement=0.9, min_agreement_ci95_low=0.8),
                    run_batch=run_batch, reference_predict=lambda i: answers_by_text.get(i["t"]),
                    witnessed=witnessed, heldout=heldout, labels=list(labels), candidate={"kind": "test"}, generation=1)


def test_gate_passes_and_refuses_on_heldout_agreement():
    held = [({"t": f"h{i}"}, "a") for i in range(40)]
    ans = {f"h{i}": "a" for i in range(40)}
    rec = _gate(ans, held, held)
    assert rec["verdict"] == "pass"
    ans_bad = {**ans, **{f"h{i}": "b" for i in range(6)}}  # 34/40 = 0.85 < 0.9
    rec = _gate(ans_bad, held, held)
    assert rec["verdict"] == "refuse" and "34/40" in rec["reason"]


def test_gate_refuses_small_heldout_by_lower_bound_and_unwitnessed_labels():
    held = [({"t": f"h{i}"}, "a") for i in range(5)]
    rec = _gate({f"h{i}": "a" for i in range(5)}, held, held)
    assert rec["verdict"] == "refuse" and "lower bound" in rec["reason"]
    held = [({"t": f"h{i}"}, "a") for i in range(40)]
    rec = _gate({**{f"h{i}": "a" for i in range(40)}, "h0": "zzz"}, held, held)
    assert rec["verdict"] == "refuse"
    assert any(c["name"] == "output-is-witnessed-label" and not c["passed"] for c in rec["checks"])


def test_agreement_is_canonical():
    a = agreement([{"x": 1, "y": 2}], [{"y": 2, "x": 1}])
    assert a["agree"] == 1 and a["rate"] == 1.0


def test_eval_runs_are_typed_and_read_back_as_stored():
    """A record built from typed checks reads back into the same checks; the verdict is named; the
    reason of a refusal is its first failed check's; a rung's stored-form check is read by name."""
    c = Contract.default_for("t")
    checks = [Check(CheckName.RUNS_WITHOUT_ERROR, True, {"errors": 0, "n": 3}),
              Check(CheckName.WITNESSED_AGREEMENT, True, {"n": 3, "agree": 3}, informational=True),
              Check(CheckName.FIELD_AGREEMENT, False, {"n": 3, "agree": 1}, field="total", refusal="total: 1/3")]
    rec = eval_record(c, 1, {"kind": "x"}, checks, "total: 1/3")
    assert rec["verdict"] == "refuse" and [d["name"] for d in rec["checks"]] == [
        "runs-without-error", "witnessed-agreement", "field-agreement:total"]
    assert rec["checks"][1]["informational"] is True and "informational" not in rec["checks"][0]
    run = EvalRun.from_record({**rec, "guard": {"method": "program"}})
    assert run.verdict is Verdict.REFUSE and run.extra == {"guard": {"method": "program"}}
    assert run.checks == tuple(checks) and run.to_record() == {**rec, "guard": {"method": "program"}}
    assert run.check(CheckName.WITNESSED_AGREEMENT)["agree"] == 3 and run.check(CheckName.GUARD_RISK) is None
    assert run.field_checks()["total"].get("agree") == 1
    stored = eval_record(c, 1, None, [{"name": "enough-runs", "train": 2, "passed": False}], "too few")
    assert EvalRun.from_record(stored).check(CheckName.ENOUGH_RUNS).get("train") == 2
    with pytest.raises(ValueError):
        eval_record(c, 1, None, [{"name": "no-such-check", "passed": False}], "x")


def test_a_refusal_names_its_first_failed_check():
    c = Contract.default_for("t")
    w = [({"t": str(i)}, "a") for i in range(30)]
    h = [({"t": str(i)}, "a") for i in range(30, 40)]
    rec = run_gate(contract=c, run_batch=lambda xs: [{"answer": "zz"} for _ in xs], reference_predict=lambda x: "zz",
                   witnessed=w, heldout=h, labels=["a"], candidate={}, generation=1)
    run = EvalRun.from_record(rec)
    assert run.verdict is Verdict.REFUSE and rec["reason"] == "40 answers are not witnessed labels"
    assert not run.check(CheckName.OUTPUT_IS_WITNESSED_LABEL).passed and not run.check(CheckName.HELDOUT_AGREEMENT).passed


def test_the_program_gate_bound_is_the_one_sided_clopper_pearson_bound():
    from auto.gate import clopper_pearson, clopper_pearson_lower
    assert clopper_pearson_lower(20, 20) == pytest.approx(0.05 ** (1 / 20))  # 0.861: P(20 of 20 | p) = p^20
    assert round(clopper_pearson_lower(20, 20), 3) == 0.861 and round(clopper_pearson_lower(19, 20), 3) == 0.784
    assert round(clopper_pearson_lower(19, 20, confidence=1 - 0.05 / 4), 3) == 0.721  # Bonferroni over 4 procedures
    # the two-sided 95% interval's lower end is the one-sided bound at 97.5%
    assert clopper_pearson(19, 20)[0] == pytest.approx(clopper_pearson_lower(19, 20, confidence=0.975))
    assert clopper_pearson_lower(0, 20) == 0.0 and clopper_pearson_lower(0, 0) is None
