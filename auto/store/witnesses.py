"""A store's witnesses: the successful task spans of a task as typed records, read alone or
in the same snapshot as their integrity check, and the recorded sets of witnesses a compile read.
"""

from __future__ import annotations

import time
from typing import Any

from auto.canonical import digest
from auto.errors import IntegrityError
from auto.store.normalize import ROW_COLUMNS, ROW_DIGEST, ROW_INPUT_ID, ROW_KIND, ROW_STATUS, column_json
from auto.store.reads import Reads
from auto.store.records import Witness
from auto.store.verification import Verification

_UNSET = object()


class Witnesses(Verification, Reads):
    """The store's witness reads and witness sets (part of :class:`~auto.store.Store`)."""

    def witnesses(self, task: str, include_errors: bool = False) -> list[Witness]:
        """The task spans of ``task`` as :class:`Witness` records, ordered by start time.

        By default only successful executions (status ``ok``: a *witness* in the architecture's
        words); ``include_errors=True`` adds failed ones (``output`` None, ``error`` set).
        """
        return self._witness_rows(self._rows(self._witness_sql(include_errors), [task]))

    def witnesses_after(self, task: str, seq: int) -> list[Witness]:
        """The successful task spans of ``task`` inserted after the span numbered ``seq`` (their
        :attr:`Witness.seq` is larger), in insertion order: what other processes wrote since a
        reader last looked (0: all of them)."""
        sql = (f"SELECT {', '.join(ROW_COLUMNS)} FROM spans WHERE kind = 'task' AND task = ? AND status = 'ok' "
               "AND seq > ? ORDER BY seq")
        return self._witness_rows(self._rows(sql, [task, seq]))

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
        return self._witness_rows([r for r in rows if r[ROW_KIND] == "task" and r[ROW_STATUS] == "ok"], texts), sd

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
        need = {pid for r in rows for pid in r[ROW_INPUT_ID:ROW_DIGEST]} - {None}
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
