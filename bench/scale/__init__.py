"""Scale benchmarks of the store, the census, the compile, the recorder and the fan-out.

Each module is a script (``python -m bench.scale.<name> --help``) that builds what it measures,
measures side by side in one run, and prints one JSON object: ``census`` (10M-span stores,
SQLite vs DuckDB over Parquet), ``compile_isolation`` (a task's compile in a big store vs alone),
``memo`` (exact-match tables up to 102,400 entries), ``recording`` (per-call overhead beside bare
calls), ``store_bytes`` (bytes per span against the canonical payload), ``postgres``
(concurrent recorders), ``fanout`` (``compile --all`` on 1 vs 2 Ray workers). The numbers they
printed on the reference machine are in ``bench/scale/README.md``.
"""
