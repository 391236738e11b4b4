"""``auto bench run inbox``: the region family end to end on a small corpus (relaxed contract)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from auto.cli import main
from auto.gate import Contract
from bench.region_family import render_region_summary, run_region_family

RELAXED = dict(min_witnesses=20, program_min_agreement=0.8, program_min_agreement_ci95_low=0.6)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = tmp_path_factory.mktemp("inbox")
    return out, run_region_family("inbox", out_dir=out, contract=Contract(task="inbox", **RELAXED), train_limit=800,  # the bench's size: the cross-fitted program rung needs it
                                  heldout_limit=25)


def test_inbox_runs_end_to_end(results):
    out, r = results
    assert json.loads((out / "results.json").read_text()) == r
    assert r["compiled_as"] == "region" and r["reference_model"].startswith("simulated")
    steps = r["census"]["steps"]
    assert set(steps) == {"classify", "lookup", "priority", "summary"}
    assert steps["summary"]["share"] < 0.5 < steps["classify"]["share"]  # the summary is generative
    sites = {s["step"] for s in r["census"]["sites"]}
    assert {"classify", "priority", "summary", "lookup", "task"} <= sites
    h = r["heldout"]
    assert h["n"] == 25 and h["tier1"] >= 15 and h["effectful_calls_on_deopted_inputs"] == 0
    assert h["cost_usd_micros_per_run"]["served"] < h["cost_usd_micros_per_run"]["reference"]
    assert h["steps"]["summary"]["generative"] and not h["steps"]["classify"]["generative"]
    assert r["published"]["cost_usd_micros_per_run"] == 188.0
    rows = r["hostile_cases"]
    assert len(rows) == 11 and all(row["contained"] for row in rows)  # both budgets: a run makes two tool calls
    text = render_region_summary(r)
    assert "census per step" in text and "hostile:" in text and "commit(" in text


def test_region_families_reject_stream_options(tmp_path):
    res = CliRunner().invoke(main, ["bench", "run", "inbox", "--stream", __file__, "--out", str(tmp_path)])
    assert res.exit_code == 2 and "--stream and --warm-start apply to triage" in res.output
