"""A store as Parquet files (pyarrow), and the census over them with DuckDB.

Layout ``auto.parquet/3`` — a folder of five files, each with the key-value metadata
``auto.format = "auto.parquet/3"``; this layout is stable (a change gets a new name; an
``auto.parquet/1`` folder, written before the model-call files existed, or an ``auto.parquet/2``
one, written before ``spans.site_id``, is refused with a line that says to export again). The
layout is documented for users in ``docs/parquet.md``:

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
site_id            string    a model call's census site (``site:<16 hex>``, what ``auto census``
                             lists and ``auto compile --site`` takes; for a tier-1 answer the
                             proxy recorded, name ``auto.tier1``, the site it answered), or null
                             (not a model call Auto understands, or not a model call)
=================  ========  ====================================================================

``payloads.parquet``: ``digest`` (string, ``sha256:<hex>``), ``json`` (string, canonical JSON) —
each distinct value once. ``traces.parquet``: ``trace_id``, ``name``, ``started_ns``,
``ended_ns``, ``status``, ``attributes`` (canonical JSON), ``digest``.

``requests.parquet`` — what model-call site discovery reads of a request
(:func:`auto.sites.discover.read_request`), one row per distinct chat-completion request body
(an object with a non-empty ``messages`` list) that is the input of an ``llm`` span:
``digest`` (the payload's), ``shape`` (the shape digest, :func:`auto.record.template.shape_digest`),
``skeleton`` (canonical JSON of the request skeleton), ``leaves_key``
(:func:`auto.sites.discover.leaves_key`) and ``leaves`` (list of struct ``path``, ``role``,
``text``: every text leaf in document order, ``role`` that of its message or null).

``answers.parquet`` — ``digest`` (the payload's), ``answer`` (canonical JSON of
:func:`auto.sites.answer.site_answer`): one row per distinct output of an ``llm`` span.

:func:`export_parquet` streams the store (memory bounded by one row group and the ids of the
model calls' payloads); :func:`census_parquet` runs the census on DuckDB: the store's census SQL
(:func:`auto.store.census_sql.census_site_sql`) over ``spans.parquet``, and model-call sites found in
SQL over ``requests.parquet`` (:mod:`auto.interchange.duckdb_sites`), so the results are the
store's. Needs ``pip install 'auto[interchange]'``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable, Iterator

from auto.errors import StoreError
from auto.store import TIER1_SPAN

FORMAT = "auto.parquet/3"
"""The layout's name (file metadata ``auto.format``)."""

OLD_FORMATS = ("auto.parquet/1", "auto.parquet/2")
"""Earlier layouts: refused with a line that says to export again."""

ROW_GROUP = 100_000
"""Rows per Parquet row group written."""

SPAN_COLUMNS = (
    ("seq", "int64"), ("span_id", "string"), ("trace_id", "string"), ("parent_span_id", "string"),
    ("name", "string"), ("kind", "string"), ("task", "string"), ("site", "string"), ("started_ns", "int64"),
    ("ended_ns", "int64"), ("status", "string"), ("input_digest", "string"), ("output_digest", "string"),
    ("error_digest", "string"), ("attributes_digest", "string"), ("logical_call_id", "string"),
    ("attempt", "int64"), ("digest", "string"), ("site_id", "string"),
)
"""``spans.parquet``'s columns and Arrow types, in order."""

PAYLOAD_COLUMNS = (("digest", "string"), ("json", "string"))
TRACE_COLUMNS = (("trace_id", "string"), ("name", "string"), ("started_ns", "int64"), ("ended_ns", "int64"),
                 ("status", "string"), ("attributes", "string"), ("digest", "string"))
REQUEST_COLUMNS = (("digest", "string"), ("shape", "string"), ("skeleton", "string"), ("leaves_key", "string"),
                   ("leaves", "leaves"))
ANSWER_COLUMNS = (("digest", "string"), ("answer", "string"))
FILES = {"spans.parquet": SPAN_COLUMNS, "payloads.parquet": PAYLOAD_COLUMNS, "traces.parquet": TRACE_COLUMNS,
         "requests.parquet": REQUEST_COLUMNS, "answers.parquet": ANSWER_COLUMNS}
CENSUS_FILES = ("spans.parquet", "payloads.parquet", "requests.parquet", "answers.parquet")
"""The files :func:`census_parquet` reads."""


class InterchangeError(StoreError):
    """A Parquet or OTLP file is unreadable, truncated, or not in the expected schema."""


def _pa() -> tuple[Any, Any]:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise StoreError("Parquet needs pyarrow: pip install 'auto[interchange]'") from None
    return pa, pq


def _types(pa: Any) -> dict[str, Any]:
    leaf = pa.struct([("path", pa.string()), ("role", pa.string()), ("text", pa.string())])
    return {"string": pa.string(), "int64": pa.int64(), "leaves": pa.list_(leaf)}


def _schema(pa: Any, cols: tuple[tuple[str, str], ...]) -> Any:
    types = _types(pa)
    return pa.schema([(n, types[t]) for n, t in cols], metadata={"auto.format": FORMAT})


