"""Errors raised by Auto: the whole tree, drawn once.

The root ``AutoError`` and the runtime's branches come from ``auto_runtime.errors`` (the runtime is
installed everywhere; its classes are re-exported here); the compiler's branches are defined in
this module unless a module is named beside them. ``except AutoError`` catches every error Auto
raises on purpose. ``tests/test_errors.py`` checks this drawing against the classes, both ways::

    AutoError                         (auto_runtime.errors)
    ├── ArtifactError                 the .wasm file cannot be trusted or loaded
    │   ├── MalformedArtifact         not WebAssembly, truncated, or not decodable
    │   ├── ManifestError             auto.manifest section missing, corrupt, or inconsistent
    │   ├── ArtifactIdMismatch        sha-256 of the bytes differs from the recorded artifact id
    │   ├── CapabilityError           an import the manifest does not declare (or the reverse)
    │   └── UntrustedArtifact         a trust policy is in force and no trusted signature covers the bytes
    ├── LimitError                    the sandbox stopped a call
    │   ├── FuelExhausted             the call ran out of fuel (instruction budget)
    │   ├── MemoryLimitExceeded       memory grew past the limit, or the module declares too much
    │   └── CallTimeout               the call ran past its wall-clock deadline
    ├── TrapError                     the artifact trapped (unreachable, out-of-bounds, ...)
    ├── ToolCallError                 a tool call of a capability artifact was refused
    ├── InputSchemaError              a task input violates the manifest's input schema
    ├── OutputError                   the artifact returned bytes that are not a valid answer
    ├── SchemaDefinitionError         (auto_runtime.schema) a JSON schema the validator does not support
    ├── GuardConfigError              (auto_runtime.guard.base) a manifest guard entry cannot be used
    ├── UsageError                    bad command-line usage or arguments (exit code 2)
    ├── ArgumentError                 a library function was called with invalid arguments (also a ValueError)
    ├── StoreError                    the trace store cannot be used
    │   ├── NotAStore                 the file is not an SQLite database / not an Auto store
    │   ├── SchemaTooNew              the store was written by a newer Auto (schema version)
    │   ├── IntegrityError            a stored digest does not match its content
    │   ├── IngestError               a batch was rejected (nothing of it was written)
    │   └── InterchangeError          (auto.interchange.parquet) a Parquet / OTLP / auto-v0 file is unreadable or of another schema
    ├── ListenError                   a server cannot listen on its address
    ├── PathRefused                   (auto.proxy.upstream) a proxied request path would leave the upstream's base path (answered 400)
    ├── RecordError                   recording could not proceed (bad task output, ...)
    ├── ReferenceModelError           the reference model (simulator or endpoint) failed
    │   └── ReferenceFailed           the CLI's --reference function raised or answered something that is not JSON
    ├── SpendCapExceeded              a paid call would exceed the spend cap (default cap 0)
    ├── CompileError                  no candidate could be built (no witnesses, one label, ...)
    │   ├── RegexError                (auto.models.program.regex) a pattern outside the safe regex subset
    │   ├── ProgramTypeError          (auto.models.program.types) an ill-typed or ill-formed program
    │   └── SerialError               (auto.models.program.serial) a program's JSON form is malformed
    ├── CodegenError                  lowering to WebAssembly text or assembling it failed
    ├── ContractError                 the contract (file or values) is malformed
    ├── SemanticUnavailable           (auto.guards.semantic) the offline sentence embedding cannot be loaded
    ├── VerificationFailed            ``auto registry verify`` found artifacts that fail verification
    ├── GuardDeclined                 ``auto run`` had no reference and the guard declined (exit code 3)
    └── GateRefused                   the gate rejected the candidate (exit code 3)
        └── RungRefused               one rung of the compile ladder refused (the ladder may go on)

The CLI converts these to messages and exit codes in one place (``auto.cli``): 1 for errors
(``error: <message>``: the message in plain words, never the class name), 2 for ``UsageError``,
``ArgumentError`` and an ``auto run`` input that violates the artifact's input schema, 3 for
``GateRefused`` and ``GuardDeclined``.

Not in the tree, on purpose: internal control-flow signals, each caught inside Auto and turned
into a deopt or a refusal with its reason, never raised to a caller
(``auto.models.program.interp.DeoptSignal``, ``auto.models.region.RegionDeopt``,
``auto.compile.steps.build.RegionRefused``, ``auto_runtime.tools.ToolRefused``,
``auto.store.payloads.PayloadMismatch``: the store reports it as the integrity error naming the
span and column).
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
    ToolCallError,
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


class ReferenceFailed(ReferenceModelError):
    """The ``--reference module:function`` of a CLI command could not be imported, raised, or
    answered a value that is not JSON; the message says which."""


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


class VerificationFailed(AutoError):
    """``auto registry verify`` found artifacts whose bytes or signatures fail verification; the
    message counts them and names the first with its reason."""


class GuardDeclined(AutoError):
    """``auto run`` was given no reference and the artifact's guard declined the input (CLI exit
    code 3); the message is the guard's reason."""


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
        applies: False when the rung steps aside because the task is not of its kind (e.g. the
            region rung for a task whose runs make a single model call): the ladder then neither
            records it among the rungs tried nor cites it.
    """

    def __init__(self, rung: str, reason: str, eval_run_id: str | None = None, *, citation: str | None = None,
                 final: bool = False, applies: bool = True):
        super().__init__(reason, eval_run_id)
        self.rung = rung
        self.citation = citation if citation is not None else (
            f"{reason} (eval run {eval_run_id})" if eval_run_id else reason)
        self.final = final
        self.applies = applies
