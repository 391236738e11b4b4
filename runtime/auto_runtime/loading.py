"""Loading and verifying one artifact's bytes (.wasm + ``auto.manifest``) before its first call,
per the ABI in docs/architecture.md.

Load order (each step's error named):

1. read the bytes (:class:`ArtifactError` if unreadable; :class:`MalformedArtifact` above
   :data:`MAX_ARTIFACT_BYTES`); id = ``"sha256:" + hex`` of the bytes;
2. ``expected_id`` given and different -> :class:`ArtifactIdMismatch`; a ``trust`` policy given
   and no trusted signature over the bytes -> :class:`UntrustedArtifact`
   (:mod:`auto_runtime.signing`);
3. parse the container (:mod:`auto_runtime.wasm_sections`) -> :class:`MalformedArtifact`;
4. exactly one ``auto.manifest`` section, canonical JSON, required keys -> :class:`ManifestError`;
5. declared memory: 64-bit or shared memory -> :class:`MalformedArtifact`; initial size above
   ``limits.memory_bytes`` -> :class:`MemoryLimitExceeded`;
6. imports vs ``capabilities``: an undeclared import, a declared capability not imported, a
   non-function capability, or one the host does not provide -> :class:`CapabilityError`;
   tool capabilities (:mod:`auto_runtime.tools`): the ``auto.tool_call`` / ``auto.tool_result``
   / ``auto.commit`` imports are provided by the runtime itself, only with a ``tools``
   declaration, with the ABI's signatures; the host's ``tools`` (when given) must match the
   declared tools exactly -> :class:`CapabilityError` (:class:`ManifestError` for a malformed
   declaration);
7. compile with the shared engine (fuel + epoch interruption) -> :class:`MalformedArtifact`;
8. ABI exports present with the ABI's types -> :class:`MalformedArtifact`; the input schema is
   supported -> :class:`ManifestError`;
9. instantiate once (a start function runs under the same limits as a call);
10. a declared exact-match table (``model.table``): read from the bytes, digest and index
    checked, a sample of its entries run through the code and compared
    (:mod:`auto_runtime.table`) -> :class:`ManifestError`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Mapping

import wasmtime

from auto_runtime import wasm_sections
from auto_runtime.digest import PREFIX, digest_bytes
from auto_runtime.errors import (
    ArtifactError,
    ArtifactIdMismatch,
    CapabilityError,
    MalformedArtifact,
    ManifestError,
    MemoryLimitExceeded,
)
from auto_runtime.manifest import (
    MANIFEST_SECTION,
    check_manifest_digest,
    decode_manifest,
    declared_capabilities,
    declared_exports,
    manifest_payload,
)
from auto_runtime.sandbox import Limits, default_call_path, shared_engine
from auto_runtime.signing import TrustPolicy, read_signatures, sidecar_path
from auto_runtime.table import check_against_code, read_table
from auto_runtime.tools import (
    COMMIT,
    TOOL_CALL,
    TOOL_MODULE,
    TOOL_RESULT,
    ToolDecl,
    ToolRefused,
    check_host_tools,
    tool_decls,
)

__all__ = ["HostFunctions", "MAX_ARTIFACT_BYTES", "TABLE_FUEL_FACTOR", "load_artifact"]

MAX_ARTIFACT_BYTES = 64 * 1024 * 1024
"""Largest artifact file accepted, in bytes (a specialist is tens of KB to a few MB)."""

HostFunctions = Mapping[Any, Callable[..., Any]]
"""Host functions for capability imports, keyed ``(module, name)`` or ``"module.name"``."""

_I32 = wasmtime.ValType.i32()
_I64 = wasmtime.ValType.i64()
_FUNC_SIGS = {
    "alloc": ([_I32], [_I32]),
    "run": ([_I32, _I32], [_I64]),
    "run_batch": ([_I32, _I32], [_I64]),
}
_TOOL_SIGS = {
    TOOL_CALL: ([_I32, _I32], [_I32]),
    TOOL_RESULT: ([_I32], [_I32]),
    COMMIT: ([_I32, _I32], [_I32]),
}
"""The tool imports' signatures (module :data:`~auto_runtime.tools.TOOL_MODULE`)."""