def request_row(digest: str, text: str) -> dict[str, Any] | None:
    """The ``requests.parquet`` row of a request payload (None: no chat-completion request)."""
    from auto.canonical import canonical_json
    from auto.sites.discover import leaf_role, leaves_key, read_request

    req = read_request(json.loads(text))
    if req is None:
        return None
    return {"digest": digest, "shape": req.shape, "skeleton": canonical_json(req.skeleton),
            "leaves_key": leaves_key(req.leaves),
            "leaves": [{"path": p, "role": _role_text(leaf_role(req.skeleton, p)), "text": t}
                       for p, t in req.leaves.items()]}


def _role_text(role: Any) -> str | None:
    return role if isinstance(role, str) else None


def answer_row(digest: str, text: str) -> dict[str, Any]:
    """The ``answers.parquet`` row of a model call's output payload."""
    from auto.canonical import canonical_json
    from auto.sites import site_answer

    return {"digest": digest, "answer": canonical_json(site_answer(json.loads(text)))}


def census_site_ids(store: Any) -> dict[tuple[str, str, str], str]:
    """``(task or "", span name, input digest) -> census site id`` of every distinct model-call
    request of ``store`` (:class:`auto.sites.discover.SiteFinder` over the distinct requests, as
    the census finds them; memory grows with the distinct requests)."""
    from auto.sites.discover import MODEL_CALL_KIND, MODEL_CALL_SPANS, RESOLVE_CHUNK, SiteFinder, read_request
    from auto_runtime.digest import digest_bytes

    keys = {(r[1] or "", r[2] or "", r[3]) for r in store.model_call_rows(MODEL_CALL_KIND, None)
            if r[2] in MODEL_CALL_SPANS and r[3] is not None}
    ids = sorted({k[2] for k in keys}, key=repr)
    texts: dict[Any, str] = {}
    for k in range(0, len(ids), RESOLVE_CHUNK):
        texts.update(store.payload_texts(ids[k:k + RESOLVE_CHUNK]))
    finder = SiteFinder()
    tokens = {}
    for task, name, pid in sorted(keys, key=repr):
        req = read_request(json.loads(texts[pid]))
        if req is not None:
            tokens[(task, name, digest_bytes(texts[pid].encode("utf-8")))] = finder.add(task or None, name, req)
    finder.finish()
    return {k: sid for k, tok in tokens.items() if (sid := SiteFinder.site_of(tok)) is not None}


class _Writer:
    """One file of the layout, written to a temporary name and moved into place by :meth:`close`."""

    def __init__(self, pa: Any, pq: Any, out: Path, name: str) -> None:
        self.pa, self.path, self.tmp = pa, out / name, out / (name + ".tmp")
        self.schema = _schema(pa, FILES[name])
        self.cols = [c for c, _ in FILES[name]]
        self.rows = 0
        self._w = pq.ParquetWriter(self.tmp, self.schema, compression="zstd")

    def write(self, columns: dict[str, list]) -> None:
        n = len(next(iter(columns.values())))
        if n:
            self._w.write_table(self.pa.Table.from_pydict(columns, schema=self.schema), row_group_size=ROW_GROUP)
            self.rows += n

    def write_rows(self, rows: list[dict]) -> None:
        self.write({c: [r[c] for r in rows] for c in self.cols})

    def close(self) -> None:
        self._w.close()
        self.tmp.replace(self.path)

    def abort(self) -> None:
        self._w.close()
        self.tmp.unlink(missing_ok=True)


def export_parquet(store: Any, out_dir: str | os.PathLike, progress: Callable[[str], None] | None = None) -> dict:
    """Write ``store`` as the ``auto.parquet/2`` layout into ``out_dir`` (created; existing
    files of the layout are replaced atomically, each written to a temporary name first).

    Returns:
        ``{"spans", "payloads", "traces", "requests", "answers", "bytes", "dir"}``.

    Raises:
        StoreError: pyarrow is missing, or the store failed.
        OSError: the folder cannot be written.
    """
    pa, pq = _pa()
    say = progress or (lambda _m: None)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    writers: list[_Writer] = []
    try:
        spans = _Writer(pa, pq, out, "spans.parquet")
        writers.append(spans)
        site_of = census_site_ids(store)
        for rows in store.iter_export_rows(batch=ROW_GROUP):
            cols = list(zip(*rows))
            say(f"  spans: {rows[-1][0]} (seq)")
            cols.append([r[7] if r[4] == TIER1_SPAN else site_of.get((r[6] or "", r[4] or "", r[11]))
                         for r in rows])  # a tier-1 answer: the site it answered; else by task, name, input digest
            spans.write({n: list(c) for (n, _), c in zip(SPAN_COLUMNS, cols)})
        inputs, outputs = store.span_payload_ids("llm")
        payloads = _Writer(pa, pq, out, "payloads.parquet")
        requests = _Writer(pa, pq, out, "requests.parquet")
        answers = _Writer(pa, pq, out, "answers.parquet")
        writers += [payloads, requests, answers]
        for batch in store.iter_payloads(batch=ROW_GROUP):
            payloads.write({"digest": [b[1] for b in batch], "json": [b[2] for b in batch]})
            req_rows = [r for r in (request_row(b[1], b[2]) for b in batch if b[0] in inputs) if r is not None]
            requests.write_rows(req_rows)
            answers.write_rows([answer_row(b[1], b[2]) for b in batch if b[0] in outputs])
        traces = _Writer(pa, pq, out, "traces.parquet")
        writers.append(traces)
        for chunk in store.iter_traces(batch=ROW_GROUP):
            traces.write({"trace_id": [t["trace_id"] for t in chunk], "name": [t["name"] for t in chunk],
                          "started_ns": [t["started_ns"] for t in chunk], "ended_ns": [t["ended_ns"] for t in chunk],
                          "status": [t["status"] for t in chunk],
                          "attributes": [json.dumps(t["attributes"], sort_keys=True, separators=(",", ":"),
                                                    ensure_ascii=False) for t in chunk],
                          "digest": [t["digest"] for t in chunk]})
    except BaseException:
        for w in writers:
            w.abort()
        raise
    for w in writers:
        w.close()
    counts = {"spans": spans.rows, "payloads": payloads.rows, "traces": traces.rows, "requests": requests.rows,
              "answers": answers.rows}
    size = sum((out / f).stat().st_size for f in FILES)
    return {**counts, "bytes": size, "dir": str(out)}


