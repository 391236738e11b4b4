"""bench.fast: a fast reference, no waiting for compiles; repeats answered by the overlay at once."""

from __future__ import annotations

import json

import pytest

from bench.fast import fast_stream, main


def test_a_fast_stream_answers_repeats_at_tier1_before_it_ends(tmp_path):
    res = fast_stream(items=60, latency_ms=1.0, kind="repetitive", out_dir=tmp_path)
    assert res["items"] == 60 and res["tier1_by_source"].get("overlay", 0) >= 1
    assert 0 <= res["first_tier1_position"]["overlay"] < 60
    # nothing derived before a generation: the repeats cost no audit, as with an exact dict
    assert res["reference_calls"] <= res["exact_dict_reference_calls"] or res["tier1_by_source"].get("generation")
    assert json.loads((tmp_path / "fast.json").read_text())["items"] == 60


def test_bad_arguments_are_one_line(capsys):
    assert main(["--items", "0"]) == 2
    assert capsys.readouterr().err.strip() == "error: items must be >= 1 and latency_ms >= 0"
    with pytest.raises(ValueError):
        fast_stream(items=1, kind="nope")