def load_artifact(cls: Any, path_or_bytes: str | os.PathLike | bytes | bytearray | memoryview,
                  expected_id: str | None = None, limits: Limits | None = None, *,
                  host_functions: HostFunctions | None = None,
                  call_path: str | None = None, trust: TrustPolicy | None = None,
                  signatures: list[dict[str, Any]] | None = None,
                  tools: Mapping[str, Callable[..., Any]] | None = None,
                  table_fast_path: bool | None = None) -> Any:
    """Load, verify and instantiate an artifact of class ``cls`` (:class:`auto_runtime.artifact.Artifact`,
    whose :meth:`~auto_runtime.artifact.Artifact.load` this is).

    Args:
        path_or_bytes: a path to the ``.wasm`` file, or its bytes.
        expected_id: the ``"sha256:<hex>"`` id it was deployed under; checked when given.
        limits: sandbox limits (defaults: :class:`Limits` ()); an unset ``timeout_ms`` is
            set from the manifest's measured fuel (:meth:`Limits.for_manifest`).
        host_functions: implementations of the manifest's capabilities, keyed
            ``(module, name)`` or ``"module.name"``; each is called with the wasm arguments
            as Python ints/floats. Pure artifacts need none.
        call_path: ``"fast"`` or ``"checked"``; default from
            :func:`auto_runtime.sandbox.default_call_path`.
        trust: when given, the bytes must carry a signature by one of its keys
            (:class:`auto_runtime.signing.TrustPolicy`); checked before anything is parsed.
        signatures: the signature records to check (default: the sidecar file
            ``<path>.sig`` of a path; none for bytes).
        tools: the host's tools for a capability artifact, ``{name: callable}`` called as
            ``tool(**arguments)``; must be exactly the declared tools. ``None``: bind them
            later (``Artifact.bind_tools``) or pass a session per call.
        table_fast_path: answer exact table hits from the table the manifest declares
            (``model.table``), read from the artifact's bytes and verified at load
            (:mod:`auto_runtime.table`), without entering WebAssembly; misses run the code.
            Default: on, unless the environment sets ``AUTO_RUNTIME_TABLE=wasm``; off where
            the fuel budget is under :data:`TABLE_FUEL_FACTOR` times the manifest's measured
            ``fuel_per_call.max`` (the code itself could run out of fuel).

    Returns:
        The artifact, instantiated.

    Raises:
        ArtifactError: the file cannot be read.
        ArtifactIdMismatch: the bytes' id is not ``expected_id``.
        UntrustedArtifact: ``trust`` is given and the artifact is unsigned, mis-signed or
            signed only by untrusted keys (or ``cryptography`` is missing).
        MalformedArtifact: not a (valid) core WebAssembly module, too large, a 64-bit or
            shared memory, a missing or mistyped ABI export, or instantiation failed.
        ManifestError: the manifest is missing, duplicated, not canonical JSON, lacks a
            required key, or has an unsupported input schema; with the table fast path,
            its declared table is malformed, not in the bytes, does not match its digest,
            or is not answered by the code as declared (:func:`auto_runtime.table.read_table`).
        CapabilityError: an import the manifest does not declare, a declared capability
            the module does not import, or one without a host function; tool imports without
            a ``tools`` declaration (or the reverse), or of the wrong signature; ``tools``
            that miss a declared tool or provide one the manifest does not declare.
        MemoryLimitExceeded: the module's initial memory exceeds ``limits.memory_bytes``.
        FuelExhausted, CallTimeout, TrapError: the module's start function failed.
    """
    data, source = _read(path_or_bytes)
    artifact_id, signed_by = _check_identity(data, source, expected_id, trust, signatures)
    info = wasm_sections.parse(data)
    payload = manifest_payload(info, source)
    manifest = decode_manifest(payload, source)
    _check_code_digest(data, payload, manifest, source)
    check_manifest_digest(manifest, source)
    limits = (limits or Limits()).for_manifest(manifest)

    _check_memories(info, limits, source)
    declared = declared_capabilities(manifest)
    host = _normalize_host(host_functions)
    decls = tool_decls(manifest, source)
    tool_imports = _tool_imports(declared, host, decls, source)
    provided = {**host, **{k: _placeholder for k in tool_imports}}
    _check_capabilities(info.imports, declared, provided, source)
    host_tools = check_host_tools(decls, tools, source) if tools is not None else None

    engine = shared_engine()
    try:
        module = wasmtime.Module(engine, data)
    except wasmtime.WasmtimeError as e:
        raise MalformedArtifact(f"{source}: not a valid WebAssembly module: {e}") from None

    import_types = _linked_import_types(module, info, provided, source)

    has_batch = _check_exports(module, declared_exports(manifest), source)
    art = cls(data=data, artifact_id=artifact_id, manifest=manifest, module=module,
              engine=engine, limits=limits, host_functions=host, import_types=import_types,
              has_batch=has_batch, call_path=call_path or default_call_path(), source=source,
              tools=decls, host_tools=host_tools)
    art.signed_by = signed_by
    if table_fast_path is None:
        table_fast_path = os.environ.get("AUTO_RUNTIME_TABLE", "").strip().lower() != "wasm"
    if table_fast_path and not decls and _fuel_covers_table(limits, manifest):
        table = read_table(data, info, manifest, source)
        if table is not None:
            sample = check_against_code(table, art._code_batch_texts, source)
            table.bind_code(art._code_batch_texts, confirmed=sample)
            table.bind_schema(art.validate_input)
            art.table = table
    return art


