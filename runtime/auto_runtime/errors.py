"""Errors raised by the Auto runtime.

The root of the whole ``AutoError`` tree lives here, because the runtime is the one distribution
every host installs; the compiler (``auto.errors``) extends this tree rather than starting its
own, so ``except AutoError`` catches both::

    AutoError
    ├── ArtifactError            the .wasm file cannot be trusted or loaded
    │   ├── MalformedArtifact    not WebAssembly, truncated, or not decodable
    │   ├── ManifestError        auto.manifest section missing, corrupt, or inconsistent
    │   ├── ArtifactIdMismatch   sha-256 of the bytes differs from the recorded artifact id
    │   ├── CapabilityError      an import the manifest does not declare (or vice versa)
    │   └── UntrustedArtifact    a trust key is configured and no trusted signature covers the bytes
    ├── LimitError               the sandbox stopped a call
    │   ├── FuelExhausted        the call ran out of fuel (instruction budget)
    │   ├── MemoryLimitExceeded  memory grew past the limit, or the module declares too much
    │   └── CallTimeout          the call ran past its wall-clock deadline
    ├── TrapError                the artifact trapped (unreachable, out-of-bounds, ...)
    ├── ToolCallError            a tool call of a capability artifact was refused (budget, schema,
    │                            undeclared tool, effect before the commit, a tool that raised, hung
    │                            or returned a wrong type, no recording in a replay)
    ├── InputSchemaError         a task input violates the manifest's input schema
    ├── OutputError              the artifact returned bytes that are not a valid answer
    ├── SchemaDefinitionError    (auto_runtime.schema) a JSON schema the validator does not support
    └── GuardConfigError         (auto_runtime.guard.base) a manifest guard entry cannot be used
    (the compiler adds StoreError, RecordError, GateRefused, ContractError, UsageError, ...: the
    whole tree is drawn in auto.errors; runtime/tests/test_errors.py checks this drawing)

Every error carries a human-readable message naming what was wrong and, where it applies, the
file or field at fault.
"""

from __future__ import annotations


class AutoError(Exception):
    """Root of every error Auto raises on purpose."""


class ArtifactError(AutoError):
    """The artifact cannot be trusted or loaded."""


class MalformedArtifact(ArtifactError):
    """The bytes are not a decodable WebAssembly module."""


class ManifestError(ArtifactError):
    """The ``auto.manifest`` custom section is missing, not canonical JSON, or inconsistent."""


class ArtifactIdMismatch(ArtifactError):
    """The sha-256 of the artifact's bytes differs from the id it was deployed under."""


class CapabilityError(ArtifactError):
    """The module imports something its manifest does not declare, or the reverse."""


class UntrustedArtifact(ArtifactError):
    """A trust policy is in force and the artifact is unsigned, its signature does not match its
    bytes, or it is signed only by keys that are not trusted."""


class LimitError(AutoError):
    """The sandbox stopped a call (fuel, memory or time)."""


class FuelExhausted(LimitError):
    """The call consumed its whole fuel budget."""


class MemoryLimitExceeded(LimitError):
    """The module tried to grow (or declared) memory beyond the allowed limit."""


class CallTimeout(LimitError):
    """The call ran past its wall-clock deadline (epoch interruption)."""


class TrapError(AutoError):
    """The artifact trapped for a reason other than a sandbox limit."""


class ToolCallError(AutoError):
    """The host refused a tool call of a capability artifact; the call was stopped.

    ``reason`` is the session's one-line reason (also the message).
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class InputSchemaError(AutoError):
    """A task input violates the input JSON schema declared in the manifest."""


class OutputError(AutoError):
    """The artifact returned output that is not valid canonical JSON of the declared shape."""
