"""`auto bench` as a plugin of the product CLI: registered through the entry-point group, the
options of each command, and the product's exit codes for the bench's errors."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import entry_points

AUTO = [sys.executable, "-m", "auto.cli"]


def _auto(*args: str, code: int = 0) -> subprocess.CompletedProcess:
    p = subprocess.run([*AUTO, *args], capture_output=True, text=True, timeout=300)
    assert p.returncode == code, (p.returncode, p.stdout[-2000:], p.stderr[-2000:])
    return p


def test_bench_is_registered_in_the_auto_commands_group():
    from auto.cli import PLUGIN_GROUP

    eps = {ep.name: ep for ep in entry_points(group=PLUGIN_GROUP)}
    assert eps["bench"].value == "bench.cli:bench"
    assert eps["bench"].dist is not None and eps["bench"].dist.name == "auto-bench"
    p = _auto("--help")
    assert "bench" in p.stdout and "warning" not in p.stderr


def test_bench_commands_keep_their_options():
    run = _auto("bench", "run", "--help").stdout
    for opt in ("--out", "--stream", "--items", "--seed", "--warm-start", "--replay", "--inputs", "--eval-inputs",
                "--audit-rate"):
        assert opt in run, opt
    for fam in ("triage", "extraction", "routing", "kernel-tuning"):
        assert fam in run
    guards = _auto("bench", "guards", "--help").stdout
    for opt in ("--family", "--out", "--seed", "--items", "--heldout", "--warm-start", "--audit-rate", "--guard"):
        assert opt in guards, opt


def test_bench_errors_get_the_product_exit_codes(tmp_path):
    p = _auto("bench", "run", "routing", "--warm-start", code=2)  # UsageError raised by the bench command
    assert p.stderr.strip().splitlines()[-1].startswith("usage error: --stream and --warm-start apply to triage")
    inputs = tmp_path / "three.jsonl"
    inputs.write_text("".join(json.dumps({"request": r}) + "\n" for r in (
        "IT needs $45 for cables", "Buy $30,000 of servers from a blocked vendor", "Marketing wants $900 for a booth")))
    p = _auto("bench", "run", "routing", "--inputs", str(inputs), "--out", str(tmp_path / "out"), code=3)
    assert json.loads(p.stdout)["compiled_as"] == "refused"  # the results are still written and printed
    assert "refused: program rung not attempted" in p.stderr and "Traceback" not in p.stderr
