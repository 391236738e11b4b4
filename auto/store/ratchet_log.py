"""The ratchet's log in the store: one insert-only row per compile attempt, install, rollback
and alarm (:class:`~auto.store.records.RatchetEvent`), and the generation it says is installed.
"""

from __future__ import annotations

import json
import time
from typing import Any

from auto.canonical import canonical_json
from auto.errors import IngestError
from auto.store.base import StoreBase
from auto.store.records import EventKind, RatchetEvent


def _kind(text: str) -> Any:
    try:
        return EventKind(text)
    except ValueError:
        return text


class RatchetLog(StoreBase):
    """The store's ratchet log (part of :class:`~auto.store.Store`)."""

    def add_ratchet_event(self, task: str, kind: EventKind | str, *, generation: int | None = None,
                          artifact_id: str | None = None, detail: dict | None = None) -> int:
        """Append one row to the ratchet log (insert-only, like spans); returns its id.

        ``kind``: an :class:`~auto.store.records.EventKind` (or its value), which says what the
        ``detail`` holds.

        Raises:
            IngestError: ``kind`` is not an :class:`~auto.store.records.EventKind`, or ``detail``
                is not canonical JSON.
        """
        try:
            kind = EventKind(kind)
        except ValueError:
            raise IngestError(f"ratchet event kind {kind!r} is not one of "
                              f"{', '.join(k.value for k in EventKind)}") from None
        try:
            text = canonical_json(detail or {})
        except (TypeError, ValueError) as exc:
            raise IngestError(f"ratchet event detail is not JSON: {exc}") from None
        return self._conn.write(lambda tx: tx.query(
            "INSERT INTO ratchet_events (task, kind, generation, artifact_id, created_ns, detail) "
            "VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
            [task, kind.value, generation, artifact_id, time.time_ns(), text])[0][0])

    def ratchet_events(self, task: str) -> list[RatchetEvent]:
        """The ratchet log of ``task``, oldest first. A kind this version does not know (a row
        written by a newer one) is kept as its text."""
        rows = self._read("SELECT * FROM ratchet_events WHERE task = ? ORDER BY id", [task])
        return [RatchetEvent(id=r["id"], task=r["task"], kind=_kind(r["kind"]), generation=r["generation"],
                             artifact_id=r["artifact_id"], created_ns=r["created_ns"], detail=json.loads(r["detail"]))
                for r in rows]

    def installed_generation(self, task: str) -> tuple[int, str] | None:
        """``(generation, artifact id)`` the ratchet log says is installed now (the last
        ``install``, unless a later ``rollback`` took it out), or None."""
        rows = self._read(
            "SELECT kind, generation, artifact_id, detail FROM ratchet_events WHERE task = ? "
            "AND kind IN ('install', 'rollback') ORDER BY id DESC LIMIT 1", [task])
        if not rows or rows[0]["kind"] != "install" or rows[0]["artifact_id"] is None:
            return None
        return int(rows[0]["generation"]), rows[0]["artifact_id"]
