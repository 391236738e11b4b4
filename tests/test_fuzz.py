"""The short fuzz run: every target of ``fuzz/`` under atheris for a fixed number of executions
with a fixed seed (repeatable), and each target's checks on its seed corpus in-process. A crash
fails the test with the saved input's traceback. The long run is ``python -m fuzz.run --seconds N``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fuzz.targets import TARGETS, Finding

ROOT = Path(__file__).resolve().parents[1]
RUNS = 300


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_every_seed_passes_its_target(name):
    t = TARGETS[name]
    allowed = t.allowed()
    seeds = t.seeds()
    assert seeds
    for s in seeds:
        try:
            t.one_input(s)
        except allowed:
            pass


def test_the_checks_catch_a_planted_bug(monkeypatch):
    import auto.record.completion as completion

    seed = TARGETS["sse"].seeds()[0]
    TARGETS["sse"].one_input(seed)
    monkeypatch.setattr(completion, "stream_outcome", lambda events: ({"content": float("nan")}, {}, None))
    with pytest.raises(Finding, match="cannot be stored"):
        TARGETS["sse"].one_input(seed)


def test_short_coverage_guided_run(tmp_path, capsys):
    pytest.importorskip("atheris")
    p = subprocess.run([sys.executable, "-m", "fuzz.run", "--runs", str(RUNS), "--seed", "1", "--out", str(tmp_path)],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    report = json.loads(p.stdout)
    with capsys.disabled():  # the counts, in the CI log whatever the outcome
        print("\nfuzz (atheris, seed 1): " + "; ".join(
            f"{r['target']} {r['executions']} executions, {r['crashes']} crashes" for r in report))
    assert [r["target"] for r in report] == list(TARGETS)
    for r in report:
        crashes = sorted((tmp_path / "crashes" / r["target"]).glob("*.txt"))
        detail = "\n".join(c.read_text()[:2000] for c in crashes) or r["stderr_tail"]
        assert r["rc"] == 0 and r["crashes"] == 0, f"{r['target']}: {r['signatures']}\n{detail}"
        assert r["executions"] >= RUNS
    assert p.returncode == 0


HYPOTHESIS_EXAMPLES = 30


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_bounded_derandomized_run_of_every_target(name, capsys):
    # without atheris too: each target on a fixed sequence of generated inputs (derandomized, no
    # example database: the same inputs on every run), its seeds mutated by hypothesis
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    t = TARGETS[name]
    allowed = t.allowed()
    seeds = t.seeds()
    count = {"n": 0}

    @settings(max_examples=HYPOTHESIS_EXAMPLES, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(st.one_of(st.binary(max_size=512),
                     st.tuples(st.sampled_from(seeds), st.integers(0, 4096), st.binary(max_size=16)).map(
                         lambda s: s[0][:s[1] % (len(s[0]) + 1)] + s[2] + s[0][s[1] % (len(s[0]) + 1):])))
    def run(data):
        count["n"] += 1
        try:
            t.one_input(data)
        except allowed:
            pass

    run()
    with capsys.disabled():
        print(f"\nfuzz (hypothesis, derandomized): {name} {count['n']} executions, 0 crashes")
    assert count["n"] >= HYPOTHESIS_EXAMPLES
