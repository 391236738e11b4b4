"""Checking a store: every stored digest re-derived from one snapshot, or one task's or one
kind's rows added since their last check (the watermark ``verified_through:<scope>`` in
``meta``), with the row counters and the immutability triggers.
"""

from __future__ import annotations

import hashlib
import json
import operator
from typing import Any, Callable

from auto.canonical import digest, digest_bytes
from auto.errors import ArgumentError, IntegrityError
from auto.store.base import StoreBase
from auto.store.normalize import (
    ROW_COLUMNS,
    ROW_DIGEST,
    ROW_INPUT_ID,
    span_text_of_values,
    trace_digest,
    trace_from_row,
)
from auto.store.payloads import DEFLATE_DICT, LRU, decode
from auto.store.records import VerifyReport
from auto.store.schema import immutability_triggers

VERIFY_BATCH = 2000
"""Span rows re-derived per batch by a check (their payloads are read in one query per 500)."""

VERIFY_PAYLOAD_CACHE = 200_000
"""Payload ids a check remembers as already re-derived within its snapshot."""

class _Checked(dict):
    """Payload ids checked within one snapshot (``get`` / ``put`` as :class:`LRU`, unbounded)."""

    put = dict.__setitem__


_STORE_ORDER = operator.itemgetter(ROW_COLUMNS.index("started_ns"), ROW_COLUMNS.index("span_id"))
"""The store order of a :data:`~auto.store.normalize.ROW_COLUMNS` row: ``(started_ns, span_id)``."""



class Verification(StoreBase):
    """The store's integrity checks (part of :class:`~auto.store.Store`)."""

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
        sd = digest([r[ROW_DIGEST] for r in rows])
        VerifyReport(ok=not mismatches, spans=len(new), traces=0, eval_runs=0, artifacts=0, mismatches=mismatches,
                     store_digest=sd, scope=scope, since_seq=since).raise_for_mismatch()
        if new:
            last = max(r[0] for r in new)
            self._conn.write(lambda tx: self._set_meta(tx, wm_key, str(last)))
        return rows, texts, sd

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
        ids = {pid for r in batch for pid in r[ROW_INPUT_ID:ROW_DIGEST]} - {None}
        texts = self._verified_texts(q, [i for i in ids if not payloads_ok.get(i)], mismatches, payloads_ok)
        texts.update(self.payload_texts([i for i in ids if i not in texts and payloads_ok.get(i)]))
        sha = hashlib.sha256
        for r in batch:
            try:
                d = "sha256:" + sha(span_text_of_values(r, texts).encode("utf-8")).hexdigest()
            except (TypeError, ValueError, KeyError) as exc:
                d = f"<unreadable: {exc}>"
            if d != r[ROW_DIGEST]:
                mismatches.append({"table": "spans", "id": r[1], "stored": r[ROW_DIGEST], "derived": d})
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

