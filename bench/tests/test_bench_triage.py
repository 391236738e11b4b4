"""The main job end to end (`auto bench run triage`), small, plus a user's own stream."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ANCHOR = Path(__file__).resolve().parents[3] / "shared" / "anchor-bench" / "triage-tickets.jsonl"
KEYS = ("family", "reference_model", "items", "tier1_share", "deopts", "recompiles", "parity", "silent_wrong",
        "silent_wrong_ci95_high", "cost_usd_micros", "control_cost_usd_micros", "cost_ratio", "tier1_latency_us_p50",
        "reference_latency_ms_p50", "reference_self_agreement")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_BASE_URL", "OPENAI_API_KEY")}
    return env


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "auto.cli", "bench", "run", "triage", *args], capture_output=True,
                          text=True, timeout=600, env=_env())


def _check_outputs(out: Path, items: int) -> dict:
    res = json.loads((out / "results.json").read_text())
    for k in KEYS:
        assert k in res, k
    assert res["reference_model"].startswith("simulated:")
    assert res["items"] == items
    rows = list(csv.DictReader((out / "ratchet.csv").open()))
    assert len(rows) == items
    assert {r["tier"] for r in rows} <= {"tier-0", "tier-1"}
    assert rows[0]["tier"] == "tier-0" and rows[0]["reason"] == "no-artifact"  # starts with no artifact
    # cost accounting: tier-1 answers cost nothing; the totals are the sums of the rows
    assert all(float(r["cost_usd_micros"]) == 0.0 for r in rows if r["tier"] == "tier-1")
    assert abs(sum(float(r["cost_usd_micros"]) for r in rows) - res["cost_usd_micros"]) < 1e-3
    assert abs(sum(float(r["control_cost_usd_micros"]) for r in rows) - res["control_cost_usd_micros"]) < 1e-3
    assert res["control_cost_usd_micros"] > 0 and res["cost_usd_micros"] <= res["control_cost_usd_micros"] + 1e-9
    assert res["deopts"] + sum(1 for r in rows if r["tier"] == "tier-1") == items
    t1 = [r for r in rows if r["tier"] == "tier-1"]
    wrong = sum(1 for r in t1 if r["answer"] != r["reference_answer"])
    assert res["silent_wrong"] == (wrong / len(t1) if t1 else None)
    assert 0.0 <= res["reference_self_agreement"] <= 1.0 and 0.0 <= res["parity"] <= 1.0
    png = (out / "cost.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 5000
    return res


def test_bench_run_generated_stream(tmp_path):
    out = tmp_path / "run"
    p = _run("--out", str(out), "--items", "300")
    assert p.returncode == 0, p.stderr[-3000:]
    res = _check_outputs(out, 300)
    assert res["offline"]["census"]["headline"] > 0.8
    assert res["offline"]["compile"]["verdict"] == "pass"
    assert res["shift_at"] == 150 and "after_shift" in res
    peers = res["peers"]  # the exact dict replayed on the same items: it pays once per distinct input
    assert peers["items"] == 300 and peers["exact_dict"]["served_without_paid_call"] == 300 - peers["distinct_inputs"]
    assert peers["memo_ceiling"] == pytest.approx(300 / peers["distinct_inputs"])
    assert "summary" not in p.stdout and json.loads(p.stdout)["family"] == "triage"
    assert "reference model: simulated" in p.stderr
    # the long phases say how far they are (plain lines: stderr is not a terminal here)
    import re

    done = re.findall(r"\[offline\] recorded: (\d+) of (\d+)", p.stderr)
    assert done and done[-1][0] == done[-1][1] and int(done[-1][1]) > 0  # the last line: all recorded
    assert "[latency] rows measured: 6 of 6" in p.stderr and "[latency] ratchet steps done: 3 of 3" in p.stderr
    assert "[stream] items: 300 of 300" in p.stderr
    lb = res["latency_benchmark"]
    assert lb["tier1_single"]["p50"] > 0 and lb["bare_wasmtime_call"]["p50"] > 0
    rl = lb["ratchet"]  # idle and during-compile tails over windows of as many calls
    assert rl["idle"]["n"] >= rl["during_compile"]["n"] > 1 and rl["during_compile"]["compile_s"] > 0
    assert rl["p99_ratio"] == pytest.approx(rl["during_compile"]["p99"] / rl["idle"]["p99"], rel=1e-2)


@pytest.mark.skipif(not ANCHOR.exists(), reason="shared anchor-bench inputs not present")
def test_bench_run_on_published_anchor_tickets(tmp_path):
    out = tmp_path / "anchor"
    p = _run("--out", str(out), "--stream", str(ANCHOR))
    assert p.returncode == 0, p.stderr[-3000:]
    res = _check_outputs(out, 60)
    assert res["stream_source"] == ANCHOR.name


def test_bad_stream_file_is_a_usage_error(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"ticket": "ok"}\n{"nope": 1}\n')
    p = _run("--out", str(tmp_path / "o"), "--stream", str(bad))
    assert p.returncode == 2 and "bad.jsonl:2" in p.stderr
