"""A few seconds of the soak (``python -m fuzz.soak`` runs it for ten minutes): recorders killed
with kill -9 lose exactly the spans that were open, and the store still verifies."""

from __future__ import annotations

from fuzz.soak import run_soak


def test_kill_9_loses_only_open_spans(tmp_path):
    report = run_soak(minutes=0.15, workers=3, out=tmp_path, seed=1)
    assert report["kills"] >= 3 and report["spans_written"] > 0
    assert report["store_verified"] and report["stored_never_opened"] == 0
    assert report["acknowledged_but_missing"] == 0 and report["lost_not_open"] == 0
    assert report["spans_lost"] == report["spans_open_at_kills"] - report["committed_unlogged"]
    assert report["ok"], {k: v for k, v in report.items() if k != "per_kill"}