TABLE_FUEL_FACTOR = 16
"""The table fast path is on only when a call's fuel budget is at least this many times the
manifest's measured ``fuel_per_call.max`` (the default budget when none is recorded): a budget
too small for the code's own lookup makes the code run out of fuel, and the fast path, which
runs no code, must not answer where the code could not."""


def _check_identity(data: bytes, source: str, expected_id: str | None, trust: TrustPolicy | None,
                    signatures: list[dict[str, Any]] | None) -> tuple[str, str | None]:
    """``(artifact id, trusted key id or None)`` of the bytes, checked before anything is parsed:
    the id against ``expected_id``, the signatures (``signatures``, default the sidecar file of a
    path) against ``trust``.

    Raises:
        ArtifactIdMismatch: the id is not ``expected_id``. UntrustedArtifact: see ``TrustPolicy.verify``.
    """
    artifact_id = digest_bytes(data)
    if expected_id is not None and expected_id != artifact_id:
        raise ArtifactIdMismatch(
            f"{source}: artifact id is {artifact_id}, expected {expected_id}"
        )
    signed_by = None
    if trust is not None:
        if signatures is None:
            signatures = [] if source == "<bytes>" else read_signatures(sidecar_path(source))
        signed_by = trust.verify(data, signatures, source)
    return artifact_id, signed_by


def _check_memories(info: wasm_sections.WasmModuleInfo, limits: Limits, source: str) -> None:
    """Refuse memories the ABI does not support (64-bit, shared) or whose initial size is over
    ``limits.memory_bytes``.

    Raises:
        MalformedArtifact: a 64-bit or shared memory. MemoryLimitExceeded: too large a memory.
    """
    for mem in info.memories:
        if mem.is_64:
            raise MalformedArtifact(f"{source}: 64-bit memories are not supported by the ABI")
        if mem.shared:
            raise MalformedArtifact(f"{source}: shared memories are not supported by the ABI")
        if mem.min_bytes > limits.memory_bytes:
            raise MemoryLimitExceeded(
                f"{source}: the module declares an initial memory of {mem.min_bytes} bytes, "
                f"above the limit of {limits.memory_bytes} bytes"
            )


