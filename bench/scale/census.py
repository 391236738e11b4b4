"""The census of a large store: SQLite in the database vs DuckDB over its Parquet export, in one run.

Measures, each as its own process (wall time, peak RSS): ``auto census --store S --json``, the
export ``auto store export --format parquet``, and ``auto census --parquet DIR --json``; checks the
two census outputs are equal. Build the store first with ``bench.scale.make_store``.

    python -m bench.scale.census --store /path/big.sqlite --parquet /path/big.parquet
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

from bench.scale._proc import auto_cmd, measured


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", required=True)
    ap.add_argument("--parquet", required=True, help="export folder (written unless --reuse-export)")
    ap.add_argument("--reuse-export", action="store_true")
    a = ap.parse_args(argv)
    tmp = tempfile.mkdtemp()
    res: dict = {"store": a.store, "store_bytes": os.path.getsize(a.store)}
    res["sqlite_census"] = measured(auto_cmd("census", "--store", a.store, "--json"), os.path.join(tmp, "sqlite.json"))
    if not a.reuse_export:
        res["export_parquet"] = measured(auto_cmd("store", "export", "--store", a.store, "--format", "parquet",
                                                  "--out", a.parquet))
    res["parquet_bytes"] = sum(os.path.getsize(os.path.join(a.parquet, f)) for f in os.listdir(a.parquet))
    res["duckdb_census"] = measured(auto_cmd("census", "--parquet", a.parquet, "--json"), os.path.join(tmp, "duck.json"))
    with open(os.path.join(tmp, "sqlite.json")) as f1, open(os.path.join(tmp, "duck.json")) as f2:
        c1, c2 = json.load(f1), json.load(f2)
    res["same_results"] = c1 == c2
    res["spans"] = c1["spans"]
    res["sites"] = len(c1["sites"])
    res["headline"] = c1["headline"]
    res["duckdb_speedup"] = round(res["sqlite_census"]["seconds"] / res["duckdb_census"]["seconds"], 2)
    print(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
