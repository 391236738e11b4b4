"""A store's evidence of compiles: eval runs (content-addressed gate records) and artifacts
(content-addressed WebAssembly with its manifest). Both are stored once per content; every read
takes the read barrier (:mod:`auto.store.base`).
"""

from __future__ import annotations

import json
import time

from auto.canonical import canonical_json, digest, digest_bytes
from auto.errors import IngestError
from auto.store.base import StoreBase
from auto.store.records import StoredArtifact, StoredEvalRun


class Evidence(StoreBase):
    """The store's eval runs and artifacts (part of :class:`~auto.store.Store`)."""

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

    def eval_runs(self, task: str | None = None) -> list[StoredEvalRun]:
        """The stored eval runs (of ``task``, when given), oldest first."""
        sql = "SELECT * FROM eval_runs" + (" WHERE task = ?" if task else "") + " ORDER BY created_ns, id"
        rows = self._read(sql, [task] if task else [])
        return [StoredEvalRun(id=r["id"], task=r["task"], created_ns=r["created_ns"], verdict=r["verdict"],
                              record=json.loads(r["record"])) for r in rows]

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
        return [self._artifact(r) for r in self._read(sql, [task] if task else [])]

    @staticmethod
    def _artifact(r: dict) -> StoredArtifact:
        return StoredArtifact(id=r["id"], task=r["task"], generation=r["generation"], created_ns=r["created_ns"],
                              manifest=json.loads(r["manifest"]), wasm=bytes(r["wasm"]))
