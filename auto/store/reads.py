"""Reading a store: spans, traces and payloads (whole, filtered or streamed for export), row
counts, tasks, the store digest, and the census as the database groups it
(:mod:`auto.store.census_sql`). Every read takes the read barrier (:mod:`auto.store.base`).
"""

from __future__ import annotations

from typing import Any, Iterator

from auto.canonical import digest
from auto.errors import IntegrityError
from auto.store.base import StoreBase
from auto.store.census_sql import census_params, census_site_sql, census_sql, model_call_census_sql
from auto.store.normalize import SPAN_SELECT, span_from_row, trace_from_row
from auto.store.payloads import PayloadMismatch


class Reads(StoreBase):
    """The store's reads of spans, traces, payloads and the census (part of :class:`~auto.store.Store`)."""

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

    def span_watermark(self, kind: str) -> tuple[int, int]:
        """``(count, largest seq)`` of the spans of ``kind``: spans are insert-only, so equal
        watermarks mean the same rows (a cache of what was read from them stays valid)."""
        r = self._read("SELECT count(*) AS n, max(seq) AS last FROM spans WHERE kind = ?", [kind])[0]
        return int(r["n"]), int(r["last"] or 0)

    # -- the census ----------------------------------------------------------------------

    def census_rows(self, task: str | None = None, exclude_kind: str | None = None) -> Iterator[tuple]:
        """The census's grouped rows, streamed from the database (:func:`~auto.store.census_sql.census_sql`):
        ``(site, task, kind, input_id, status, output_id, n, first_ns)`` ordered by site, then
        input id; payload ids resolve through :meth:`payload_texts`. Memory is bounded by the
        database's sort, not by the number of spans. ``task``: only that task's spans;
        ``exclude_kind``: leave out the spans of that kind."""
        sql = census_sql(task is not None, exclude_kind is not None)
        return self._stream(sql, census_params(task, exclude_kind), size=10_000)

    def census_site_rows(self, task: str | None = None, exclude_kind: str | None = None) -> list[tuple]:
        """The census aggregated per site in the database (:func:`~auto.store.census_sql.census_site_sql`): a few rows
        per site, none per input or span. ``task``, ``exclude_kind``: as :meth:`census_rows`."""
        sql = census_site_sql(task is not None, exclude_kind is not None)
        return list(self._stream(sql, census_params(task, exclude_kind), size=10_000))

    def model_call_rows(self, kind: str, task: str | None = None) -> Iterator[tuple]:
        """The census's observations of the spans of ``kind``, grouped by distinct request
        (:func:`~auto.store.census_sql.model_call_census_sql`), streamed; payload ids resolve through :meth:`payload_texts`."""
        return self._stream(model_call_census_sql(task is not None), census_params(task, kind), size=10_000)


    def digest(self, task: str | None = None) -> str:
        """The store digest: ``digest([span digests ordered by (started_ns, span_id)])``.

        With ``task``, only the spans whose task column is ``task``. Independent of insertion
        order, so two stores holding the same spans have the same digest.
        """
        sql = "SELECT digest FROM spans" + (" WHERE task = ?" if task else "") + " ORDER BY started_ns, span_id"
        rows = self._read(sql, [task] if task else [])
        return digest([r["digest"] for r in rows])
