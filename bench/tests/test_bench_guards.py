"""`auto bench guards`, the OOD probes, and the guard stack in the triage stream (shift alarm, audit)."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from auto.gate import clopper_pearson
from bench.triage.oracle import triage_oracle
from bench.triage.probes import KINDS, Probe, generate_probes


# ----------------------------------------------------------------------------- probes


def test_probes_are_deterministic_tagged_and_cover_every_kind():
    a, b = generate_probes(0), generate_probes(0)
    assert a == b
    assert len(a) >= 100
    counts = Counter(p.kind for p in a)
    assert set(counts) == set(KINDS)
    assert all(isinstance(p, Probe) and p.kind in KINDS for p in a)
    for kind in KINDS:
        texts = [p.ticket for p in a if p.kind == kind]
        assert len(texts) == len(set(texts)), kind
    assert all(p.ticket.strip() == "" for p in a if p.kind == "empty")
    assert all(len(p.ticket) >= 2048 for p in a if p.kind == "very-long")
    assert {p.language for p in a if p.kind == "foreign-language"} == {"es", "de", "fr"}
    assert any(p.note == "shipping" for p in a if p.kind == "unseen-category")
    # the reference answer is the simulator oracle's label
    for p in a[::7]:
        assert p.reference_answer() == triage_oracle(p.ticket)[0]
    # another seed changes the generated parts (garbage), not the hand-written ones
    other = generate_probes(1)
    assert [p.ticket for p in other if p.kind == "flipped-meaning"] == [p.ticket for p in a if p.kind == "flipped-meaning"]
    assert [p.ticket for p in other if p.kind == "garbage"] != [p.ticket for p in a if p.kind == "garbage"]


def test_flipped_probes_negate_their_original():
    flips = [p for p in generate_probes(0) if p.kind == "flipped-meaning"]
    assert len(flips) >= 10
    for p in flips:
        assert p.note.startswith("flips: ") and p.note[len("flips: "):] != p.ticket
        assert any(w in p.ticket.lower() for w in ("not", "no ", "nobody", "nothing", "ignore", "withdraw", "stopped",
                                                   "already", "again", "no longer", "correct", "works"))


# ----------------------------------------------------------------------------- rows


def test_guard_row_rates_follow_the_definitions():
    from bench.guard_eval import guard_row

    # 6 inputs: tier-1 on 0..2; the artifact would be right on 0, 3, 4 (None = no answer)
    tier1 = [True, True, True, False, False, False]
    answers = ["a", "b", "c", "a", "a", None]
    refs = ["a", "a", "a", "a", "a", "a"]
    r = guard_row(family="triage", guard="lexical", split="ood", tier1=tier1, answers=answers, references=refs)
    assert (r["n"], r["tier1"], r["tier1_wrong"], r["would_be_correct"], r["false_abstain_count"]) == (6, 3, 2, 3, 2)
    assert r["false_proceed"] == 2 / 3 and r["false_abstain"] == 2 / 3
    assert r["false_proceed_ci95_high"] == clopper_pearson(2, 3)[1]
    assert r["false_abstain_ci95_high"] == clopper_pearson(2, 3)[1]
    assert r["tier1_share"] == 0.5 and r["admitted"] == 0.5
    held = guard_row(family="triage", guard="lexical", split="heldout", tier1=[False], answers=["x"], references=["y"])
    assert held["admitted"] is None and held["false_proceed"] is None and held["false_abstain"] is None
    with pytest.raises(Exception, match="lengths differ"):
        guard_row(family="triage", guard="lexical", split="ood", tier1=[True], answers=[], references=["a"])


# ----------------------------------------------------------------------------- stream wiring


def _oracle_reference(inp):
    from bench.stream import Metered

    return Metered(answer=triage_oracle(inp["ticket"])[0], cost_usd_micros=1.0, latency_ms=1.0, simulated=True)


@pytest.fixture(scope="module")
def oracle_generation(tmp_path_factory):
    """A store of 500 oracle-labelled training tickets (each witnessed twice) and one generation compiled from it."""
    from auto.compile import compile_task
    from auto.store import Store
    from bench.triage import corpus

    d = tmp_path_factory.mktemp("oracle")
    st = Store(d / "train.sqlite")
    for t in corpus.generate(500, seed=11):
        for _ in range(2):
            st.add_witness(task="triage", input={"ticket": t.ticket}, output=triage_oracle(t.ticket)[0])
    outcome = compile_task(st, "triage", out_path=d / "triage.gen1.wasm", reference_model="oracle (test)")
    return d, st, outcome


NO_COMPILES = dict(first_at=10**9, min_new=10**9, growth=1e9, new_label_support=10**9, memo_new=0)
"""A policy that compiles only after an alarm (shift or risk)."""


def _stream_store(tmp_path, train_store):
    from auto.store import Store

    path = tmp_path / "stream.sqlite"
    with Store(path) as st:
        st.ingest(train_store.spans(), train_store.traces())
    return path


@pytest.mark.slow
def test_stream_alarm_tightens_and_recompiles_on_a_shift(oracle_generation, tmp_path):
    from auto.ratchet import CompilePolicy
    from auto.gate import Contract
    from bench.stream import run_stream
    from bench.triage import corpus

    _d, train_store, outcome = oracle_generation
    before = [{"ticket": t.ticket} for t in corpus.generate(40, seed=99)]
    shifted = [{"ticket": p.ticket} for p in generate_probes(0) if p.kind in ("garbage", "foreign-language")][:70]
    items = before + shifted
    run = run_stream(task="triage", items=items, labels=[None] * len(items), reference=_oracle_reference,
                     store_path=_stream_store(tmp_path, train_store), contract=Contract.default_for("triage"),
                     initial=outcome, shift_alpha=0.01, audit_rate=0.0, worker="thread",
                     policy=CompilePolicy(**NO_COMPILES))
    assert run.shift_alarms, "no alarm on a shift to garbage and foreign-language text"
    first = run.shift_alarms[0]["position"]
    assert first >= len(before) - 5  # (an alarm inside the in-distribution part would be a false alarm)
    assert "martingale" in run.shift_alarms[0]["reason"]
    after = [c for c in run.compiles if c.get("after_shift_alarm")]
    assert after and after[0]["position"] <= first + 3  # compiled as soon as there was a new witness
    installed = [g for g in run.generations if g["position"] > first]
    # between the alarm and the next installed generation every call deopts with the alarm reason
    until = installed[0]["position"] if installed else len(items)
    tightened = [r for r in run.rows if first <= r.position < until]  # positions count the calls served before
    assert tightened and all(r.tier == "tier-0" and r.reason.startswith("shift alarm:") for r in tightened)
    assert run.shift_monitor is not None and run.shift_monitor["alpha"] == 0.01
    # measurement: the artifact's own answer is recorded on every row once a generation is installed
    assert all(r.artifact_answer is not None for r in run.rows[:len(before)])


@pytest.mark.slow
def test_stream_shadow_audit_is_counted(oracle_generation, tmp_path):
    from auto.ratchet import CompilePolicy
    from auto.gate import Contract
    from bench.run import shadow_audit_figures
    from bench.stream import run_stream
    from bench.triage import corpus

    _d, train_store, outcome = oracle_generation
    items = [{"ticket": t.ticket} for t in corpus.generate(60, seed=5)]
    run = run_stream(task="triage", items=items, labels=[None] * len(items), reference=_oracle_reference,
                     store_path=_stream_store(tmp_path, train_store), contract=Contract.default_for("triage"),
                     initial=outcome, audit_rate=1.0, audit_seed=3, worker="thread", policy=CompilePolicy(**NO_COMPILES))
    tier1 = [r for r in run.rows if r.tier == "tier-1"]
    assert tier1
    fig = shadow_audit_figures(run, 1.0)
    hits = sum(1 for r in tier1 if r.score == 0)  # table hits are audited at 1%, everything else at rate 1
    assert len(tier1) - hits <= fig["n"] + fig.get("errors", 0) + getattr(run.audit, "skipped", 0) <= len(tier1)
    wrong = sum(1 for r in tier1 if r.answer != r.reference_answer)
    assert fig["disagreements"] == wrong  # the oracle reference is deterministic
    assert run.audit_cost_usd_micros == pytest.approx(fig["n"] * 1.0)
    assert sum(r.audit_cost_usd_micros for r in run.rows) == pytest.approx(run.audit_cost_usd_micros)
    if fig["n"]:
        assert fig["silent_wrong_ci95_high"] == pytest.approx(clopper_pearson(fig["disagreements"], fig["n"])[1])


def test_stream_rejects_bad_settings(tmp_path):
    from auto.errors import ArgumentError
    from auto.gate import Contract
    from bench.stream import run_stream

    with pytest.raises(ArgumentError, match="audit_rate"):
        run_stream(task="triage", items=[], labels=[], reference=_oracle_reference, store_path=tmp_path / "s.sqlite",
                   contract=Contract.default_for("triage"), audit_rate=1.5)
    with pytest.raises(ArgumentError, match="shift alpha"):
        run_stream(task="triage", items=[], labels=[], reference=_oracle_reference, store_path=tmp_path / "t.sqlite",
                   contract=Contract.default_for("triage"), shift_alpha=1.0)
    with pytest.raises(ArgumentError, match="worker"):
        run_stream(task="triage", items=[], labels=[], reference=_oracle_reference, store_path=tmp_path / "u.sqlite",
                   contract=Contract.default_for("triage"), worker="fork")


# ----------------------------------------------------------------------------- end to end (small)


ROW_KEYS = ("family", "guard", "split", "n", "tier1", "false_proceed", "false_proceed_ci95_high", "false_abstain",
            "false_abstain_ci95_high", "tier1_share", "admitted", "notes")


@pytest.mark.slow
def test_bench_guards_cli_writes_consistent_rows(tmp_path):
    from click.testing import CliRunner

    from auto.cli import main

    out = tmp_path / "g"
    res = CliRunner().invoke(main, ["bench", "guards", "--out", str(out), "--items", "40", "--heldout", "60",
                                    "--guard", "lexical", "--guard", "combined"])
    assert res.exit_code == 0, res.output[-3000:]
    data = json.loads((out / "guards.json").read_text())
    assert data["published_reference"]["stream_silent_wrong"]["rate"] == 0.489
    rows = data["rows"]
    assert {(r["guard"], r["split"]) for r in rows} == {(g, s) for g in ("lexical", "combined")
                                                       for s in ("heldout", "ood", "stream")}
    for r in rows:
        for k in ROW_KEYS:
            assert k in r, k
        if r["n"] == 0:  # a variant that could not run here (no embedding package): stated, not faked
            assert r["guard"] != "lexical" and r["notes"].startswith("left out")
            continue
        if r["tier1"]:
            assert r["false_proceed"] == r["tier1_wrong"] / r["tier1"]
            assert r["false_proceed"] <= r["false_proceed_ci95_high"] <= 1.0
        if r["would_be_correct"]:
            assert r["false_abstain"] == r["false_abstain_count"] / r["would_be_correct"]
        assert r["tier1_share"] == r["tier1"] / r["n"]
        assert (r["admitted"] is not None) == (r["split"] == "ood")
    n_probes = len(generate_probes(0))
    assert all(r["n"] == n_probes for r in rows if r["split"] == "ood" and r["n"])
    assert all(r["n"] == 60 for r in rows if r["split"] == "heldout" and r["n"])
    assert any(r["n"] for r in rows if r["guard"] == "lexical")
    # per-kind rows add up to the overall OOD row
    for g in ("lexical", "combined"):
        kinds = [r for r in data["ood_by_kind"] if r["guard"] == g]
        if not kinds:
            assert g != "lexical"
            continue
        overall = next(r for r in rows if r["guard"] == g and r["split"] == "ood")
        assert sum(r["n"] for r in kinds) == overall["n"] and sum(r["tier1"] for r in kinds) == overall["tier1"]
    # the combined guard admits a subset of what the lexical stack admits
    lex = next(r for r in rows if r["guard"] == "lexical" and r["split"] == "ood")
    comb = next(r for r in rows if r["guard"] == "combined" and r["split"] == "ood")
    assert comb["tier1"] <= lex["tier1"]
    assert "published reference" in res.output and "lexical" in res.output


@pytest.mark.slow
def test_bench_run_reports_guard_alarms_and_audit(tmp_path):
    from bench.run import run_family

    res = run_family("triage", out_dir=tmp_path / "r", items=40, warm_start=True, audit_rate=1.0)
    saved = json.loads((tmp_path / "r" / "results.json").read_text())
    for k in ("guard", "shift_alarms", "shadow_audit", "silent_wrong", "silent_wrong_ci95_high", "audit_cost_usd_micros"):
        assert k in saved, k
    assert isinstance(saved["shift_alarms"], list)
    assert saved["guard"]["generation"] >= 1 and "calibration_scores" not in json.dumps(saved["guard"])
    audit = saved["shadow_audit"]
    assert audit["rate"] == 1.0
    assert res["tier1"] > 0 and 0 < audit["n"] <= res["tier1"]  # every tier-1 answer was selected
    assert 0 <= audit["disagreements"] <= audit["n"]
    assert audit["silent_wrong_ci95_high"] == pytest.approx(clopper_pearson(audit["disagreements"], audit["n"])[1])
    assert saved["audit_cost_usd_micros"] > 0  # the audit's reference calls are counted as spend

def test_cli_bad_audit_rate_and_unknown_guard_are_usage_errors(tmp_path):
    from click.testing import CliRunner

    from auto.cli import main

    res = CliRunner().invoke(main, ["bench", "run", "triage", "--out", str(tmp_path / "x"), "--audit-rate", "2"])
    assert res.exit_code == 2 and "audit-rate" in res.output
    res = CliRunner().invoke(main, ["bench", "guards", "--out", str(tmp_path / "y"), "--guard", "psychic"])
    assert res.exit_code == 2
    from auto.errors import ArgumentError
    from bench.guard_eval import run_guards

    with pytest.raises(ArgumentError, match="family"):
        run_guards(out_dir=tmp_path / "z", family="routing")
    with pytest.raises(ArgumentError, match="variant"):
        run_guards(out_dir=tmp_path / "z", variants=("lexical", "psychic"))


def test_the_guard_figures_and_novelty_alpha_read_the_typed_manifest():
    from auto_runtime.manifest import Manifest

    from bench.guard_eval import _novelty_alpha, _variant_note
    from bench.run import guard_figures

    novelty = {"method": "conformal-novelty", "alpha": 0.05, "n": 3, "calibration_scores": [0.1, 0.2, 0.3]}
    risk = {"method": "selective-risk", "epsilon": 0.05, "delta": 0.1, "threshold": 0.4}
    stack = {"task": "t", "generation": 2, "compiled_as": "memo-first",
             "guard": {"method": "stack", "components": [risk, {**novelty, "alpha": 0.1}]}}
    assert guard_figures(stack) == {"generation": 2, "compiled_as": "memo-first", "method": "stack",
                                    "components": [risk, {"method": "conformal-novelty", "alpha": 0.1, "n": 3}]}
    assert guard_figures(None) is None and guard_figures({"generation": 1}) == {"generation": 1, "compiled_as": None}
    assert _novelty_alpha(Manifest.of(stack).guard, 0.2) == 0.1
    assert _novelty_alpha(Manifest.of({"guard": novelty}).guard, 0.2) == 0.05
    assert _novelty_alpha(Manifest.of({"guard": risk}).guard, 0.2) == 0.2
    assert _variant_note("lexical", Manifest.of(stack)) == (
        "compiled guard as is (selective-risk, conformal-novelty; artifact compiled as memo-first)")
