"""A store as Parquet files (pyarrow), and the census over them with DuckDB.

Layout ``auto.parquet/1`` — a folder of three files, each with the key-value metadata
``auto.format = "auto.parquet/1"``; this layout is stable (a change gets a new name):

``spans.parquet``, one row per span, in insertion order:

=================  ========  ====================================================================
column             type      meaning
=================  ========  ====================================================================
seq                int64     insertion order in the exported store
span_id            string    16 hex digits
trace_id           string    32 hex digits
parent_span_id     string    16 hex digits, or null
name, kind         string    span name; ``task`` / ``llm`` / ``tool``
task, site         string    the enclosing task; the model call's site (null for task spans)
started_ns         int64     ns since the Unix epoch
ended_ns           int64     ns since the Unix epoch
status             string    ``ok`` / ``error``
input_digest       string    ``sha256:<hex>`` of the canonical JSON of ``input`` (null = JSON null);
output_digest      string    likewise ``output``, ``error``, ``attributes`` — the texts are in
error_digest       string    ``payloads.parquet``
attributes_digest  string
logical_call_id    string    ``auto.logical_call_id`` (SDK retries of one model call), or null
attempt            int64     ``auto.attempt`` (0 when absent)
digest             string    the span digest (over its content fields, as the store computes it)
=================  ========  ====================================================================

``payloads.parquet``: ``digest`` (string, ``sha256:<hex>``), ``json`` (string, canonical JSON) —
each distinct value once. ``traces.parquet``: ``trace_id``, ``name``, ``started_ns``,
``ended_ns``, ``status``, ``attributes`` (canonical JSON), ``digest``.

:func:`export_parquet` streams the store (memory bounded by one row group);
:func:`census_parquet` runs the store's census SQL (:func:`auto.store.store.census_sql`) on
DuckDB over ``spans.parquet`` and folds it like the store's (:func:`auto.analyze.census_from_rows`),
so the results are the same. Needs ``pip install 'auto[interchange]'``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable, Iterator

from auto.errors import StoreError

FORMAT = "auto.parquet/1"
"""The layout's name (file metadata ``auto.format``)."""

ROW_GROUP = 100_000
"""Rows per Parquet row group written."""

SPAN_COLUMNS = (
    ("seq", "int64"), ("span_id", "string"), ("trace_id", "string"), ("parent_span_id", "string"),
    ("name", "string"), ("kind", "string"), ("task", "string"), ("site", "string"), ("started_ns", "int64"),
    ("ended_ns", "int64"), ("status", "string"), ("input_digest", "string"), ("output_digest", "string"),
    ("error_digest", "string"), ("attributes_digest", "string"), ("logical_call_id", "string"),
    ("attempt", "int64"), ("digest", "string"),
)
"""``spans.parquet``'s columns and Arrow types, in order."""

PAYLOAD_COLUMNS = (("digest", "string"), ("json", "string"))
TRACE_COLUMNS = (("trace_id", "string"), ("name", "string"), ("started_ns", "int64"), ("ended_ns", "int64"),
                 ("status", "string"), ("attributes", "string"), ("digest", "string"))
FILES = {"spans.parquet": SPAN_COLUMNS, "payloads.parquet": PAYLOAD_COLUMNS, "traces.parquet": TRACE_COLUMNS}


class InterchangeError(StoreError):
    """A Parquet or OTLP file is unreadable, truncated, or not in the expected schema."""


def _pa() -> tuple[Any, Any]:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise StoreError("Parquet needs pyarrow: pip install 'auto[interchange]'") from None
    return pa, pq


def _schema(pa: Any, cols: tuple[tuple[str, str], ...]) -> Any:
    types = {"string": pa.string(), "int64": pa.int64()}
    return pa.schema([(n, types[t]) for n, t in cols], metadata={"auto.format": FORMAT})


