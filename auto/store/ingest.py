"""Writing into a store: batches of spans and traces (all or nothing), one captured witness.

Every record is redacted first (:mod:`auto.store.redaction`), checked and digested
(:mod:`auto.store.normalize`), its payloads stored once by content (:mod:`auto.store.payloads`);
traces and spans are insert-only (:class:`~auto.errors.IngestError` on an id re-used with other
content).
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any, Iterable, Iterator

from auto.errors import IngestError
from auto.store.base import StoreBase
from auto.store.normalize import (
    _as_dict,
    dedupe,
    new_span_id,
    new_trace_id,
    normalize_span_texts,
    normalize_trace,
    span_rows,
    trace_row,
)
from auto.store.redaction import redact_records
from auto.store.schema import bump_counter

log = logging.getLogger("auto.store")

_SPAN_INSERT = (
    "INSERT INTO spans (span_id, trace_id, parent_span_id, name, kind, task, site, started_ns, ended_ns, status, "
    "input_id, output_id, error_id, attributes_id, logical_call_id, attempt, digest) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)



class Ingest(StoreBase):
    """The store's writes of spans and traces (part of :class:`~auto.store.Store`)."""

    def _replay_batch(self, spans: list[dict], traces: list[dict]) -> None:
        try:
            self.ingest(spans, traces)
        except IngestError as exc:  # a batch the store refuses stays refused; the others go in
            log.error("auto: a journaled batch of %d span(s) was refused at replay: %s", len(spans), exc)

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
    def bulk_load(self, cache_mib: int = 1024, checkpoint_mib: int = 256) -> Iterator["Ingest"]:
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
