"""``cost.png``: the headline cost ratio in the title and a legend entry for each marker kind
(generation installed, compile refused, the input shift with its position)."""

from __future__ import annotations

from bench.report import plot_stream, stream_figures
from bench.stream import StreamRow


def _rows(n: int) -> list[StreamRow]:
    out = []
    for i in range(n):
        tier1 = i >= 10
        out.append(StreamRow(position=i, tier="tier-1" if tier1 else "tier-0", reason="", score=None, p_value=None,
                             latency_us=5.0, cost_usd_micros=0.0 if tier1 else 30.0, generation=1 if tier1 else None,
                             answer="a", reference_answer="a", reference_answer_2="a", control_cost_usd_micros=30.0,
                             reference_latency_ms=100.0, audit_cost_usd_micros=3.0 if i % 20 == 0 else 0.0))
    return out


def test_cost_png_carries_the_headline_ratio_and_a_shift_legend(tmp_path):
    rows = _rows(60)
    compiles = [{"position": 10, "verdict": "pass"}, {"position": 40, "verdict": "refuse"}]
    out = plot_stream(rows, compiles, tmp_path / "cost.png", title="t", shifts=[30])
    assert (tmp_path / "cost.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    want = stream_figures(rows)["cost_ratio"]
    assert out["headline"] == want and want > 1  # control 60 × 30 µ$ over 10 × 30 µ$ and the audits
    assert out["legend"][-3:] == ["generation installed", "compile refused", "input shift at item 30"]
    # no shift, no refusal: no legend entry for them
    quiet = plot_stream(rows, compiles[:1], tmp_path / "quiet.png", title="t")
    assert not any("shift" in x or "refused" in x for x in quiet["legend"])
    assert plot_stream([], [], tmp_path / "empty.png", title="t")["headline"] is None
