"""Interchange: a store's spans in formats other tools read, and other tools' spans in a store.

* :mod:`auto.interchange.parquet` — ``auto store export --format parquet``: a documented, stable
  Parquet layout (pyarrow), and a census over it with DuckDB for very large stores;
* :mod:`auto.interchange.otlp` — ``auto store import --otlp`` / ``export --otlp``: OpenTelemetry
  spans in the OTLP/JSON encoding with ``gen_ai.*`` attributes, so traces recorded by other
  instrumentation become witnesses;
* :mod:`auto.interchange.genai` — reading spans of the GenAI semantic conventions and
  OpenInference; :mod:`auto.interchange.receiver` — ``auto receive``, OTLP/HTTP;
* :mod:`auto.interchange.autov0` — ``auto store import --format auto-v0``: the reference
  system's SDK trace files (JSON Lines, trace format v0).

Both need the optional extra ``auto[interchange]`` (pyarrow, DuckDB) only for Parquet; OTLP/JSON
is plain JSON.
"""
