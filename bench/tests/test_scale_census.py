"""bench.scale.make_store and bench.scale.census at a small size: the generated store is a sound
Auto store with the documented mix, and the census over SQLite equals the DuckDB census over its
Parquet export."""

from __future__ import annotations

import json

import pytest

from bench.scale import census as scale_census
from bench.scale.make_store import generate


def test_generated_store_and_both_censuses(tmp_path, capsys):
    pytest.importorskip("duckdb")
    from auto.store import Store

    out = tmp_path / "s.sqlite"
    res = generate(str(out), 3000, tasks=4, distinct=40, noise=0.05, retry_rate=0.05, batch=700, seed=3,
                   progress=False)
    assert res["spans"] >= 3000 and res["traces"] == res["calls"]
    with Store(out) as st:
        assert st.verify().ok
        assert set(st.tasks()) == {f"task{t:03d}" for t in range(4)}
        retried = st._read("SELECT count(*) AS n FROM spans WHERE attempt > 0")[0]["n"]
        assert 0 < retried < res["calls"]  # some calls were retried once
    assert scale_census.main(["--store", str(out), "--parquet", str(tmp_path / "pq")]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["same_results"] is True and got["sites"] == 8  # a task site and a model-call site per task
    assert got["sqlite_census"]["rc"] == 0 and got["duckdb_census"]["rc"] == 0 and got["export_parquet"]["rc"] == 0