def check_layout(folder: str | os.PathLike, files: tuple[str, ...] = CENSUS_FILES) -> Path:
    """The folder, after checking each of ``files`` is a Parquet file of the ``auto.parquet/2``
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
        if fmt in OLD_FORMATS:
            raise InterchangeError(f"{p}: layout {fmt!r} was written by an earlier Auto; this one reads {FORMAT!r}: "
                                   f"export the store again (auto store export --format parquet)")
        if fmt != FORMAT:
            raise InterchangeError(f"{p}: layout {fmt or 'unknown'!r}, expected {FORMAT!r}")
        types = _types(pa)
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
    """The census over an ``auto.parquet/2`` export, computed by DuckDB: the store's census SQL
    over ``spans.parquet`` for every span but the model calls, and the model calls per
    model-call site found in SQL (:func:`auto.interchange.duckdb_sites.model_call_census`), so
    the results are those of :func:`auto.census.census_store` on the exported store.

    Args:
        folder: the export folder.
        task: only that task's spans.
        with_inputs: per-input rows (texts read from ``payloads.parquet``).
        threads: DuckDB threads (default: DuckDB's, one per core).

    Raises:
        InterchangeError: a file is missing, truncated or of another layout (one line naming it),
            or DuckDB cannot read a row group.
    """
    from auto.census import MODEL_CALL_KIND, census_from_rows, census_from_site_rows, join
    from auto.interchange.duckdb_sites import model_call_census
    from auto.store.census_sql import census_params, census_site_sql, census_sql

    d = check_layout(folder)
    duckdb = _duckdb()
    con = duckdb.connect()
    where = d / "spans.parquet"
    try:
        con.execute("SET enable_progress_bar = false")  # stdout carries the census JSON
        con.execute("SET preserve_insertion_order = false")  # the census orders what it needs itself
        if threads:
            con.execute(f"SET threads = {int(threads)}")

        def file(name: str) -> str:
            return str(d / name).replace("'", "''")

        con.execute("CREATE VIEW spans AS SELECT span_id, name, kind, task, site, started_ns, status, "
                    "input_digest AS input_id, output_digest AS output_id, logical_call_id, attempt "
                    f"FROM read_parquet('{file('spans.parquet')}')")
        con.execute(f"CREATE VIEW requests AS SELECT * FROM read_parquet('{file('requests.parquet')}')")
        con.execute(f"CREATE VIEW answers AS SELECT * FROM read_parquet('{file('answers.parquet')}')")
        params = census_params(task, MODEL_CALL_KIND)

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

        side = con.cursor()  # the census result streams on the main cursor meanwhile

        def resolve(ids: list[Any]) -> dict[Any, str]:
            out: dict[Any, str] = {}
            for k in range(0, len(ids), 50_000):
                chunk = ids[k:k + 50_000]
                try:
                    got = side.execute(f"SELECT digest, json FROM read_parquet('{file('payloads.parquet')}') "
                                       f"WHERE digest IN ({','.join('?' * len(chunk))})", chunk).fetchall()
                except duckdb.Error as exc:
                    raise InterchangeError(f"{d / 'payloads.parquet'}: {str(exc).splitlines()[0]}") from None
                out.update(dict(got))
            missing = [i for i in ids if i not in out]
            if missing:
                raise InterchangeError(f"{d / 'payloads.parquet'}: payload {missing[0]} is missing")
            return out

        if with_inputs:
            grouped = census_from_rows(rows(census_sql(task is not None, True)), resolve, True)
        else:
            grouped = census_from_site_rows(rows(census_site_sql(task is not None, True)))
        calls = model_call_census(con, task is not None, params, with_inputs, resolve, str(d), InterchangeError)
        return join(grouped, calls)
    finally:
        con.close()


__all__ = ["FORMAT", "InterchangeError", "answer_row", "census_parquet", "check_layout", "export_parquet",
           "request_row"]

