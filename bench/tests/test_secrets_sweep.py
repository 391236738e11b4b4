"""The secrets sweep: every claimed format planted in every surface, 0 survivors in every byte
Auto writes."""

from __future__ import annotations

import pytest

from bench.secrets_sweep import run


@pytest.mark.slow
def test_no_planted_secret_survives_anywhere(tmp_path):
    report = run(tmp_path / "sweep")
    assert report["spans_written"] > 0 and report["stores"] == 5
    assert report["survivors"] == 0, report["survivor_places"][:10]
