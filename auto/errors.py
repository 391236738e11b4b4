"""Errors raised by the Auto compiler and CLI.

The root ``AutoError`` and the artifact/sandbox errors come from ``auto_runtime.errors`` (the
runtime is installed everywhere); this module adds the compiler's branches::

    AutoError                         (auto_runtime.errors)
    ├── ArtifactError ...             (auto_runtime.errors: loading, manifest, capabilities)
    ├── LimitError ...                (auto_runtime.errors: fuel, memory, time)
    ├── TrapError, InputSchemaError, OutputError   (auto_runtime.errors)
    ├── UsageError                    bad command-line usage or arguments (exit code 2)
    ├── StoreError                    the trace store cannot be used
    │   ├── NotAStore                 the file is not an SQLite database / not an Auto store
    │   ├── SchemaTooNew              the store was written by a newer Auto (schema version)
    │   ├── IntegrityError            a stored digest does not match its content
    │   └── IngestError               a batch was rejected (nothing of it was written)
    ├── RecordError                   recording could not proceed (bad task output, ...)
    ├── ReferenceModelError           the reference model (simulator or endpoint) failed
    ├── SpendCapExceeded              a paid call would exceed the spend cap (default cap 0)
    ├── CompileError                  no candidate could be built (no witnesses, one label, ...)
    ├── CodegenError                  lowering to WebAssembly text or assembling it failed
    ├── ContractError                 the contract (file or values) is malformed
    ├── ArgumentError                 a library function was called with invalid arguments
    └── GateRefused                   the gate rejected the candidate (exit code 3)
        └── RungRefused               one rung of the compile ladder refused (the ladder may go on)

The CLI converts these to messages and exit codes in one place (``auto.cli``): 1 for errors,
2 for ``UsageError``, 3 for ``GateRefused`` (and for a guard declining with no reference).
"""

from __future__ import annotations

from auto_runtime.errors import (  # noqa: F401  (re-exported: one tree)
    ArtifactError,
    ArtifactIdMismatch,
    AutoError,
    CallTimeout,
    CapabilityError,
    FuelExhausted,
    InputSchemaError,
    LimitError,
    MalformedArtifact,
    ManifestError,
    MemoryLimitExceeded,
    OutputError,
    TrapError,
    UntrustedArtifact,
)


class UsageError(AutoError):
    """Bad command-line usage or arguments (exit code 2)."""


class StoreError(AutoError):
    """The trace store cannot be used."""


class NotAStore(StoreError):
    """The file is not an SQLite database, or not one written by Auto."""


class SchemaTooNew(StoreError):
    """The store's schema version is newer than this version of Auto understands."""


class IntegrityError(StoreError):
    """A stored digest does not match the content it was computed from."""


class IngestError(StoreError):
    """A batch could not be ingested; the transaction was rolled back, nothing was written."""


class ListenError(AutoError):
    """A server cannot listen on the address it was given (in use, not permitted, not an
    address of this host)."""


class RecordError(AutoError):
    """Recording could not proceed (for example a task result that is not JSON-serializable)."""


class ReferenceModelError(AutoError):
    """The reference model (the simulator or a configured endpoint) failed."""


class SpendCapExceeded(AutoError):
    """A paid call would exceed the configured spend cap (µ$); the default cap is 0."""


class CompileError(AutoError):
    """No candidate could be built from the witnesses (too few, a single label, ...)."""


class CodegenError(AutoError):
    """Lowering a program or model to WebAssembly text, or assembling it, failed."""


class ContractError(AutoError):
    """The contract (TOML) is malformed or names unknown keys."""


class ArgumentError(AutoError, ValueError):
    """A library function was called with invalid arguments (library misuse).

    :class:`UsageError` is raised by the CLI only; library code raises this instead. It is also a
    ``ValueError``, so callers that caught ``ValueError`` before keep working.
    """


class GateRefused(AutoError):
    """The gate rejected the candidate; no artifact was emitted (CLI exit code 3).

    Attributes:
        eval_run_id: content-addressed id of the stored eval run that records the refusal.
        reason: one line saying which check failed and by how much.
        rungs: the compile ladder's rungs tried, with their verdicts and seconds (set by
            :func:`auto.compile.compile_task`; empty otherwise).
    """

    def __init__(self, reason: str, eval_run_id: str | None = None):
        super().__init__(reason)
        self.reason = reason
        self.eval_run_id = eval_run_id
        self.rungs: list[dict] = []


class RungRefused(GateRefused):
    """One rung of the compile ladder refused; the ladder goes on to the next rung unless ``final``.

    Attributes:
        rung: the rung's name (``"program"``, ``"specialist"``, ``"memo"``).
        reason: the rung's own one-line reason.
        eval_run_id: the stored eval run recording the refusal (None when the rung was not
            attempted and stored nothing).
        citation: how a later rung's reason cites this refusal (names the rung and the eval run).
        final: no lower rung may be tried (e.g. every witness has the same output).
    """

    def __init__(self, rung: str, reason: str, eval_run_id: str | None = None, *, citation: str | None = None,
                 final: bool = False):
        super().__init__(reason, eval_run_id)
        self.rung = rung
        self.citation = citation if citation is not None else (
            f"{reason} (eval run {eval_run_id})" if eval_run_id else reason)
        self.final = final