def _tool_imports(declared: list[tuple[str, str]], host: dict[tuple[str, str], Callable[..., Any]],
                  decls: dict[str, ToolDecl], source: str) -> set[tuple[str, str]]:
    """The declared capabilities that are the runtime's tool imports, checked against the tool
    declarations and the host functions.

    Raises:
        CapabilityError: a host function in the tool module, tool imports without tools (or the
            reverse), or an import of the tool module that is not a tool import.
    """
    if any(m == TOOL_MODULE for m, _ in host):
        raise CapabilityError(f"{source}: host functions of module {TOOL_MODULE!r} are the runtime's own tool imports")
    tool_imports = {(m, n) for m, n in declared if m == TOOL_MODULE}
    if tool_imports and not decls:
        raise CapabilityError(f"{source}: declares tool imports {sorted(f'{m}.{n}' for m, n in tool_imports)} but "
                              "no tools")
    if decls and (TOOL_MODULE, TOOL_CALL) not in tool_imports:
        raise CapabilityError(f"{source}: declares tools but not the capability {TOOL_MODULE}.{TOOL_CALL}")
    for m, n in tool_imports:
        if n not in _TOOL_SIGS:
            raise CapabilityError(f"{source}: {m}.{n} is not a tool import (the tool imports are "
                                  f"{', '.join(sorted(_TOOL_SIGS))})")
    return tool_imports


def _linked_import_types(module: wasmtime.Module, info: wasm_sections.WasmModuleInfo,
                         provided: dict[tuple[str, str], Any], source: str) -> list[tuple[str, str, wasmtime.FuncType]]:
    """``(module, name, type)`` of each import as wasmtime sees it (what gets linked), which must
    agree with the parsed imports: each a provided function, tool imports of their signature.

    Raises:
        CapabilityError: an import that is not a declared, provided function, or a tool import
            of the wrong signature. MalformedArtifact: the two readings of the imports disagree.
    """
    import_types: list[tuple[str, str, wasmtime.FuncType]] = []
    for imp in module.imports:
        ty = imp.type
        if not isinstance(ty, wasmtime.FuncType) or (imp.module, imp.name or "") not in provided:
            raise CapabilityError(
                f"{source}: import {imp.module}.{imp.name} is not a declared, provided capability"
            )
        if imp.module == TOOL_MODULE:
            sig = _TOOL_SIGS[imp.name or ""]
            if list(ty.params) != sig[0] or list(ty.results) != sig[1]:
                raise CapabilityError(f"{source}: tool import {imp.module}.{imp.name} must be a function "
                                      f"{_sig_text(sig)}")
        import_types.append((imp.module, imp.name or "", ty))
    if len(import_types) != len(info.imports):  # pragma: no cover - parsers disagree
        raise MalformedArtifact(f"{source}: import section could not be read consistently")
    return import_types


def _fuel_covers_table(limits: Limits, manifest: dict[str, Any]) -> bool:
    from auto_runtime.sandbox import DEFAULT_FUEL, manifest_fuel_max

    need = manifest_fuel_max(manifest)
    return limits.fuel >= (DEFAULT_FUEL if need is None else TABLE_FUEL_FACTOR * need)


def _placeholder(*_args: Any) -> Any:  # pragma: no cover - stands for a runtime-provided import in checks
    raise ToolRefused("placeholder")


def _check_code_digest(data: bytes, payload: bytes, manifest: dict, source: str) -> None:
    """Refuse an artifact whose code bytes no longer match the manifest's ``model.code_digest``.

    The compiler appends ``auto.manifest`` as the last section after the code it digested, so the
    code is every byte before that section. This catches corruption of the code or data sections
    when no artifact id is given; the artifact id (sha-256 of the whole file, kept outside it)
    remains the integrity check against deliberate tampering, manifest included.

    Raises:
        ManifestError: the digest is malformed, the manifest is not the last section, or the code
            does not match.
    """
    model = manifest.get("model")
    expected = model.get("code_digest") if isinstance(model, dict) else None
    if expected is None:
        return
    if not isinstance(expected, str) or not expected.startswith(PREFIX):
        raise ManifestError(f"{source}: model.code_digest is not a sha256 digest")
    tail = wasm_sections.custom_section(MANIFEST_SECTION, payload)
    if not bytes(data).endswith(tail):
        raise ManifestError(f"{source}: {MANIFEST_SECTION} must be the last section to check model.code_digest")
    actual = digest_bytes(bytes(data)[: len(data) - len(tail)])
    if actual != expected:
        raise ManifestError(f"{source}: the code does not match the manifest's code_digest (corrupted or altered bytes)")