def export_parquet(store: Any, out_dir: str | os.PathLike, progress: Callable[[str], None] | None = None) -> dict:
    """Write ``store`` as the ``auto.parquet/1`` layout into ``out_dir`` (created; existing
    files of the layout are replaced atomically, each written to a temporary name first).

    Returns:
        ``{"spans", "payloads", "traces", "bytes", "dir"}``.

    Raises:
        StoreError: pyarrow is missing, or the store failed.
        OSError: the folder cannot be written.
    """
    pa, pq = _pa()
    say = progress or (lambda _m: None)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    counts = {"spans": 0, "payloads": 0, "traces": 0}

    def write(name: str, cols: tuple[tuple[str, str], ...], batches: Iterator[dict[str, list]]) -> int:
        tmp = out / (name + ".tmp")
        n = 0
        schema = _schema(pa, cols)
        with pq.ParquetWriter(tmp, schema, compression="zstd") as w:
            for b in batches:
                w.write_table(pa.Table.from_pydict(b, schema=schema), row_group_size=ROW_GROUP)
                n += len(next(iter(b.values())))
        tmp.replace(out / name)
        return n

    def span_batches() -> Iterator[dict[str, list]]:
        for rows in store.iter_export_rows(batch=ROW_GROUP):
            cols = list(zip(*rows))
            say(f"  spans: {rows[-1][0]} (seq)")
            yield {n: list(c) for (n, _), c in zip(SPAN_COLUMNS, cols)}

    def payload_batches() -> Iterator[dict[str, list]]:
        for batch in store.iter_payloads(batch=ROW_GROUP):
            yield {"digest": [b[1] for b in batch], "json": [b[2] for b in batch]}

    def trace_batches() -> Iterator[dict[str, list]]:
        traces = store.traces()
        for k in range(0, len(traces), ROW_GROUP):
            chunk = traces[k:k + ROW_GROUP]
            yield {"trace_id": [t["trace_id"] for t in chunk], "name": [t["name"] for t in chunk],
                   "started_ns": [t["started_ns"] for t in chunk], "ended_ns": [t["ended_ns"] for t in chunk],
                   "status": [t["status"] for t in chunk],
                   "attributes": [json.dumps(t["attributes"], sort_keys=True, separators=(",", ":"),
                                             ensure_ascii=False) for t in chunk],
                   "digest": [t["digest"] for t in chunk]}

    counts["spans"] = write("spans.parquet", SPAN_COLUMNS, span_batches())
    counts["payloads"] = write("payloads.parquet", PAYLOAD_COLUMNS, payload_batches())
    counts["traces"] = write("traces.parquet", TRACE_COLUMNS, trace_batches())
    size = sum((out / f).stat().st_size for f in FILES)
    return {**counts, "bytes": size, "dir": str(out)}


def check_layout(folder: str | os.PathLike, files: tuple[str, ...] = ("spans.parquet", "payloads.parquet")) -> Path:
    """The folder, after checking each of ``files`` is a Parquet file of the ``auto.parquet/1``
    layout (footer readable, format marker, the layout's columns and types).

    Raises:
        InterchangeError: one line naming the file and what is wrong (missing, truncated, not
            Parquet, another layout, a missing or mistyped column).
    """
    pa, pq = _pa()
    d = Path(folder)
    if not d.is_dir():
        raise InterchangeError(f"{d}: not a folder of the {FORMAT} layout (auto store export --format parquet)")
    for name in files:
        p = d / name
        if not p.exists():
            raise InterchangeError(f"{p}: missing (a {FORMAT} export has {', '.join(FILES)})")
        try:
            schema = pq.read_schema(p)
        except (pa.ArrowInvalid, OSError) as exc:
            raise InterchangeError(f"{p}: not a readable Parquet file (truncated?): {str(exc).splitlines()[0]}") from None
        meta = schema.metadata or {}
        fmt = meta.get(b"auto.format", b"").decode("utf-8", "replace")
        if fmt != FORMAT:
            raise InterchangeError(f"{p}: layout {fmt or 'unknown'!r}, expected {FORMAT!r}")
        types = {"string": pa.string(), "int64": pa.int64()}
        for col, t in FILES[name]:
            i = schema.get_field_index(col)
            if i < 0:
                raise InterchangeError(f"{p}: column {col!r} is missing ({FORMAT})")
            if schema.field(i).type != types[t]:
                raise InterchangeError(f"{p}: column {col!r} is {schema.field(i).type}, expected {t} ({FORMAT})")
    return d


