"""The typed records the store hands out: witnesses, stored artifacts, verification reports."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

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
