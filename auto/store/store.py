"""The Store API: ingest spans and traces, read witnesses, keep eval runs and artifacts, verify.

Guarantees (over :mod:`auto.store.connection` and :mod:`auto.store.schema`):

* **Digests at ingest.** Each span and trace is checked and digested on the way in
  (:mod:`auto.store.normalize`); :meth:`Store.verify` re-derives every digest.
* **Immutable traces and spans.** Insert-only: re-ingesting an id with the same content is a
  no-op, with different content an :class:`~auto.errors.IngestError`; SQLite triggers refuse
  ``UPDATE``/``DELETE`` on both tables, and row counters in ``meta`` reveal deleted rows.
* **All-or-nothing batches.** :meth:`Store.ingest` validates and writes a batch in one
  transaction; a failing batch leaves nothing behind.

Times are integer nanoseconds since the Unix epoch (``time.time_ns()``).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any, Callable, Iterable

import sqlite_utils

from auto.canonical import canonical_json, digest, digest_bytes
from auto.errors import IngestError, IntegrityError, StoreError
from auto.store.connection import Connection
from auto.store.normalize import (
    dedupe,
    new_span_id,
    new_trace_id,
    normalize_span,
    normalize_trace,
    span_digest,
    span_from_row,
    span_row,
    trace_digest,
    trace_from_row,
    trace_row,
)
from auto.store.records import StoredArtifact, VerifyReport, Witness
from auto.store.schema import bump_counter, immutability_triggers


class Store:
    """An Auto trace store over one SQLite file (created if missing).

    Thread-safe (one connection guarded by a lock) and fork-aware (a child process reopens the
    file on first use). Use as a context manager or call :meth:`close`.

    Raises (from the constructor):
        NotAStore: the file is not an SQLite database, or is one that holds other tables.
        SchemaTooNew: ``meta.schema_version`` is newer than :data:`~auto.store.schema.SCHEMA_VERSION`.
        StoreError: the file cannot be opened.
    """

    def __init__(self, path: str | os.PathLike):
        self._conn = Connection(path)
        self.path: Path = self._conn.path

    def close(self) -> None:
        """Close the connection (idempotent)."""
        self._conn.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r})"

    def check(self) -> None:
        """Read every page of the file (SQLite ``quick_check``; linear in the file's size), so a
        damaged store is refused before anything is written into it.

        Raises:
            StoreError: the file has damaged pages (the first problems named, one line).
        """
        problems = self._conn.quick_check()
        if problems:
            raise StoreError(f"{self.path} is corrupt ({'; '.join(problems[:3])}); nothing was changed: restore it "
                             f"from a copy or record into a new store")

    # -- meta ----------------------------------------------------------------------------

    @property
    def schema_version(self) -> int:
        """``meta.schema_version`` of the open store."""
        rows = self._conn.read("SELECT value FROM meta WHERE key = 'schema_version'")
        return int(rows[0]["value"])

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
        """
        ns = dedupe([normalize_span(s) for s in spans], "span_id", "span")
        nt = dedupe([normalize_trace(t) for t in traces], "trace_id", "trace")

        def write(db: sqlite_utils.Database) -> dict:
            new_spans = self._new_rows(db, "spans", "span_id", ns)
            new_traces = self._new_rows(db, "traces", "trace_id", nt)
            if new_spans:
                db["spans"].insert_all([span_row(s) for s in new_spans], pk="span_id")
                bump_counter(db, "span_count", len(new_spans))
            if new_traces:
                db["traces"].insert_all([trace_row(t) for t in new_traces], pk="trace_id")
                bump_counter(db, "trace_count", len(new_traces))
            unchanged = len(ns) - len(new_spans) + len(nt) - len(new_traces)
            return {"spans": len(new_spans), "traces": len(new_traces), "unchanged": unchanged}

        return self._conn.write(write)  # an integrity violation becomes IngestError

    @staticmethod
    def _new_rows(db: sqlite_utils.Database, table: str, key: str, items: list[dict]) -> list[dict]:
        if not items:
            return []
        existing: dict[str, str] = {}
        ids = [it[key] for it in items]
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            q = f"SELECT {key}, digest FROM {table} WHERE {key} IN ({','.join('?' * len(chunk))})"
            existing.update({r[0]: r[1] for r in db.execute(q, chunk).fetchall()})
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
        sql = "SELECT * FROM spans" + (" WHERE " + " AND ".join(where) if where else "")
        sql += " ORDER BY started_ns, span_id"
        return [span_from_row(r) for r in self._conn.read(sql, params)]

    def traces(self) -> list[dict]:
        """All traces as dicts, ordered by ``(started_ns, trace_id)``."""
        rows = self._conn.read("SELECT * FROM traces ORDER BY started_ns, trace_id")
        return [trace_from_row(r) for r in rows]

    def tasks(self) -> dict[str, int]:
        """``{task name: number of task spans}`` over the whole store."""
        rows = self._conn.read("SELECT task, count(*) AS n FROM spans WHERE kind = 'task' GROUP BY task ORDER BY task")
        return {r["task"]: r["n"] for r in rows}

    def witnesses(self, task: str, include_errors: bool = False) -> list[Witness]:
        """The task spans of ``task`` as :class:`Witness` records, ordered by start time.

        By default only successful executions (status ``ok``: a *witness* in the architecture's
        words); ``include_errors=True`` adds failed ones (``output`` None, ``error`` set).
        """
        return self._witness_rows(self._conn.read(self._witness_sql(include_errors), [task]))

    def task_witnesses(self, task: str) -> tuple[list[Witness], str]:
        """``(witnesses, store digest of the task)`` read from one snapshot, so the digest a
        compile records is the digest of exactly the witnesses it read (recorders may commit
        meanwhile)."""
        dsql = "SELECT digest FROM spans WHERE task = ? ORDER BY started_ns, span_id"
        rows, digests = self._conn.snapshot(lambda q: (q(self._witness_sql(False), [task]), q(dsql, [task])))
        return self._witness_rows(rows), digest([r["digest"] for r in digests])

    @staticmethod
    def _witness_sql(include_errors: bool) -> str:
        sql = "SELECT * FROM spans WHERE kind = 'task' AND task = ?"
        if not include_errors:
            sql += " AND status = 'ok'"
        return sql + " ORDER BY started_ns, span_id"

    @staticmethod
    def _witness_rows(rows: list[dict]) -> list[Witness]:
        out = []
        for r in rows:
            s = span_from_row(r)
            out.append(Witness(
                input=s["input"] if isinstance(s["input"], dict) else {},
                output=s["output"], status=s["status"], error=s["error"],
                trace_id=s["trace_id"], span_id=s["span_id"], started_ns=s["started_ns"],
                digest=s["digest"], attributes=s["attributes"],
            ))
        return out

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
        row = {"id": rid, "task": record.get("task"), "created_ns": time.time_ns(),
               "verdict": None if record.get("verdict") is None else str(record.get("verdict")),
               "record": canonical_json(record)}
        self._conn.write(lambda db: db.execute(
            "INSERT OR IGNORE INTO eval_runs (id, task, created_ns, verdict, record) VALUES (?, ?, ?, ?, ?)",
            [row["id"], row["task"], row["created_ns"], row["verdict"], row["record"]],
        ))
        return rid

    def get_eval_run(self, id: str) -> dict | None:
        """The record stored under ``id``, or ``None``."""
        rows = self._conn.read("SELECT record FROM eval_runs WHERE id = ?", [id])
        return json.loads(rows[0]["record"]) if rows else None

    def eval_runs(self, task: str | None = None) -> list[dict]:
        """Eval-run rows ``{id, task, created_ns, verdict, record}`` (record parsed), oldest first."""
        sql = "SELECT * FROM eval_runs" + (" WHERE task = ?" if task else "") + " ORDER BY created_ns, id"
        rows = self._conn.read(sql, [task] if task else [])
        return [{**r, "record": json.loads(r["record"])} for r in rows]

    # -- artifacts -----------------------------------------------------------------------

    def put_artifact(self, wasm: bytes, manifest: dict, task: str, generation: int) -> str:
        """Store an artifact; returns its id ``"sha256:<hex>"`` of ``wasm`` (idempotent)."""
        aid = digest_bytes(bytes(wasm))
        man = canonical_json(manifest)
        self._conn.write(lambda db: db.execute(
            "INSERT OR IGNORE INTO artifacts (id, task, generation, created_ns, manifest, wasm) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            [aid, task, int(generation), time.time_ns(), man, sqlite3.Binary(bytes(wasm))],
        ))
        return aid

    def get_artifact(self, id: str) -> StoredArtifact | None:
        """The artifact stored under ``id``, or ``None``."""
        rows = self._conn.read("SELECT * FROM artifacts WHERE id = ?", [id])
        return self._artifact(rows[0]) if rows else None

    def latest_artifact(self, task: str) -> StoredArtifact | None:
        """The artifact of ``task`` with the highest generation (latest stored on ties), or None."""
        rows = self._conn.read(
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
        return self._conn.write(lambda db: db.execute(
            "INSERT INTO ratchet_events (task, kind, generation, artifact_id, created_ns, detail) "
            "VALUES (?, ?, ?, ?, ?, ?)", [task, kind, generation, artifact_id, time.time_ns(), text]).lastrowid)

    def ratchet_events(self, task: str) -> list[dict]:
        """The ratchet log of ``task``, oldest first: ``{id, task, kind, generation,
        artifact_id, created_ns, detail}`` (detail parsed)."""
        rows = self._conn.read("SELECT * FROM ratchet_events WHERE task = ? ORDER BY id", [task])
        return [{**r, "detail": json.loads(r["detail"])} for r in rows]

    def installed_generation(self, task: str) -> tuple[int, str] | None:
        """``(generation, artifact id)`` the ratchet log says is installed now (the last
        ``install``, unless a later ``rollback`` took it out), or None."""
        rows = self._conn.read(
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
        rows = self._conn.read(sql, [task] if task else [])
        return digest([r["digest"] for r in rows])

    def verify(self) -> VerifyReport:
        """Re-derive every stored digest (spans, traces, eval-run ids, artifact ids).

        Returns a :class:`VerifyReport`; ``report.ok`` is False on any mismatch (the CLI exits
        non-zero), and ``report.raise_for_mismatch()`` raises :class:`IntegrityError`.
        """
        mismatches: list[dict] = []

        def check(table: str, key: str, stored: str, derive: Callable[[], str]) -> None:
            try:
                d = derive()
            except (TypeError, ValueError, IntegrityError) as exc:
                d = f"<unreadable: {exc}>"
            if d != stored:
                mismatches.append({"table": table, "id": key, "stored": stored, "derived": d})

        def read_all(q: Callable[..., list[dict]]) -> tuple[list[dict], ...]:
            return (q("SELECT * FROM spans ORDER BY started_ns, span_id"), q("SELECT * FROM traces"),
                    q("SELECT id, record FROM eval_runs"), q("SELECT id, wasm FROM artifacts"),
                    q("SELECT key, value FROM meta"), q("SELECT name FROM sqlite_master WHERE type = 'trigger'"))

        # one snapshot: a recorder committing meanwhile can never look like a deleted row
        spans, traces, evals, arts, meta_rows, trigger_rows = self._conn.snapshot(read_all)
        meta = {r["key"]: r["value"] for r in meta_rows}
        for r in spans:
            check("spans", r["span_id"], r["digest"], lambda r=r: span_digest(span_from_row(r)))
        for r in traces:
            check("traces", r["trace_id"], r["digest"], lambda r=r: trace_digest(trace_from_row(r)))
        for r in evals:
            check("eval_runs", r["id"], r["id"], lambda r=r: digest(json.loads(r["record"])))
        for r in arts:
            check("artifacts", r["id"], r["id"], lambda r=r: digest_bytes(bytes(r["wasm"])))
        # rows deleted behind the store's back: the counters kept at ingest no longer match
        for key, table, n in (("span_count", "spans", len(spans)), ("trace_count", "traces", len(traces))):
            if key in meta and int(meta[key]) != n:
                mismatches.append({"table": table, "id": "*", "stored": f"{meta[key]} rows ingested",
                                   "derived": f"{n} rows present"})
        triggers = {r["name"] for r in trigger_rows}
        for table, _op, name in immutability_triggers():
            if name not in triggers:
                mismatches.append({"table": table, "id": "*", "stored": f"trigger {name}",
                                   "derived": "missing (rows may have been changed)"})
        return VerifyReport(
            ok=not mismatches, spans=len(spans), traces=len(traces), eval_runs=len(evals),
            artifacts=len(arts), mismatches=mismatches,
            store_digest=digest([r["digest"] for r in spans]),
        )
