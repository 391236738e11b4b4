"""The Store API: ingest spans and traces, read witnesses, keep eval runs and artifacts, verify.

Guarantees (over :mod:`auto.store.connection` / :mod:`auto.store.postgres` and
:mod:`auto.store.schema`):

* **One API, two databases.** ``Store(path)`` opens an embedded SQLite file; ``Store(dsn)``
  with a ``postgresql://`` URI opens a PostgreSQL database shared by many hosts
  (:mod:`auto.store.postgres`). Same tables, migrations, immutability rules and digests.
* **Digests at ingest.** Each span and trace is checked and digested on the way in
  (:mod:`auto.store.normalize`); :meth:`Store.verify` re-derives every digest, or (with
  ``task=`` and ``incremental=True``) those of one task's rows added since its last check.
* **Payloads once.** A span's JSON values are stored once by content digest, compressed
  (:mod:`auto.store.payloads`).
* **Immutable traces and spans.** Insert-only: re-ingesting an id with the same content is a
  no-op, with different content an :class:`~auto.errors.IngestError`; triggers refuse
  ``UPDATE``/``DELETE`` on them, and row counters in ``meta`` reveal deleted rows.
* **All-or-nothing batches.** :meth:`Store.ingest` validates and writes a batch in one
  transaction; a failing batch leaves nothing behind.

Times are integer nanoseconds since the Unix epoch (``time.time_ns()``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import operator
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from auto.canonical import canonical_json, digest, digest_bytes
from auto.errors import ArgumentError, IngestError, IntegrityError, NotAStore, StoreError
from auto.store import journal
from auto.store.connection import Connection
from auto.store.normalize import (
    SITE_KEY_SQL,
    SPAN_SELECT,
    ROW_COLUMNS,
    column_json,
    dedupe,
    new_span_id,
    new_trace_id,
    normalize_span_texts,
    normalize_trace,
    span_from_row,
    span_rows,
    span_text_of_values,
    trace_digest,
    trace_from_row,
    trace_row,
)
from auto.store.normalize import _as_dict
from auto.store.payloads import LRU, PayloadMismatch, PayloadTexts, PayloadWriter, decode, DEFLATE_DICT
from auto.store.postgres import PgConnection, is_dsn, location_error
from auto.store.records import StoredArtifact, VerifyReport, Witness
from auto.store.redaction import redact_records
from auto.store.schema import bump_counter, immutability_triggers

log = logging.getLogger("auto.store")

VERIFY_BATCH = 2000
"""Span rows re-derived per batch by a check (their payloads are read in one query per 500)."""

VERIFY_PAYLOAD_CACHE = 200_000
"""Payload ids a check remembers as already re-derived within its snapshot."""

_UNSET = object()


class _Checked(dict):
    """Payload ids checked within one snapshot (``get`` / ``put`` as :class:`LRU`, unbounded)."""

    put = dict.__setitem__


_STORE_ORDER = operator.itemgetter(ROW_COLUMNS.index("started_ns"), ROW_COLUMNS.index("span_id"))
"""The store order of a :data:`~auto.store.normalize.ROW_COLUMNS` row: ``(started_ns, span_id)``."""

_KIND, _STATUS, _INPUT_ID, _DIGEST = (ROW_COLUMNS.index(c) for c in ("kind", "status", "input_id", "digest"))
"""Positions in a :data:`~auto.store.normalize.ROW_COLUMNS` row (the payload ids run from
``_INPUT_ID`` up to ``_DIGEST``)."""

_BARRIERS: dict[str, list[Callable[[], Any]]] = {}
"""Read barriers of this process by database (:meth:`Store.add_read_barrier`)."""
_BARRIERS_LOCK = threading.Lock()

_SPAN_INSERT = (
    "INSERT INTO spans (span_id, trace_id, parent_span_id, name, kind, task, site, started_ns, ended_ns, status, "
    "input_id, output_id, error_id, attributes_id, logical_call_id, attempt, digest) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)

_CENSUS_SQL = """
WITH retried AS (
  SELECT DISTINCT logical_call_id AS lid FROM spans
  WHERE attempt > 0 AND logical_call_id IS NOT NULL {and_task}
),
obs AS (
  SELECT {site} AS site, task, kind, name, input_id, status, output_id, started_ns AS first_ns, 1 AS attempts
  FROM spans
  WHERE (logical_call_id IS NULL OR logical_call_id NOT IN (SELECT lid FROM retried)) {and_task}
  UNION ALL
  SELECT site, task, kind, name, input_id, status, output_id, first_ns, attempts FROM (
    SELECT {site} AS site, task, kind, name, input_id, status, output_id,
           MIN(started_ns) OVER (PARTITION BY {site}, logical_call_id) AS first_ns,
           COUNT(*) OVER (PARTITION BY {site}, logical_call_id) AS attempts,
           ROW_NUMBER() OVER (PARTITION BY {site}, logical_call_id
                              ORDER BY attempt DESC, started_ns DESC, span_id DESC) AS rn
    FROM spans WHERE logical_call_id IN (SELECT lid FROM retried) {and_task}
  ) AS last_attempts WHERE rn = 1
)
{final}
"""
"""The census in the database: one row per (site, task, kind, input, status, output) with its
number of logical observations (SDK retries of one model call, sharing ``auto.logical_call_id``,
count once: the last attempt by ``(auto.attempt, started_ns, span_id)``) and the first start time
among them; ordered by site, then input. The same SQL runs on SQLite, PostgreSQL and DuckDB."""

_CENSUS_FINAL = """SELECT site, task, kind, input_id, status, output_id, count(*) AS n, MIN(first_ns) AS first_ns
FROM obs
GROUP BY site, input_id, task, kind, status, output_id
ORDER BY site, input_id"""

_MODEL_CALL_FINAL = """SELECT site, task, name, input_id, status, output_id, count(*) AS n, MIN(first_ns) AS first_ns,
       SUM(attempts) AS spans
