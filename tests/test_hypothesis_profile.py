"""With ``CI`` set the property tests are derandomized and keep no example database, so a CI run
on a clean checkout draws the same examples every time (tests/conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PROBE = '''
from hypothesis import given, settings, strategies as st

@settings(max_examples=8)
@given(st.text(max_size=30))
def test_probe(s):
    print("EX", repr(s))
'''


def _examples(tmp: Path, env: dict) -> list[str]:
    test = Path(__file__).parent / f"test_zz_probe_{os.getpid()}.py"
    test.write_text(PROBE)
    try:
        p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", str(test)],
                           capture_output=True, text=True, timeout=120, env=env, cwd=tmp)
    finally:
        test.unlink()
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    return [ln for ln in p.stdout.splitlines() if ln.startswith("EX ") or ln.startswith(".EX ")]


def test_ci_profile_is_derandomized_without_a_database(tmp_path):
    env = {**os.environ, "CI": "1"}
    first, second = _examples(tmp_path, env), _examples(tmp_path, env)
    assert len(first) >= 8 and first == second
    assert not (tmp_path / ".hypothesis" / "examples").exists()  # no example database written


def test_ci_run_sets_ci():
    text = (Path(__file__).resolve().parents[1] / ".ci" / "run").read_text()
    assert "export CI=1" in text and text.index("export CI=1") < text.index("make test")