def _duckdb() -> Any:
    try:
        import duckdb
    except ImportError:
        raise StoreError("the Parquet census needs DuckDB: pip install 'auto[interchange]'") from None
    return duckdb


def census_parquet(folder: str | os.PathLike, task: str | None = None, with_inputs: bool = False,
                   threads: int | None = None) -> Any:
    """The census over an ``auto.parquet/1`` export, computed by DuckDB: the same SQL and the
    same folding as the store's (:func:`auto.analyze.census_store`, model calls per model-call
    site included), so the same results.

    Args:
        folder: the export folder.
        task: only that task's spans.
        with_inputs: per-input rows (texts read from ``payloads.parquet``).
        threads: DuckDB threads (default: DuckDB's, one per core).

    Raises:
        InterchangeError: a file is missing, truncated or of another layout (one line naming it),
            or DuckDB cannot read a row group.
    """
    from auto.analyze import MODEL_CALL_KIND, census_from_rows, census_model_calls, join
    from auto.store.store import census_params, census_sql, model_call_census_sql

    d = check_layout(folder)
    duckdb = _duckdb()
    con = duckdb.connect()
    try:
        con.execute("SET enable_progress_bar = false")  # stdout carries the census JSON
        if threads:
            con.execute(f"SET threads = {int(threads)}")
        spans_file = str(d / "spans.parquet").replace("'", "''")
        con.execute("CREATE VIEW spans AS SELECT span_id, name, kind, task, site, started_ns, status, "
                    "input_digest AS input_id, output_digest AS output_id, logical_call_id, attempt "
                    f"FROM read_parquet('{spans_file}')")
        params = census_params(task, MODEL_CALL_KIND)
        where = d / "spans.parquet"

        def rows(sql: str) -> Iterator[tuple]:
            try:
                cur = con.execute(sql, params)
                while True:
                    batch = cur.fetchmany(10_000)
                    if not batch:
                        return
                    yield from batch
            except duckdb.Error as exc:
                raise InterchangeError(f"{where}: {str(exc).splitlines()[0]}") from None

        pfile = str(d / "payloads.parquet").replace("'", "''")
        side = con.cursor()  # the census result streams on the main cursor meanwhile

        def resolve(ids: list[Any]) -> dict[Any, str]:
            out: dict[Any, str] = {}
            for k in range(0, len(ids), 50_000):
                chunk = ids[k:k + 50_000]
                try:
                    got = side.execute(f"SELECT digest, json FROM read_parquet('{pfile}') WHERE digest IN "
                                       f"({','.join('?' * len(chunk))})", chunk).fetchall()
                except duckdb.Error as exc:
                    raise InterchangeError(f"{d / 'payloads.parquet'}: {str(exc).splitlines()[0]}") from None
                out.update(dict(got))
            missing = [i for i in ids if i not in out]
            if missing:
                raise InterchangeError(f"{d / 'payloads.parquet'}: payload {missing[0]} is missing")
            return out

        grouped = census_from_rows(rows(census_sql(task is not None, True)), resolve if with_inputs else None,
                                   with_inputs)
        calls = census_model_calls(rows(model_call_census_sql(task is not None)), resolve, with_inputs)
        return join(grouped, calls)
    finally:
        con.close()


__all__ = ["FORMAT", "InterchangeError", "census_parquet", "check_layout", "export_parquet"]

