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


def test_short_coverage_guided_run(tmp_path):
    pytest.importorskip("atheris")
    p = subprocess.run([sys.executable, "-m", "fuzz.run", "--runs", str(RUNS), "--seed", "1", "--out", str(tmp_path)],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    report = json.loads(p.stdout)
    assert [r["target"] for r in report] == list(TARGETS)
    for r in report:
        crashes = sorted((tmp_path / "crashes" / r["target"]).glob("*.txt"))
        detail = "\n".join(c.read_text()[:2000] for c in crashes) or r["stderr_tail"]
        assert r["rc"] == 0 and r["crashes"] == 0, f"{r['target']}: {r['signatures']}\n{detail}"
        assert r["executions"] >= RUNS
    assert p.returncode == 0
