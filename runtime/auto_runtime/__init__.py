"""auto_runtime: load and run Auto artifacts (sandboxed .wasm), with guards and deopt.

Deploy hosts install only this distribution (it depends on wasmtime and numpy, nothing else).

Public API::

    Artifact.load(path_or_bytes, expected_id=None, limits=None, trust=None, tools=None) -> Artifact
    TrustPolicy.from_files(paths) / TrustPolicy.from_env()   # refuse unsigned or mis-signed artifacts
    Artifact.call(input_obj) -> dict          Artifact.call_batch(inputs) -> list[dict]
    Limits(fuel, memory_bytes, timeout_ms)
    TieredTask(artifact, reference, capture=None, tools=None, tool_budget=None)(input_obj) -> CallResult
    TieredTask.decide(input_obj) -> CallResult   TieredTask.capture_deopt(input_obj, answer, result)
    TieredTask.batch(inputs) -> list[CallResult]      TieredTask.swap(artifact)
    TieredTask.tighten(reason)   TieredTask.audit -> ShadowAudit (audit_rate=, audit_seed=, audit_max=)
    build_guard(manifest_guard) -> Guard      compile_schema(schema) -> validate(obj)
    ToolBudget(calls, wall_ms)    Replay(recordings)      # tool capabilities (auto_runtime.tools)

The artifact contract, for compilers (imported from the submodules; stdlib only)::

    auto_runtime.manifest.append_manifest(code, manifest) -> bytes    # the auto.manifest section
    auto_runtime.manifest.read_manifest(wasm) -> dict                 # the loader's checks
    auto_runtime.manifest.manifest_digest(manifest) -> str            # sha256: of its canonical JSON
    auto_runtime.manifest.Interface(input, output).to_dict()          # sections the compiler builds typed
    auto_runtime.manifest.Capability(module, name).to_dict()
    auto_runtime.jsonio.canonical_text(obj) -> str                    # canonical JSON
    auto_runtime.wasm_sections.custom_section(name, payload) -> bytes # section framing, LEB128
    auto_runtime.digest.digest_bytes(data) -> str                     # "sha256:<hex>"

The errors are imported eagerly; everything else loads on first attribute access, so
``import auto_runtime.errors`` (which the compiler's error tree does) stays cheap and does not
import wasmtime or numpy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from auto_runtime.errors import (
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

__version__ = "0.1.0"

_LAZY = {
    "Artifact": "auto_runtime.artifact",
    "Limits": "auto_runtime.sandbox",
    "DEFAULT_FUEL": "auto_runtime.sandbox",
    "DEFAULT_MEMORY_BYTES": "auto_runtime.sandbox",
    "DEFAULT_TIMEOUT_MS": "auto_runtime.sandbox",
    "TieredTask": "auto_runtime.tiered",
    "CallResult": "auto_runtime.tiered",
    "ShadowAudit": "auto_runtime.audit",
    "Guard": "auto_runtime.guard",
    "GuardDecision": "auto_runtime.guard",
    "build_guard": "auto_runtime.guard",
    "register_guard": "auto_runtime.guard",
    "compile_schema": "auto_runtime.schema",
    "ToolBudget": "auto_runtime.tools",
    "Replay": "auto_runtime.tools",
    "TrustPolicy": "auto_runtime.signing",
}

if TYPE_CHECKING:  # pragma: no cover
    from auto_runtime.artifact import Artifact
    from auto_runtime.audit import ShadowAudit
    from auto_runtime.guard import Guard, GuardDecision, build_guard, register_guard
    from auto_runtime.sandbox import DEFAULT_FUEL, DEFAULT_MEMORY_BYTES, DEFAULT_TIMEOUT_MS, Limits
    from auto_runtime.schema import compile_schema
    from auto_runtime.signing import TrustPolicy
    from auto_runtime.tiered import CallResult, TieredTask
    from auto_runtime.tools import Replay, ToolBudget


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'auto_runtime' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "Artifact", "Limits", "TieredTask", "CallResult", "ShadowAudit",
    "Guard", "GuardDecision", "build_guard", "register_guard", "compile_schema",
    "DEFAULT_FUEL", "DEFAULT_MEMORY_BYTES", "DEFAULT_TIMEOUT_MS",
    "AutoError", "ArtifactError", "MalformedArtifact", "ManifestError", "ArtifactIdMismatch",
    "CapabilityError", "LimitError", "FuelExhausted", "MemoryLimitExceeded", "CallTimeout",
    "TrapError", "InputSchemaError", "OutputError", "ToolCallError", "ToolBudget", "Replay",
    "UntrustedArtifact", "TrustPolicy",
]
