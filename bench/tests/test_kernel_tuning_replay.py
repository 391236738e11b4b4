"""F7 on a CPU machine: replay the H200 recordings → census, compile (exact-match specialist), parity."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.kernel_tuning import record as R
from bench.kernel_tuning import specialist as S

TRACES = Path(__file__).resolve().parents[2] / "traces" / "kernel-tuning"


@pytest.fixture(scope="module")
def replay(tmp_path_factory):
    from bench.kernel_tuning.replay import run_replay

    out = tmp_path_factory.mktemp("kt")
    return out, run_replay(TRACES, out)


def test_replay_headline_numbers(replay):
    out, r = replay
    assert r["workloads_seen"] == 176 and r["workloads_holdout"] == 61
    c = r["census"]
    assert c["exact"] + c["tolerant"] + c["divergent"] == c["n"] == 176
    assert r["self_parity"] == pytest.approx((c["exact"] + c["tolerant"]) / 176)
    assert r["deopt_rate_novel"] == 1.0          # every never-seen shape goes back to the full agent
    assert r["false_deopt_seen"] == 0.0          # every seen shape is answered by the specialist
    assert 0.0 < r["parity_seen"] <= min(r["parity_seen_pass1"], r["parity_seen_pass2"]) <= 1.0
    assert r["artifact"]["compiled_as"] == "memo" and (out / "kernel-tuning.wasm").exists()
    assert r["tuning_time_saved_s_median"] > 0
    assert json.loads((out / "results.json").read_text())["parity_seen"] == r["parity_seen"]


def test_specialist_answers_are_the_resolved_choices(replay):
    from auto_runtime import Artifact

    out, _ = replay
    art = Artifact.load(out / "kernel-tuning.wasm")
    p1, p2, info = S.generation_passes(str(TRACES), 2)  # the row ops re-recorded with torch.compile's kernel
    assert info["generation"] == 2 and info["replaced"] == 64
    entries = S.table_entries([p1, p2])
    outs = art.call_batch([e[0] for e in entries])
    assert [o["answer"] for o in outs] == [e[1] for e in entries]
    # parity recomputed independently from the recorded medians
    i1 = S.by_key(p1)
    ok = sum(S.at_parity(i1[e[2][0]["attributes"]["kt.workload_key"]], e[1]["id"]) for e in entries)
    assert ok / len(entries) == pytest.approx(replay[1]["parity_seen_pass1"])
    # a changed environment hash (another GPU or driver) misses: the guard deopts
    inp = dict(entries[0][0], env="sha256:" + "1" * 64)
    assert art.call(inp)["nonconformity"] == 1.0


def test_resolution_prefers_the_smaller_worst_regret():
    def rec(chosen, meds):
        return {"status": "ok", "output": {"chosen_id": chosen, "family": "f", "config": {}},
                "attributes": {"kt.workload_key": "k", "kt.candidates": [{"id": i, "median_us": t, "error": None} for i, t in meds.items()]}}

    a = rec("x", {"x": 10.0, "y": 10.2, "vendor": 12.0})
    b = rec("y", {"x": 11.0, "y": 10.0, "vendor": 12.0})
    # x: worst regret 1.10 (pass b); y: worst regret 1.02 (pass a) → y
    assert S.resolve([a, b])["id"] == "y"
    assert S.at_parity(a, "y") and not S.at_parity(b, "x")


def test_cli_without_gpu_asks_for_replay(tmp_path):
    p = subprocess.run([sys.executable, "-m", "auto.cli", "bench", "run", "kernel-tuning", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "--replay" in p.stderr