FROM obs
GROUP BY site, task, name, input_id, status, output_id"""

_MODEL_CALL_ORDER = "\nORDER BY task, name, input_id, site"

_SITE_AGGREGATE = """cobs AS (
{cobs}
),
per_out AS (
  SELECT site, input_id, task, kind, ok, out_id, SUM(n) AS n, MIN(first_ns) AS first_ns FROM (
    SELECT site, input_id, task, kind,
           CASE WHEN COALESCE(status, 'ok') = 'ok' THEN 1 ELSE 0 END AS ok,
           CASE WHEN COALESCE(status, 'ok') = 'ok' THEN output_id END AS out_id, n, first_ns
    FROM cobs) AS o
  GROUP BY site, input_id, task, kind, ok, out_id
),
per_input AS (
  SELECT site, SUM(n) AS obs, SUM(CASE WHEN ok = 0 THEN n ELSE 0 END) AS errors,
         COUNT(DISTINCT out_id) + MAX(CASE WHEN ok = 1 AND out_id IS NULL THEN 1 ELSE 0 END) AS outs
  FROM per_out GROUP BY site, input_id
)
SELECT site, obs, errors, outs, count(*) AS inputs, NULL AS task, NULL AS kind, NULL AS first_ns
FROM per_input GROUP BY site, obs, errors, outs
UNION ALL
SELECT site, NULL, NULL, NULL, NULL, task, kind, MIN(first_ns) FROM per_out GROUP BY site, task, kind"""
"""The census per site, aggregated in the database from observations ``cobs`` (columns ``site,
input_id, task, kind, status, output_id, n, first_ns``: ``n`` observations): one row ``(site,
obs, errors, outs, inputs, NULL, NULL, NULL)`` per site and distinct ``(observations, errors,
distinct successful outputs)`` of its inputs, with the number of inputs that have them, and one
row ``(site, NULL, NULL, NULL, NULL, task, kind, first_ns)`` per site, task and kind with its
earliest observation (:func:`auto.census.census_from_site_rows` folds them). A successful
observation whose output is JSON null (``output_id`` NULL) is a distinct output of its own."""


def local_path(location: str | os.PathLike) -> str:
    """Where files that belong with a store on this host go (a ratchet's artifact folder
    ``<local_path>.artifacts``, a recorder's journal ``<local_path>.journal``, an SQLite store's
    compile lock ``<local_path>.compile.lock``): an SQLite store's own path; for a PostgreSQL
    store, ``$XDG_CACHE_HOME/auto/pg-<digest>`` (default ``~/.cache/auto``, created), the digest
    taken over the URI without its password.

    Raises:
        StoreError: that folder cannot be created (one line naming it; set ``XDG_CACHE_HOME``).
    """
    if not is_dsn(location):
        return str(location)
    from auto.store.postgres import redact

    shown = redact(str(location))
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "auto"
    try:
        base.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise StoreError(f"{base}: cannot create the folder for this host's files of the store {shown} "
                         f"({e.strerror or e}); set XDG_CACHE_HOME to a writable folder") from None
    return str(base / ("pg-" + hashlib.sha256(shown.encode("utf-8")).hexdigest()[:16]))


def census_sql(task: bool, exclude_kind: bool = False) -> str:
    """:data:`_CENSUS_SQL` with or without the ``task = ?`` and ``kind <> ?`` filters (each
    placeholder three times: :func:`census_params`)."""
    conds = ("AND task = ? " if task else "") + ("AND kind <> ?" if exclude_kind else "")
    return _CENSUS_SQL.format(site=SITE_KEY_SQL, and_task=conds, final=_CENSUS_FINAL)


def site_aggregate_sql(cobs: str) -> str:
    """:data:`_SITE_AGGREGATE` over the observations ``cobs`` (a ``SELECT``): common table
    expressions and the final ``SELECT``, to follow ``WITH`` or a comma in a ``WITH`` list."""
    return _SITE_AGGREGATE.format(cobs=cobs)


def census_site_sql(task: bool, exclude_kind: bool = False) -> str:
    """The census per site (:data:`_SITE_AGGREGATE`) of the spans :func:`census_sql` reads, with
    the same filters and parameters (:func:`census_params`); no row per input leaves the database."""
    conds = ("AND task = ? " if task else "") + ("AND kind <> ?" if exclude_kind else "")
    cobs = "  SELECT site, input_id, task, kind, status, output_id, 1 AS n, first_ns FROM obs"
    return _CENSUS_SQL.format(site=SITE_KEY_SQL, and_task=conds, final=",\n" + site_aggregate_sql(cobs))


TIER1_SPAN = "auto.tier1"
"""The span name of a recorded tier-1 answer (``auto proxy`` records one per answer, kind
``llm``, marked ``auto.tier = 1``). It is not an observation of its site: the census leaves it
out (:func:`model_call_census_sql`) and site discovery reads only
:data:`auto.sites.discover.MODEL_CALL_SPANS`, so an artifact's own answers are never its
witnesses."""


def model_call_census_sql(task: bool, ordered: bool = True) -> str:
    """The census's observations of one span kind (``kind = ?``; ``task = ?`` first when
    ``task``: :func:`census_params`), grouped by distinct request instead of by site: one row
    ``(site, task, name, input_id, status, output_id, n, first_ns, spans)`` per recorded site key,
    task, span name, request, status and response (``spans``: the spans of those ``n`` logical
    observations, retried attempts included), ordered by task, name, then request (what
    :func:`auto.census.census_model_calls` folds into model-call sites); ``ordered=False``
    leaves out the ``ORDER BY``. Tier-1 answers (:data:`TIER1_SPAN`) are not observations and
    are left out."""
    conds = ("AND task = ? " if task else "") + f"AND kind = ? AND name <> '{TIER1_SPAN}'"
    final = _MODEL_CALL_FINAL + (_MODEL_CALL_ORDER if ordered else "")
    return _CENSUS_SQL.format(site=SITE_KEY_SQL, and_task=conds, final=final)


def census_params(task: str | None, exclude_kind: str | None = None) -> list[Any]:
    """The parameters of :func:`census_sql` ``(task is not None, exclude_kind is not None)``."""
    one = [v for v in (task, exclude_kind) if v is not None]
    return one * 3


class Store:
    """An Auto trace store over one SQLite file (created if missing) or one PostgreSQL database.

    Thread-safe (one connection guarded by a lock) and fork-aware (a child process reopens its
    connection on first use). Use as a context manager or call :meth:`close`.

    Args:
        path: a file path (SQLite), or a ``postgresql://`` / ``postgres://`` URI (libpq
            connection string; :mod:`auto.store.postgres`).
        create: create the store when there is none (a missing or empty file, a database
            schema without tables); False: only open an existing store (what a reading
            command wants: it never leaves a new store behind).

    Raises (from the constructor):
        ArgumentError: ``path`` looks like a URI of another scheme (a typo'd ``postgresql://``:
            :func:`auto.store.postgres.location_error`); nothing is created.
        NotAStore: the file is not an SQLite database, or the database holds other tables;
            with ``create=False``, there is no store there (nothing is created).
        SchemaTooNew: ``meta.schema_version`` is newer than :data:`~auto.store.schema.SCHEMA_VERSION`.
        StoreError: the store cannot be opened (a PostgreSQL server that cannot be reached, or
            psycopg not installed: ``pip install 'auto[postgres]'``).
    """

    def __init__(self, path: str | os.PathLike, *, create: bool = True):
        bad = location_error(path)
        if bad is not None:
            raise ArgumentError(bad)
        if is_dsn(path):
            self._conn: Any = PgConnection(str(path), create=create)
            self.path: Path | None = None
        else:
            if not create:
                p = Path(path)
                if not p.is_file():
                    raise NotAStore(f"{p}: no such store (nothing was created)")
                if p.stat().st_size == 0:
                    raise NotAStore(f"{p} is an empty file, not an Auto store (nothing was changed)")
            self._conn = Connection(path)
            self.path = self._conn.path
        self.location: str = self._conn.label
        """The file path, or the URI with its password removed."""
        self.dialect: str = self._conn.dialect
        """``"sqlite"`` or ``"postgresql"``."""
        self._payloads = PayloadWriter()
        self._texts = PayloadTexts(self._fetch_payloads)
        self._local = threading.local()
        self.replayed = journal.replay(journal.journal_dir(local_path(self.location)), self._replay_batch)
        """Spans replayed at open from journals of writers that died (:mod:`auto.store.journal`)."""

    def _replay_batch(self, spans: list[dict], traces: list[dict]) -> None:
        try:
            self.ingest(spans, traces)
        except IngestError as exc:  # a batch the store refuses stays refused; the others go in
            log.error("auto: a journaled batch of %d span(s) was refused at replay: %s", len(spans), exc)

    # -- read barriers -------------------------------------------------------------------

    def _barrier_key(self) -> str:
        return self.location if self.dialect == "postgresql" else os.path.realpath(self.location)

    def add_read_barrier(self, fn: Callable[[], Any]) -> None:
        """Call ``fn()`` before every read through any store of this process open on the same
        database (a recorder's background writer registers its ``flush``, so what was recorded
        in this process is read back, through this store or another one opened on the file)."""
        with _BARRIERS_LOCK:
            _BARRIERS.setdefault(self._barrier_key(), []).append(fn)

    def remove_read_barrier(self, fn: Callable[[], Any]) -> None:
        """Undo :meth:`add_read_barrier` (no error when absent)."""
        with _BARRIERS_LOCK:
            fns = _BARRIERS.get(self._barrier_key(), [])
            if fn in fns:
                fns.remove(fn)
            if not fns:
                _BARRIERS.pop(self._barrier_key(), None)

    def _barrier(self) -> None:
        if _BARRIERS and not getattr(self._local, "busy", False):
            with _BARRIERS_LOCK:
                fns = list(_BARRIERS.get(self._barrier_key(), ()))
            for fn in fns:
                fn()

    def _read(self, sql: str, params: Iterable[Any] = ()) -> list[dict]:
        self._barrier()
        return self._conn.read(sql, params)

    def _snapshot(self, fn: Callable[[Any], Any]) -> Any:
        self._barrier()

        def run(q: Any) -> Any:
            self._local.busy = True  # reads inside a snapshot never wait on a writer
            try:
                return fn(q)
            finally:
                self._local.busy = False

        return self._conn.snapshot(run)

    def _stream(self, sql: str, params: Iterable[Any] = (), size: int = 5000) -> Iterator[tuple]:
        self._barrier()
        return self._conn.stream(sql, params, size=size)

    def close(self) -> None:
        """Close the connection (idempotent)."""
        self._conn.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store({self.location!r})"

    def check(self) -> None:
        """Read every page of the file (SQLite ``quick_check``; linear in the file's size), so a
        damaged store is refused before anything is written into it.

        Raises:
            StoreError: the file has damaged pages (the first problems named, one line).
        """
        problems = self._conn.quick_check()
        if problems:
            raise StoreError(f"{self.location} is corrupt ({'; '.join(problems[:3])}); nothing was changed: restore it "
                             f"from a copy or record into a new store")

    # -- meta ----------------------------------------------------------------------------

    @property
    def schema_version(self) -> int:
        """``meta.schema_version`` of the open store."""
        rows = self._read("SELECT value FROM meta WHERE key = 'schema_version'")
        return int(rows[0]["value"])

    def size_bytes(self) -> int:
        """Bytes the store occupies (SQLite: the file with its WAL; PostgreSQL: its tables,
        indexes and TOAST)."""
        return self._conn.size_bytes()

    # -- ingest --------------------------------------------------------------------------

    def ingest(self, spans: Iterable[Any] = (), traces: Iterable[Any] = ()) -> dict:
        """Write spans and traces in one transaction: all of them or none.

        Args:
            spans: span dicts with the :data:`~auto.store.normalize.SPAN_FIELDS` (``input``/``output``/``error``/
                ``attributes`` as JSON values, not text); a ``digest`` key, if present, must
                match. Dataclasses/pydantic models with those fields are accepted.
            traces: trace dicts with the :data:`~auto.store.normalize.TRACE_FIELDS`.

        Returns:
            ``{"spans": inserted, "traces": inserted, "unchanged": already present}``.

        Raises:
            IngestError: a record is malformed, not canonical JSON, or re-uses an existing id
                with different content. Nothing of the batch is written.

        Every record is redacted first (:mod:`auto.store.redaction`: secrets replaced by
        ``[REDACTED]``; a changed record's given ``digest`` is dropped and recomputed).
            StoreError: the database failed (PostgreSQL: unreachable past the retry deadline).
        """
        spans, traces = redact_records(spans, _as_dict), redact_records(traces, _as_dict)  # the one choke point
        prepared = [normalize_span_texts(s) for s in spans]
        kept = {id(s) for s in dedupe([s for s, _ in prepared], "span_id", "span")}
        prepared = [p for p in prepared if id(p[0]) in kept]
        nt = dedupe([normalize_trace(t) for t in traces], "trace_id", "trace")

        def write(tx: Any) -> dict:
            self._payloads.begin()
            tx.lock_ingest()  # PostgreSQL: one ingest at a time, so seq order is commit order
            new_ids = {s["span_id"] for s in self._new_rows(tx, "spans", "span_id", [s for s, _ in prepared])}
            new_spans = [p for p in prepared if p[0]["span_id"] in new_ids]
            new_traces = self._new_rows(tx, "traces", "trace_id", nt)
            if new_spans:
                bump_counter(tx, "span_count", len(new_spans))
                tx.executemany(_SPAN_INSERT, span_rows(tx, self._payloads, new_spans))
            if new_traces:
                bump_counter(tx, "trace_count", len(new_traces))
                rows = [trace_row(t) for t in new_traces]
                tx.executemany("INSERT INTO traces (trace_id, name, started_ns, ended_ns, status, attributes, digest) "
                               "VALUES (?, ?, ?, ?, ?, ?, ?)",
                               [(r["trace_id"], r["name"], r["started_ns"], r["ended_ns"], r["status"],
                                 r["attributes"], r["digest"]) for r in rows])
            unchanged = len(prepared) - len(new_spans) + len(nt) - len(new_traces)
            return {"spans": len(new_spans), "traces": len(new_traces), "unchanged": unchanged}

        result = self._conn.write(write)  # an integrity violation becomes IngestError
        self._payloads.commit()
        return result

    @contextlib.contextmanager
    def bulk_load(self, cache_mib: int = 1024, checkpoint_mib: int = 256) -> Iterator["Store"]:
        """A context for loading many large batches (:meth:`ingest` of 10k+ spans each: an
        import, a generated store). On SQLite, for this connection: a page cache of
        ``cache_mib`` MiB and a WAL checkpoint every ``checkpoint_mib`` MiB instead of every 4 MiB,
        restored at the end, when the WAL is checkpointed and truncated. Each new span updates a
        random page of the span-id and payload-digest indexes; with SQLite's default 2 MiB cache
        the pages a large batch dirties are spilled and read back, and nearly every commit is
        followed by a checkpoint (measured in ``bench/scale``). What is written, and when it is
        durable, do not change. On PostgreSQL nothing changes.

        Raises:
            StoreError: the final checkpoint failed.
        """
        with self._conn.bulk(cache_mib, checkpoint_mib):
            yield self

    @staticmethod
    def _new_rows(tx: Any, table: str, key: str, items: list[dict]) -> list[dict]:
        if not items:
            return []
        existing: dict[str, str] = {}
        ids = [it[key] for it in items]
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            q = f"SELECT {key}, digest FROM {table} WHERE {key} IN ({','.join('?' * len(chunk))})"
            existing.update({r[0]: r[1] for r in tx.query(q, chunk)})
        out = []
        for it in items:
            d = existing.get(it[key])
            if d is None:
                out.append(it)
            elif d != it["digest"]:
                raise IngestError(
                    f"{table[:-1]} {it[key]} already exists with different content "
                    f"({d} != {it['digest']}); {table} are immutable"
                )
        return out

    def add_witness(
        self,
        task: str | dict,
        input: dict | None = None,
        output: Any = None,
        *,
        status: str = "ok",
        error: dict | None = None,
        attributes: dict | None = None,
        started_ns: int | None = None,
        ended_ns: int | None = None,
        trace_id: str | None = None,
        span_id: str | None = None,
    ) -> str:
        """Write one task span (and a new trace holding it) from a captured execution.

        Used by the runtime's deopt capture sink: the reference agent answered an input the
        artifact declined, and that answer becomes a new witness for the next generation.
        ``Tiered(..., capture=store.add_witness)`` works directly: called with one dict
        ``{"task", "input", "output", ...}``, the other keys (``reason``, ``artifact_id``,
        ``generation``, ``latency_us``, ...) become attributes ``auto.capture.<key>``.

        Args:
            task: task name (or the capture dict, see above); input: the bound arguments (JSON
                object); output: the result (JSON).
            status: ``"ok"`` or ``"error"``; error: ``{"type", "message"}`` when failed.
            attributes: extra span attributes (``auto.source`` defaults to ``"add_witness"``,
                ``"capture"`` for a capture dict).
            started_ns, ended_ns: times in ns (default: now).
            trace_id, span_id: ids (default: fresh random ids; with a given ``trace_id`` no
                trace row is written).

        Returns:
            the span id.

        Raises:
            IngestError: the values are not canonical JSON, the ids collide, or the capture
                dict lacks ``task``/``input``.
        """
        if isinstance(task, dict):
            rec = dict(task)
            try:
                task, input, output = rec.pop("task"), rec.pop("input"), rec.pop("output", output)
            except KeyError as exc:
                raise IngestError(f"capture record lacks {exc.args[0]!r}") from None
            extra = {f"auto.capture.{k}": v for k, v in rec.items()}
            attributes = {"auto.source": "capture", **extra, **(attributes or {})}
        if not isinstance(task, str) or not isinstance(input, dict):
            raise IngestError("add_witness needs a task name and an input object (dict)")
        now = time.time_ns()
        started = now if started_ns is None else started_ns
        if ended_ns is not None:
            ended = ended_ns
        else:
            ended = now if started_ns is None else started_ns
        tid = trace_id or new_trace_id()
        sid = span_id or new_span_id()
        attrs = {"auto.source": "add_witness", **(attributes or {})}
        span = {
            "trace_id": tid, "span_id": sid, "parent_span_id": None, "name": task, "kind": "task",
            "task": task, "site": None, "started_ns": started, "ended_ns": ended, "status": status,
            "input": input, "output": output, "error": error, "attributes": attrs,
        }
        trace = {"trace_id": tid, "name": task, "started_ns": started, "ended_ns": ended,
                 "status": status, "attributes": {"auto.source": attrs["auto.source"]}}
        self.ingest([span], [trace] if trace_id is None else [])
        return sid

    # -- reading -------------------------------------------------------------------------

    def _fetch_payloads(self, ids: list[int]) -> list[tuple]:
        out: list[tuple] = []
        for k in range(0, len(ids), 500):
            chunk = ids[k:k + 500]
            rows = self._read(f"SELECT id, codec, dict_id, body, digest FROM payloads WHERE id IN "
                                   f"({','.join('?' * len(chunk))})", chunk)
            out.extend((r["id"], r["codec"], r["dict_id"], r["body"], r["digest"]) for r in rows)  # (checked on read)
        return out

    def payload_texts(self, ids: Iterable[int | None]) -> dict[int, str]:
        """``{payload id: canonical JSON text}`` of the given ids (None skipped).

        Raises:
            IntegrityError: a payload is missing or does not decode (``auto store verify``).
        """
        try:
            return self._texts.texts(ids)
        except PayloadMismatch as exc:
            raise IntegrityError(f"{self.location}: {exc}: it was written outside Auto: `auto store verify` lists "
                                 f"every such row") from None
        except ValueError as exc:
            raise IntegrityError(f"{self.location}: {exc}") from None

    def _spans_of(self, rows: list[dict], with_texts: bool = False, texts: dict[int, str] | None = None) -> list[dict]:
        ids = {r[c] for r in rows for c in ("input_id", "output_id", "error_id", "attributes_id")} - {None}
        texts = dict(texts) if texts is not None else {}
        try:
            texts.update(self._texts.texts(ids - texts.keys()))
        except PayloadMismatch as exc:  # name the row and the column that read it
            sid, col = next(((r["span_id"], c[:-3]) for r in rows for c in ("input_id", "output_id", "error_id",
                            "attributes_id") if r[c] == exc.payload_id), (None, None))
            raise IntegrityError(f"{self.location}: span {sid} column {col!r}: {exc}: "
                                 f"it was written outside Auto: `auto store verify` lists every such row") from None
        except ValueError as exc:
            raise IntegrityError(f"{self.location}: {exc}") from None
        parsed: dict[int, Any] = {}
        out = [span_from_row(r, texts, parsed) for r in rows]
        if with_texts:  # the canonical input/output texts, for readers that key on them
            for r, s in zip(rows, out):
                s["_input_text"] = None if r["input_id"] is None else texts[r["input_id"]]
                s["_output_text"] = "null" if r["output_id"] is None else texts[r["output_id"]]
        return out

    def spans(self, trace_id: str | None = None, task: str | None = None, kind: str | None = None) -> list[dict]:
        """Spans as dicts (JSON columns parsed), ordered by ``(started_ns, span_id)``.

        Filters combine with AND: ``trace_id``; ``task`` (the span's task column: a task span
        and the model calls made inside it); ``kind`` (``task``/``llm``/``tool``).
        """
        where, params = [], []
        for col, val in (("trace_id", trace_id), ("task", task), ("kind", kind)):
            if val is not None:
                where.append(f"{col} = ?")
                params.append(val)
        sql = f"SELECT {SPAN_SELECT} FROM spans" + (" WHERE " + " AND ".join(where) if where else "")
        sql += " ORDER BY started_ns, span_id"
        return self._spans_of(self._read(sql, params))

    def iter_spans(self, task: str | None = None, batch: int = 2000) -> Iterator[dict]:
        """Every span (of ``task``, when given) as a dict, in insertion order, streamed: memory
        stays bounded by ``batch`` spans."""
        sql = f"SELECT {SPAN_SELECT} FROM spans" + (" WHERE task = ?" if task else "") + " ORDER BY seq"
        cols = [c.strip() for c in SPAN_SELECT.split(",")]
        buf: list[dict] = []
        for row in self._stream(sql, [task] if task else [], size=batch):
            buf.append(dict(zip(cols, row)))
            if len(buf) >= batch:
                yield from self._spans_of(buf)
                buf = []
        if buf:
            yield from self._spans_of(buf)

    def iter_export_rows(self, batch: int = 100_000) -> Iterator[list[tuple]]:
        """The spans as the Parquet layout lists them (:data:`auto.interchange.parquet.SPAN_COLUMNS`:
        payload ids replaced by ``sha256:<hex>`` digests, computed in the database), in insertion
        order, in batches of ``batch`` tuples."""
        hexd = ("CASE WHEN {0}.digest IS NULL THEN NULL ELSE 'sha256:' || lower(hex({0}.digest)) END"
                if self.dialect == "sqlite" else "'sha256:' || encode({0}.digest, 'hex')")  # no payload: null
        cols = ("s.seq, s.span_id, s.trace_id, s.parent_span_id, s.name, s.kind, s.task, s.site, s.started_ns, "
                "s.ended_ns, s.status, " + ", ".join(hexd.format(a) for a in ("pi", "po", "pe", "pa"))
                + ", s.logical_call_id, s.attempt, s.digest")
        sql = (f"SELECT {cols} FROM spans s LEFT JOIN payloads pi ON pi.id = s.input_id "
               "LEFT JOIN payloads po ON po.id = s.output_id LEFT JOIN payloads pe ON pe.id = s.error_id "
               "LEFT JOIN payloads pa ON pa.id = s.attributes_id ORDER BY s.seq")
        buf: list[tuple] = []
        for row in self._stream(sql, [], size=batch):
            buf.append(row)
            if len(buf) >= batch:
                yield buf
                buf = []
        if buf:
            yield buf

    def iter_payloads(self, batch: int = 5000) -> Iterator[list[tuple[int, str, str]]]:
        """Every payload as ``(id, "sha256:<hex>", canonical JSON text)``, in id order, in
        batches (for export). Raises IntegrityError on a payload that does not decode."""
        buf: list[tuple] = []
        for row in self._stream("SELECT id, digest FROM payloads ORDER BY id", [], size=batch):
            buf.append(row)
            if len(buf) >= batch:
                yield self._payload_batch(buf)
                buf = []
        if buf:
            yield self._payload_batch(buf)

    def span_payload_ids(self, kind: str) -> tuple[set[int], set[int]]:
        """``(input payload ids, output payload ids)`` of the spans of ``kind`` (for export; one
        scan of the spans each)."""
        sql = "SELECT DISTINCT {0} FROM spans WHERE kind = ? AND {0} IS NOT NULL"
        return ({r[0] for r in self._stream(sql.format("input_id"), [kind])},
                {r[0] for r in self._stream(sql.format("output_id"), [kind])})

    def _payload_batch(self, rows: list[tuple]) -> list[tuple[int, str, str]]:
        texts = self.payload_texts([r[0] for r in rows])
        return [(r[0], "sha256:" + bytes(r[1]).hex(), texts[r[0]]) for r in rows]

    def traces(self) -> list[dict]:
        """All traces as dicts, ordered by ``(started_ns, trace_id)``."""
        rows = self._read("SELECT * FROM traces ORDER BY started_ns, trace_id")
        return [trace_from_row(r) for r in rows]

    def iter_traces(self, batch: int = 5000) -> Iterator[list[dict]]:
        """All traces as dicts, ordered by ``(started_ns, trace_id)``, streamed in batches of
        ``batch`` (for export: memory stays bounded by a batch)."""
        cols = ("trace_id", "name", "started_ns", "ended_ns", "status", "attributes", "digest")
        buf: list[dict] = []
        for row in self._stream(f"SELECT {', '.join(cols)} FROM traces ORDER BY started_ns, trace_id", [], size=batch):
            buf.append(trace_from_row(dict(zip(cols, row))))
            if len(buf) >= batch:
                yield buf
                buf = []
        if buf:
            yield buf

    def counts(self) -> dict[str, int]:
        """Rows per table: ``{"spans", "traces", "payloads", "eval_runs", "artifacts"}``."""
        out = {}
        for t in ("spans", "traces", "payloads", "eval_runs", "artifacts"):
            out[t] = int(self._read(f"SELECT count(*) AS n FROM {t}")[0]["n"])
        return out

    def tasks(self) -> dict[str, int]:
        """``{task name: number of task spans}`` over the whole store."""
        rows = self._read("SELECT task, count(*) AS n FROM spans WHERE kind = 'task' GROUP BY task ORDER BY task")
        return {r["task"]: r["n"] for r in rows}

    def has_task(self, task: str) -> bool:
        """Whether any task span of ``task`` is stored (one index probe)."""
        return bool(self._read("SELECT 1 AS one FROM spans WHERE task = ? AND kind = 'task' LIMIT 1", [task]))

    def witnesses(self, task: str, include_errors: bool = False) -> list[Witness]:
        """The task spans of ``task`` as :class:`Witness` records, ordered by start time.

        By default only successful executions (status ``ok``: a *witness* in the architecture's
        words); ``include_errors=True`` adds failed ones (``output`` None, ``error`` set).
        """
        return self._witness_rows(self._rows(self._witness_sql(include_errors), [task]))

    def task_witnesses(self, task: str, *, verify: bool = False) -> tuple[list[Witness], str]:
        """``(witnesses, store digest of the task)`` read from one snapshot through the task
        index, so the digest a compile records is the digest of exactly the witnesses it read
        (recorders may commit meanwhile).

        With ``verify=True``, the same snapshot is also the integrity check a compile needs:
        the task's rows added since the last incremental check of the task (all of them the
        first time) are re-derived with their payloads, and the row counters and immutability
        triggers are checked, exactly as :meth:`verify` with ``task`` and ``incremental=True``
        (a passing check moves the same watermark forward); the rows are read once for both, and
        the witnesses handed out are the rows just checked.

        Raises:
            IntegrityError: (``verify=True``) a stored digest of the task's rows does not match
                its content, a counter or trigger is off; nothing is returned.
        """
        if not verify:
            dsql = "SELECT digest FROM spans WHERE task = ? ORDER BY started_ns, span_id"
            rows, digests = self._snapshot(lambda q: (list(q.iter(self._witness_sql(False), [task], size=10_000)),
                                                      q(dsql, [task])))
            return self._witness_rows(rows), digest([r["digest"] for r in digests])
        rows, texts, sd = self._verified_read("task", task)
        return self._witness_rows([r for r in rows if r[_KIND] == "task" and r[_STATUS] == "ok"], texts), sd

    def verified_spans(self, kind: str) -> list[dict]:
        """The spans of ``kind`` as :meth:`spans` returns them, read from one snapshot in which
        those added since the last incremental check of the kind are re-derived first (the check
        of :meth:`verify` with ``kind`` and ``incremental=True``; a passing check moves the same
        watermark forward).

        Raises:
            IntegrityError: a stored digest of those rows does not match its content, a counter
                or trigger is off; nothing is returned.
        """
        rows, texts, _sd = self._verified_read("kind", kind)
        return self._spans_of([dict(zip(ROW_COLUMNS, r)) for r in rows], texts=texts)

    def span_watermark(self, kind: str) -> tuple[int, int]:
        """``(count, largest seq)`` of the spans of ``kind``: spans are insert-only, so equal
        watermarks mean the same rows (a cache of what was read from them stays valid)."""
        r = self._read("SELECT count(*) AS n, max(seq) AS last FROM spans WHERE kind = ?", [kind])[0]
        return int(r["n"]), int(r["last"] or 0)

    def _rows(self, sql: str, params: Iterable[Any] = ()) -> list[tuple]:
        """The rows of one query as tuples, from one snapshot."""
        return self._snapshot(lambda q: list(q.iter(sql, params, size=10_000)))

    def _verified_read(self, column: str, value: str) -> tuple[list[tuple], dict[int, str], str]:
        """``(rows, payload texts of the rows checked, digest)``: the spans (tuples in
        :data:`~auto.store.normalize.ROW_COLUMNS` order) whose ``column``
        (``task`` or ``kind``) is ``value``, ordered by ``(started_ns, span_id)``, from one snapshot
        in which those added since the scope's last incremental check are re-derived with their
        payloads and the counters and triggers are checked; the watermark moves forward when all
        pass.

        Raises:
            IntegrityError: a mismatch (the report's first ones named).
        """
        scope = f"{column}:{value}"
        wm_key = f"verified_through:{scope}"
        got = self._read("SELECT value FROM meta WHERE key = ?", [wm_key])
        since = int(got[0]["value"]) if got else 0
        sql = f"SELECT {', '.join(ROW_COLUMNS)} FROM spans WHERE {column} = ?"

        def run(q: Any) -> tuple[list[tuple], list[tuple], dict[int, str], list[dict]]:
            mismatches: list[dict] = []
            # ordered by (started_ns, span_id) here rather than by the database's sorter (faster
            # for large scopes; the same order: integers, and span ids of lowercase hex digits)
            rows = sorted(q.iter(sql, [value], size=10_000), key=_STORE_ORDER)
            new = [r for r in rows if r[0] > since]
            texts: dict[int, str] = {}
            ok = _Checked()  # every payload of the scope is kept: no eviction to pay for
            for k in range(0, len(new), VERIFY_BATCH):
                texts.update(self._check_span_rows(q, new[k:k + VERIFY_BATCH], mismatches, ok))
            self._check_structure(q, mismatches)
            return rows, new, texts, mismatches

        rows, new, texts, mismatches = self._snapshot(run)
        sd = digest([r[_DIGEST] for r in rows])
        VerifyReport(ok=not mismatches, spans=len(new), traces=0, eval_runs=0, artifacts=0, mismatches=mismatches,
                     store_digest=sd, scope=scope, since_seq=since).raise_for_mismatch()
        if new:
            last = max(r[0] for r in new)
            self._conn.write(lambda tx: self._set_meta(tx, wm_key, str(last)))
        return rows, texts, sd

    @staticmethod
    def _witness_sql(include_errors: bool) -> str:
        sql = f"SELECT {', '.join(ROW_COLUMNS)} FROM spans WHERE kind = 'task' AND task = ?"
        if not include_errors:
            sql += " AND status = 'ok'"
        return sql + " ORDER BY started_ns, span_id"

    def _witness_rows(self, rows: list[tuple], texts: dict[int, str] | None = None) -> list[Witness]:
        """Task-span rows (tuples in :data:`~auto.store.normalize.ROW_COLUMNS` order) as
        :class:`Witness` records; ``texts``: payload texts already read (the others are fetched).
        A payload is parsed once: witnesses of the same stored input (or output, error,
        attributes) share its parsed value, so a witness's values must not be changed in place.

        Raises:
            IntegrityError: a payload is missing or is not JSON (changed outside Auto).
        """
        need = {pid for r in rows for pid in r[_INPUT_ID:_DIGEST]} - {None}
        texts = dict(texts) if texts is not None else {}
        texts.update(self.payload_texts(need - texts.keys()))
        parsed: dict[int, Any] = {}

        def value(pid: int, span_id: str, col: str) -> Any:
            v = parsed.get(pid, _UNSET)
            if v is _UNSET:
                t = texts[pid]
                v = parsed[pid] = {} if t == "{}" else column_json(t, "spans", span_id, col)
            return v

        out = []
        append = out.append
        get = parsed.get
        of_row = Witness.of_row
        for (seq, span_id, trace_id, _parent, _name, _kind, _task, _site, started, _ended, status,
             ipid, opid, epid, apid, dig) in rows:
            inp = None if ipid is None else get(ipid, _UNSET)
            if inp is _UNSET:
                inp = value(ipid, span_id, "input")
            is_obj = inp.__class__ is dict or isinstance(inp, dict)
            output = None if opid is None else get(opid, _UNSET)
            if output is _UNSET:
                output = value(opid, span_id, "output")
            attrs = None if apid is None else get(apid, _UNSET)
            if attrs is _UNSET:
                attrs = value(apid, span_id, "attributes")
            append(of_row(
                input=inp if is_obj else {}, output=output, status=status,
                error=None if epid is None else value(epid, span_id, "error"), trace_id=trace_id,
                span_id=span_id, started_ns=started, digest=dig, attributes=attrs if attrs is not None else {},
                seq=seq, input_text=texts[ipid] if is_obj else "{}", output_text="null" if opid is None else texts[opid],
            ))
        return out

    # -- witness sets --------------------------------------------------------------------

    def put_witness_set(self, task: str, witnesses: list[Witness]) -> str:
        """Record the set of witnesses a compile read; returns its digest
        (``digest([witness digests in read order])``), which a manifest cites instead of one
        trace id per witness. The row names the task and the last ``seq`` read: the set is the
        task's successful task spans up to it (spans are insert-only and ``seq`` is commit
        order). Storing the same set twice is a no-op.

        Raises:
            ArgumentError-free: an empty list is recorded as an empty set.
        """
        wdigest = digest([w.digest for w in witnesses])
        through = max((w.seq for w in witnesses if w.seq is not None), default=0)
        self._conn.write(lambda tx: tx.execute(
            "INSERT INTO witness_sets (digest, task, n, through_seq, created_ns) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (digest) DO NOTHING", [wdigest, task, len(witnesses), int(through), time.time_ns()]))
        return wdigest

    def witness_set(self, set_digest: str) -> list[Witness] | None:
        """The witnesses of a recorded set (None when no set has that digest).

        Raises:
            IntegrityError: the rows read no longer have the recorded digest.
        """
        rows = self._read("SELECT task, n, through_seq FROM witness_sets WHERE digest = ?", [set_digest])
        if not rows:
            return None
        r = rows[0]
        sql = (f"SELECT {', '.join(ROW_COLUMNS)} FROM spans WHERE kind = 'task' AND task = ? AND status = 'ok' "
               "AND seq <= ? ORDER BY started_ns, span_id")
        ws = self._witness_rows(self._rows(sql, [r["task"], r["through_seq"]]))
        if len(ws) != r["n"] or digest([w.digest for w in ws]) != set_digest:
            raise IntegrityError(f"witness set {set_digest} of task {r['task']!r}: the stored spans no longer match it")
        return ws

    # -- the census ----------------------------------------------------------------------

    def census_rows(self, task: str | None = None, exclude_kind: str | None = None) -> Iterator[tuple]:
        """The census's grouped rows, streamed from the database (:data:`_CENSUS_SQL`):
        ``(site, task, kind, input_id, status, output_id, n, first_ns)`` ordered by site, then
        input id; payload ids resolve through :meth:`payload_texts`. Memory is bounded by the
        database's sort, not by the number of spans. ``task``: only that task's spans;
        ``exclude_kind``: leave out the spans of that kind."""
        sql = census_sql(task is not None, exclude_kind is not None)
        return self._stream(sql, census_params(task, exclude_kind), size=10_000)

    def census_site_rows(self, task: str | None = None, exclude_kind: str | None = None) -> list[tuple]:
        """The census aggregated per site in the database (:func:`census_site_sql`): a few rows
        per site, none per input or span. ``task``, ``exclude_kind``: as :meth:`census_rows`."""
        sql = census_site_sql(task is not None, exclude_kind is not None)
        return list(self._stream(sql, census_params(task, exclude_kind), size=10_000))

    def model_call_rows(self, kind: str, task: str | None = None) -> Iterator[tuple]:
        """The census's observations of the spans of ``kind``, grouped by distinct request
        (:func:`model_call_census_sql`), streamed; payload ids resolve through :meth:`payload_texts`."""
        return self._stream(model_call_census_sql(task is not None), census_params(task, kind), size=10_000)


    # -- eval runs -----------------------------------------------------------------------

    def put_eval_run(self, record: dict) -> str:
        """Store an eval-run record; returns its content-addressed id ``digest(record)``.

        ``task`` and ``verdict`` columns are copied from ``record`` when present. Storing the
        same record twice is a no-op.

        Raises:
            IngestError: ``record`` is not a JSON object, or its ``task`` is not a string.
        """
        if not isinstance(record, dict) or not isinstance(record.get("task"), (str, type(None))):
            raise IngestError("an eval run is a JSON object whose task, when given, is a string")
        try:
            rid = digest(record)
        except (TypeError, ValueError) as exc:
            raise IngestError(f"eval run is not canonical JSON: {exc}") from None
        verdict = None if record.get("verdict") is None else str(record.get("verdict"))
        text = canonical_json(record)
        self._conn.write(lambda tx: tx.execute(
            "INSERT INTO eval_runs (id, task, created_ns, verdict, record) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (id) DO NOTHING", [rid, record.get("task"), time.time_ns(), verdict, text]))
        return rid

    def get_eval_run(self, id: str) -> dict | None:
        """The record stored under ``id``, or ``None``."""
        rows = self._read("SELECT record FROM eval_runs WHERE id = ?", [id])
        return json.loads(rows[0]["record"]) if rows else None

    def eval_runs(self, task: str | None = None) -> list[dict]:
        """Eval-run rows ``{id, task, created_ns, verdict, record}`` (record parsed), oldest first."""
        sql = "SELECT * FROM eval_runs" + (" WHERE task = ?" if task else "") + " ORDER BY created_ns, id"
        rows = self._read(sql, [task] if task else [])
        return [{**r, "record": json.loads(r["record"])} for r in rows]

    # -- artifacts -----------------------------------------------------------------------

    def put_artifact(self, wasm: bytes, manifest: dict, task: str, generation: int) -> str:
        """Store an artifact; returns its id ``"sha256:<hex>"`` of ``wasm`` (idempotent)."""
        aid = digest_bytes(bytes(wasm))
        man = canonical_json(manifest)
        self._conn.write(lambda tx: tx.execute(
            "INSERT INTO artifacts (id, task, generation, created_ns, manifest, wasm) VALUES (?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (id) DO NOTHING", [aid, task, int(generation), time.time_ns(), man, bytes(wasm)]))
        return aid

    def get_artifact(self, id: str) -> StoredArtifact | None:
        """The artifact stored under ``id``, or ``None``."""
        rows = self._read("SELECT * FROM artifacts WHERE id = ?", [id])
        return self._artifact(rows[0]) if rows else None

    def latest_artifact(self, task: str) -> StoredArtifact | None:
        """The artifact of ``task`` with the highest generation (latest stored on ties), or None."""
        rows = self._read(
            "SELECT * FROM artifacts WHERE task = ? ORDER BY generation DESC, created_ns DESC, id LIMIT 1", [task]
        )
        return self._artifact(rows[0]) if rows else None

    def artifacts(self, task: str | None = None) -> list[StoredArtifact]:
        """Every stored artifact (of ``task``, when given), ordered by task, generation, id."""
        sql = "SELECT * FROM artifacts" + (" WHERE task = ?" if task else "") + " ORDER BY task, generation, id"
        return [self._artifact(r) for r in self._conn.read(sql, [task] if task else [])]

    @staticmethod
    def _artifact(r: dict) -> StoredArtifact:
        return StoredArtifact(id=r["id"], task=r["task"], generation=r["generation"], created_ns=r["created_ns"],
                              manifest=json.loads(r["manifest"]), wasm=bytes(r["wasm"]))

    # -- the ratchet's log ---------------------------------------------------------------

    def add_ratchet_event(self, task: str, kind: str, *, generation: int | None = None,
                          artifact_id: str | None = None, detail: dict | None = None) -> int:
        """Append one row to the ratchet log (insert-only, like spans); returns its id.

        Kinds written by :mod:`auto.ratchet`: ``compile`` (an attempt: ``detail.verdict`` pass /
        refuse / error / timeout / crashed / skipped, its trigger and evidence), ``install`` (a
        generation was swapped in; ``detail.parent``), ``rollback`` (a generation was taken out;
        ``detail.to`` the generation installed instead, or None), ``alarm``, ``install-failed``,
        ``install-skipped`` (a generation that passed its gate but would answer less than the
        installed one).

        Raises:
            IngestError: ``detail`` is not canonical JSON.
        """
        try:
            text = canonical_json(detail or {})
        except (TypeError, ValueError) as exc:
            raise IngestError(f"ratchet event detail is not JSON: {exc}") from None
        return self._conn.write(lambda tx: tx.query(
            "INSERT INTO ratchet_events (task, kind, generation, artifact_id, created_ns, detail) "
            "VALUES (?, ?, ?, ?, ?, ?) RETURNING id", [task, kind, generation, artifact_id, time.time_ns(), text])[0][0])

    def ratchet_events(self, task: str) -> list[dict]:
        """The ratchet log of ``task``, oldest first: ``{id, task, kind, generation,
        artifact_id, created_ns, detail}`` (detail parsed)."""
        rows = self._read("SELECT * FROM ratchet_events WHERE task = ? ORDER BY id", [task])
        return [{**r, "detail": json.loads(r["detail"])} for r in rows]

    def installed_generation(self, task: str) -> tuple[int, str] | None:
        """``(generation, artifact id)`` the ratchet log says is installed now (the last
        ``install``, unless a later ``rollback`` took it out), or None."""
        rows = self._read(
            "SELECT kind, generation, artifact_id, detail FROM ratchet_events WHERE task = ? "
            "AND kind IN ('install', 'rollback') ORDER BY id DESC LIMIT 1", [task])
        if not rows or rows[0]["kind"] != "install" or rows[0]["artifact_id"] is None:
            return None
        return int(rows[0]["generation"]), rows[0]["artifact_id"]

    # -- provenance ----------------------------------------------------------------------

    def digest(self, task: str | None = None) -> str:
        """The store digest: ``digest([span digests ordered by (started_ns, span_id)])``.

        With ``task``, only the spans whose task column is ``task``. Independent of insertion
        order, so two stores holding the same spans have the same digest.
        """
        sql = "SELECT digest FROM spans" + (" WHERE task = ?" if task else "") + " ORDER BY started_ns, span_id"
        rows = self._read(sql, [task] if task else [])
        return digest([r["digest"] for r in rows])

    def verify(self, task: str | None = None, *, kind: str | None = None, incremental: bool = False) -> VerifyReport:
        """Re-derive stored digests from one snapshot.

        * ``verify()``: every digest — spans (and the payloads they reference), traces, eval-run
          ids, artifact ids — plus the row counters and the immutability triggers.
        * ``verify(task=T)``: the spans of task ``T`` only (read through the task index) and
          their payloads, plus the counters and triggers.
        * ``verify(kind=K)``: the spans of kind ``K`` only (``task``, ``llm``, ``tool``; not with
          ``task``) and their payloads, plus the counters and triggers.
        * ``incremental=True`` (with or without ``task`` or ``kind``): only spans added since the last
          incremental check of the same scope passed (``meta`` key ``verified_through:<scope>``
          holds the last ``seq`` checked); a passing check moves it forward. Spans are
          insert-only, so what passed once can change only behind the store's back, by dropping a
          trigger — which every check looks for — or by editing the file; ``auto store verify``
          (the full check) re-derives everything.

        Returns a :class:`VerifyReport`; ``report.ok`` is False on any mismatch (the CLI exits
        non-zero), and ``report.raise_for_mismatch()`` raises :class:`IntegrityError`.
        """
        if task is not None and kind is not None:
            raise ArgumentError("verify one task or one kind of span, not both")
        column, value = ("task", task) if task is not None else ("kind", kind) if kind is not None else (None, None)
        scope = f"{column}:{value}" if column else "*"
        wm_key = f"verified_through:{scope}"
        since = 0
        if incremental:
            rows = self._read("SELECT value FROM meta WHERE key = ?", [wm_key])
            since = int(rows[0]["value"]) if rows else 0
        full = column is None and not incremental
        mismatches: list[dict] = []

        def check(table: str, key: Any, stored: str, derive: Callable[[], str]) -> None:
            try:
                d = derive()
            except (TypeError, ValueError, KeyError, IntegrityError) as exc:
                d = f"<unreadable: {exc}>"
            if d != stored:
                mismatches.append({"table": table, "id": key, "stored": stored, "derived": d})

        def run(q: Any) -> dict:
            where, params = ["seq > ?"], [since]
            if column is not None:
                where.append(f"{column} = ?")
                params.append(value)
            sql = f"SELECT {', '.join(ROW_COLUMNS)} FROM spans WHERE {' AND '.join(where)} ORDER BY seq"
            n_spans, last_seq, batch = 0, since, []
            payloads_ok = LRU(VERIFY_PAYLOAD_CACHE)
            for r in q.iter(sql, params):
                batch.append(r)
                n_spans += 1
                last_seq = max(last_seq, r[0])
                if len(batch) >= VERIFY_BATCH:
                    self._check_span_rows(q, batch, mismatches, payloads_ok)
                    batch = []
            if batch:
                self._check_span_rows(q, batch, mismatches, payloads_ok)
            n_traces = n_evals = n_arts = 0
            if full:
                for r in q.iter("SELECT trace_id, name, started_ns, ended_ns, status, attributes, digest FROM traces"):
                    t = dict(zip(("trace_id", "name", "started_ns", "ended_ns", "status", "attributes", "digest"), r))
                    n_traces += 1
                    check("traces", t["trace_id"], t["digest"], lambda t=t: trace_digest(trace_from_row(t)))
                for rid, rec in q.iter("SELECT id, record FROM eval_runs"):
                    n_evals += 1
                    check("eval_runs", rid, rid, lambda rec=rec: digest(json.loads(rec)))
                for aid, wasm in q.iter("SELECT id, wasm FROM artifacts"):
                    n_arts += 1
                    check("artifacts", aid, aid, lambda wasm=wasm: digest_bytes(bytes(wasm)))
            self._check_structure(q, mismatches)
            dsql = "SELECT digest FROM spans" + (f" WHERE {column} = ?" if column else "") + \
                " ORDER BY started_ns, span_id"
            sd = digest([r[0] for r in q.iter(dsql, [value] if column else [])])
            return {"spans": n_spans, "traces": n_traces, "eval_runs": n_evals, "artifacts": n_arts,
                    "store_digest": sd, "last_seq": last_seq}

        # one snapshot: a recorder committing meanwhile can never look like a deleted row
        res = self._snapshot(run)
        ok = not mismatches
        if ok and incremental and res["last_seq"] > since:
            self._conn.write(lambda tx: self._set_meta(tx, wm_key, str(res["last_seq"])))
        return VerifyReport(ok=ok, spans=res["spans"], traces=res["traces"], eval_runs=res["eval_runs"],
                            artifacts=res["artifacts"], mismatches=mismatches, store_digest=res["store_digest"],
                            scope=scope, since_seq=since)

    def _check_span_rows(self, q: Any, batch: list[tuple], mismatches: list[dict], payloads_ok: Any) -> dict[int, str]:
        """Re-derive the digests of span rows (tuples in :data:`~auto.store.normalize.ROW_COLUMNS`
        order) and of the payloads they reference, read in the snapshot ``q``; a mismatch is
        appended to ``mismatches``. ``payloads_ok``: payload ids already checked in this snapshot
        (not re-hashed; ``get`` / ``put``, e.g. an :class:`~auto.store.payloads.LRU`). Returns the
        payload texts of the batch."""
        ids = {pid for r in batch for pid in r[_INPUT_ID:_DIGEST]} - {None}
        texts = self._verified_texts(q, [i for i in ids if not payloads_ok.get(i)], mismatches, payloads_ok)
        texts.update(self.payload_texts([i for i in ids if i not in texts and payloads_ok.get(i)]))
        sha = hashlib.sha256
        for r in batch:
            try:
                d = "sha256:" + sha(span_text_of_values(r, texts).encode("utf-8")).hexdigest()
            except (TypeError, ValueError, KeyError) as exc:
                d = f"<unreadable: {exc}>"
            if d != r[_DIGEST]:
                mismatches.append({"table": "spans", "id": r[1], "stored": r[_DIGEST], "derived": d})
        return texts

    def _check_structure(self, q: Any, mismatches: list[dict]) -> None:
        """The row counters (``meta`` ``span_count`` / ``trace_count`` against the rows present:
        a deleted row shows) and the immutability triggers, in the snapshot ``q``; a mismatch is
        appended to ``mismatches``."""
        meta = {r["key"]: r["value"] for r in q("SELECT key, value FROM meta")}
        present = {t: int(q(f"SELECT count(*) AS n FROM {t}")[0]["n"]) for t in ("spans", "traces")}
        for key, table in (("span_count", "spans"), ("trace_count", "traces")):
            if key in meta and int(meta[key]) != present[table]:
                mismatches.append({"table": table, "id": "*", "stored": f"{meta[key]} rows ingested",
                                   "derived": f"{present[table]} rows present"})
        triggers = self._conn.trigger_names(q)
        for table, _op, name in immutability_triggers():
            if name not in triggers:
                mismatches.append({"table": table, "id": "*", "stored": f"trigger {name}",
                                   "derived": "missing (rows may have been changed)"})

    @staticmethod
    def _set_meta(tx: Any, key: str, value: str) -> None:
        if tx.query("SELECT value FROM meta WHERE key = ?", [key]):
            tx.execute("UPDATE meta SET value = ? WHERE key = ?", [value, key])
        else:
            tx.execute("INSERT INTO meta (key, value) VALUES (?, ?)", [key, value])

    def _verified_texts(self, q: Any, ids: list[int], mismatches: list[dict], ok: Any) -> dict[int, str]:
        """Texts of payloads ``ids`` read in the snapshot ``q``, each checked against its digest
        (a mismatch is appended; its text is still returned so the spans using it are checked)."""
        texts: dict[int, str] = {}
        rows: dict[int, tuple] = {}
        for k in range(0, len(ids), 500):
            chunk = ids[k:k + 500]
            for r in q(f"SELECT id, digest, codec, dict_id, body FROM payloads WHERE id IN "
                       f"({','.join('?' * len(chunk))})", chunk):
                rows[r["id"]] = (r["digest"], r["codec"], r["dict_id"], r["body"])
        need_dicts = {r[2] for r in rows.values() if r[1] == DEFLATE_DICT and r[2] is not None}
        dicts = self._verified_texts(q, list(need_dicts), mismatches, LRU(1)) if need_dicts else {}
        for i in ids:
            r = rows.get(i)
            if r is None:
                mismatches.append({"table": "payloads", "id": i, "stored": "referenced by a span",
                                   "derived": "missing"})
                continue
            try:
                zd = dicts[r[2]].encode("utf-8") if r[1] == DEFLATE_DICT else None
                raw = decode(r[1], r[3], zd)
            except (ValueError, KeyError) as exc:
                mismatches.append({"table": "payloads", "id": i, "stored": "sha256:" + bytes(r[0]).hex(),
                                   "derived": f"<unreadable: {exc}>"})
                continue
            d = hashlib.sha256(raw).digest()
            if d != bytes(r[0]):
                mismatches.append({"table": "payloads", "id": i, "stored": "sha256:" + bytes(r[0]).hex(),
                                   "derived": "sha256:" + d.hex()})
            else:
                ok.put(i, True)
            texts[i] = raw.decode("utf-8", "replace")
        return texts