def _read(src: Any) -> tuple[bytes, str]:
    if isinstance(src, (bytes, bytearray, memoryview)):
        data = bytes(src)
        if len(data) > MAX_ARTIFACT_BYTES:
            raise MalformedArtifact(f"artifact of {len(data)} bytes exceeds {MAX_ARTIFACT_BYTES} bytes")
        return data, "<bytes>"
    if not isinstance(src, (str, os.PathLike)):
        raise TypeError(f"expected a path or bytes, got {type(src).__name__}")
    path = Path(src)
    try:
        size = path.stat().st_size
        if size > MAX_ARTIFACT_BYTES:
            raise MalformedArtifact(f"{path}: {size} bytes exceeds {MAX_ARTIFACT_BYTES} bytes")
        with open(path, "rb") as f:
            data = f.read(MAX_ARTIFACT_BYTES + 1)
    except OSError as e:
        raise ArtifactError(f"{path}: cannot read artifact: {e.strerror or e}") from None
    if len(data) > MAX_ARTIFACT_BYTES:
        raise MalformedArtifact(f"{path}: exceeds {MAX_ARTIFACT_BYTES} bytes")
    return data, str(path)


def _normalize_host(host: HostFunctions | None) -> dict[tuple[str, str], Callable[..., Any]]:
    out: dict[tuple[str, str], Callable[..., Any]] = {}
    for key, fn in (host or {}).items():
        if isinstance(key, tuple) and len(key) == 2:
            m, n = key
        elif isinstance(key, str) and "." in key:
            m, n = key.split(".", 1)
        else:
            raise TypeError(f"host function key must be (module, name) or 'module.name', got {key!r}")
        if not callable(fn):
            raise TypeError(f"host function {m}.{n} is not callable")
        out[(str(m), str(n))] = fn
    return out


def _check_capabilities(imports: tuple[wasm_sections.Import, ...], declared: list[tuple[str, str]],
                        host: dict[tuple[str, str], Callable[..., Any]], source: str) -> None:
    declared_set = set(declared)
    imported = {(i.module, i.name) for i in imports}
    for imp in imports:
        key = (imp.module, imp.name)
        if key not in declared_set:
            raise CapabilityError(
                f"{source}: imports {imp.kind} {imp.module}.{imp.name}, which the manifest does not "
                "declare under 'capabilities'"
            )
        if imp.kind != "func":
            raise CapabilityError(
                f"{source}: capability {imp.module}.{imp.name} is a {imp.kind} import; only host "
                "functions can be capabilities"
            )
    for m, n in declared:
        if (m, n) not in imported:
            raise CapabilityError(
                f"{source}: manifest declares capability {m}.{n}, which the module does not import"
            )
        if (m, n) not in host:
            raise CapabilityError(
                f"{source}: capability {m}.{n} is declared but the host provides no function for it"
            )


def _check_exports(module: wasmtime.Module, promised: list[str], source: str) -> bool:
    exports = {e.name: e.type for e in module.exports}
    required = ["memory", "alloc", "run"] + [e for e in promised if e not in ("memory", "alloc", "run")]
    for name in required:
        ty = exports.get(name)
        if ty is None:
            raise MalformedArtifact(f"{source}: does not follow the artifact ABI: no export {name!r}")
        if name == "memory":
            if not isinstance(ty, wasmtime.MemoryType):
                raise MalformedArtifact(f"{source}: export 'memory' is not a memory")
            continue
        sig = _FUNC_SIGS.get(name)
        if sig is None:
            continue
        if not isinstance(ty, wasmtime.FuncType) or list(ty.params) != sig[0] or list(ty.results) != sig[1]:
            raise MalformedArtifact(
                f"{source}: does not follow the artifact ABI: export {name!r} must be a function "
                f"{_sig_text(sig)}"
            )
    batch = exports.get("run_batch")
    if batch is not None:
        sig = _FUNC_SIGS["run_batch"]
        if not isinstance(batch, wasmtime.FuncType) or list(batch.params) != sig[0] or list(batch.results) != sig[1]:
            raise MalformedArtifact(
                f"{source}: does not follow the artifact ABI: export 'run_batch' must be a function "
                f"{_sig_text(sig)}"
            )
        return True
    return False


def _sig_text(sig: tuple[list[Any], list[Any]]) -> str:
    return f"({', '.join(map(str, sig[0]))}) -> ({', '.join(map(str, sig[1]))})"
