"""The typed records the store hands out: witnesses, stored eval runs and artifacts, ratchet
events, verification reports."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from auto_runtime.manifest import Manifest

from auto.errors import IntegrityError


@dataclass(frozen=True)
class Witness:
    """One observed execution of a task (a task span), as the census and distiller see it.

    Attributes:
        input: the bound arguments, e.g. ``{"ticket": "..."}``.
        output: the task's return value (JSON), ``None`` for failed executions.
        status: ``"ok"`` or ``"error"``.
        error: ``{"type": ..., "message": ...}`` for failed executions, else ``None``.
        trace_id, span_id: where it was recorded.
        started_ns: start time (ns since the epoch).
        digest: the span digest (provenance).
        attributes: the span attributes (``auto.*``, e.g. cost, llm call count).
        seq: the span's insertion number in its store (None when not read from one).
        input_text, output_text: the canonical JSON of ``input`` / ``output`` as stored (None
            when not read from a store), so readers need not serialize them again.
    """

    input: dict
    output: Any
    status: str
    error: dict | None
    trace_id: str
    span_id: str
    started_ns: int
    digest: str = ""
    attributes: dict = field(default_factory=dict)
    seq: int | None = None
    input_text: str | None = field(default=None, repr=False, compare=False)
    output_text: str | None = field(default=None, repr=False, compare=False)

    @classmethod
    def of_row(cls, *, input: dict, output: Any, status: str, error: dict | None, trace_id: str, span_id: str,
               started_ns: int, digest: str, attributes: dict, seq: int | None, input_text: str | None,
               output_text: str | None) -> "Witness":
        """The witness ``Witness(...)`` builds from these fields (all given), without the frozen
        dataclass's ``object.__setattr__`` per field: a store hands out hundreds of thousands."""
        w = object.__new__(cls)
        w.__dict__.update(input=input, output=output, status=status, error=error, trace_id=trace_id,
                          span_id=span_id, started_ns=started_ns, digest=digest, attributes=attributes, seq=seq,
                          input_text=input_text, output_text=output_text)
        return w


@dataclass(frozen=True)
class StoredArtifact:
    """A compiled artifact as the store keeps it (a row of ``artifacts``; to run one, load
    ``wasm`` with :meth:`auto_runtime.Artifact.load`).

    Attributes:
        id: ``"sha256:<hex>"`` of ``wasm``.
        task, generation: what it was compiled for.
        created_ns: when it was stored (ns since the epoch).
        manifest: the manifest (parsed JSON).
        wasm: the artifact's bytes.
    """

    id: str
    task: str
    generation: int
    created_ns: int
    manifest: dict
    wasm: bytes

    @property
    def typed_manifest(self) -> Manifest:
        """The typed view of :attr:`manifest` (:meth:`auto_runtime.manifest.Manifest.of`)."""
        return Manifest.of(self.manifest)


@dataclass(frozen=True)
class StoredEvalRun:
    """An eval run as the store keeps it (a row of ``eval_runs``; to read its checks by name,
    :meth:`auto.gate.EvalRun.from_record` of ``record``).

    Attributes:
        id: ``digest(record)``, its content address.
        task: the record's ``task`` (None when it had none).
        created_ns: when it was first stored (ns since the epoch).
        verdict: the record's ``verdict`` as text (``"pass"``, ``"refuse"``), None when it had none.
        record: the record (parsed JSON).
    """

    id: str
    task: str | None
    created_ns: int
    verdict: str | None
    record: dict


class EventKind(str, Enum):
    """What a row of the ratchet log records (stored as the value)."""

    COMPILE = "compile"
    """A compile attempt (``detail.verdict`` pass / refuse / error / timeout / crashed / skipped,
    its trigger and evidence)."""
    INSTALL = "install"
    """A generation was swapped in (``detail.parent``)."""
    ROLLBACK = "rollback"
    """A generation was taken out (``detail.to``: the generation installed instead, or None)."""
    ALARM = "alarm"
    """A monitor's alarm (``detail.monitor``, ``detail.reason``)."""
    INSTALL_FAILED = "install-failed"
    """A generation that passed its gate could not be loaded."""
    INSTALL_SKIPPED = "install-skipped"
    """A generation that passed its gate would answer less than the installed one."""


@dataclass(frozen=True)
class RatchetEvent:
    """One row of the ratchet log (a row of ``ratchet_events``; insert-only).

    Attributes:
        id: its position in the log (increasing).
        task: the task it is about. kind: what it records.
        generation, artifact_id: the generation and artifact it names (None when none).
        created_ns: when it was written (ns since the epoch).
        detail: the row's JSON detail (parsed), keys per kind (:class:`EventKind`).
    """

    id: int
    task: str
    kind: EventKind
    generation: int | None
    artifact_id: str | None
    created_ns: int
    detail: dict


@dataclass
class VerifyReport:
    """The result of :meth:`Store.verify <auto.store.Store.verify>`.

    Attributes:
        ok: no mismatch was found.
        spans, traces, eval_runs, artifacts: how many rows were re-derived.
        mismatches: one dict per bad row: ``{"table", "id", "stored", "derived"}``.
        store_digest: :meth:`Store.digest <auto.store.Store.digest>` (of the scope's spans, for a
            task- or kind-scoped check) at verification time.
        scope: ``"*"`` (the whole store), ``"task:<name>"`` or ``"kind:<kind>"``.
        since_seq: spans with ``seq`` above this were checked (0: all of the scope).
    """

    ok: bool
    spans: int
    traces: int
    eval_runs: int
    artifacts: int
    mismatches: list[dict]
    store_digest: str
    scope: str = "*"
    since_seq: int = 0

    def raise_for_mismatch(self) -> None:
        """Raise :class:`~auto.errors.IntegrityError` naming the first mismatches, if any."""
        if not self.ok:
            first = ", ".join(f"{m['table']}:{m['id']}" for m in self.mismatches[:5])
            raise IntegrityError(f"{len(self.mismatches)} stored digest(s) do not match their content ({first})")
