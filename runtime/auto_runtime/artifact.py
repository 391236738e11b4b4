"""Loading and calling one artifact (.wasm + ``auto.manifest``), per the ABI in
docs/architecture.md.

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
7. compile with the shared engine (fuel + epoch interruption) -> :class:`MalformedArtifact`;
8. ABI exports present with the ABI's types -> :class:`MalformedArtifact`; the input schema is
   supported -> :class:`ManifestError`;
9. instantiate once (a start function runs under the same limits as a call).

Calls: :meth:`Artifact.call` encodes the input as canonical JSON, ``alloc``s, writes, calls
``run``, decodes ``(out_ptr << 32) | out_len``, reads and strictly decodes the JSON output.
After any failed call (limit, trap, bad output) the instance is discarded and a fresh Store and
instance are made before the next call, so no state leaks across a failure.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, Callable, Mapping

import wasmtime

from auto_runtime import wasm_sections
from auto_runtime.digest import PREFIX, digest_bytes
from auto_runtime.errors import (
    ArtifactError,
    ArtifactIdMismatch,
    AutoError,
    CapabilityError,
    InputSchemaError,
    MalformedArtifact,
    ManifestError,
    MemoryLimitExceeded,
    OutputError,
    TrapError,
)
from auto_runtime.guard import Guard, build_guard
from auto_runtime.signing import TrustPolicy, read_signatures, sidecar_path
from auto_runtime.jsonio import canonical_text, strict_loads
from auto_runtime.manifest import (
    MANIFEST_SECTION,
    check_manifest_digest,
    decode_manifest,
    declared_capabilities,
    declared_exports,
    manifest_payload,
)
from auto_runtime.sandbox import Limits, Sandbox, default_call_path, shared_engine
from auto_runtime.schema import SchemaDefinitionError, compile_schema

__all__ = ["Artifact", "Limits", "MAX_ARTIFACT_BYTES", "HostFunctions"]

MEASURE_FUEL = 10**10
"""Fuel budget of one measured call (:meth:`Artifact.fuel_per_call`): 200x the default call
budget, so measurement never stops where a real call would still have succeeded."""

MEASURE_TIMEOUT_MS = 60_000.0
"""Wall-clock backstop of one measured call, in ms (measurement runs off the request path)."""

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


def _check_output_item(obj: Any, where: str) -> Any:
    if obj.__class__ is not dict:
        raise OutputError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    if "answer" in obj:
        for key in ("nonconformity", "margin"):
            v = obj.get(key)
            if v is not None and (v.__class__ is bool or not isinstance(v, (int, float))):
                raise OutputError(f"{where}: {key!r} must be a number, got {v!r:.60}")
        return obj
    if isinstance(obj.get("error"), str):
        return obj
    raise OutputError(f"{where}: output object has neither 'answer' nor an 'error' string")


class Artifact:
    """A loaded, verified artifact, ready to call. Create with :meth:`load`.

    Attributes:
        id: ``"sha256:<hex>"`` of the file's bytes.
        manifest: the decoded manifest.
        task: the manifest's ``task``.
        generation: the manifest's ``generation`` (int or None).
        limits: the :class:`Limits` every call runs under.
        guard: the :class:`~auto_runtime.guard.Guard` built from the manifest (never raises).
        validate_input: ``validate_input(obj)`` raises :class:`InputSchemaError` when ``obj``
            violates ``interface.input``.
        call_path: ``"fast"`` (raw ctypes) or ``"checked"`` (``Func.__call__``).
        signed_by: the trusted key id whose signature was checked at load, or None (loaded
            without a trust policy).

    Thread-safe: calls on one artifact are serialized by a lock.
    """

    def __init__(self, *, data: bytes, artifact_id: str, manifest: dict[str, Any],
                 module: wasmtime.Module, engine: wasmtime.Engine, limits: Limits,
                 host_functions: dict[tuple[str, str], Callable[..., Any]],
                 import_types: list[tuple[str, str, wasmtime.FuncType]],
                 has_batch: bool, call_path: str, source: str) -> None:
        self.id = artifact_id
        self.manifest = manifest
        self.task: str = manifest["task"]
        self.generation: int | None = manifest.get("generation")
        self.limits = limits
        self.size_bytes = len(data)
        self.source = source
        self.capabilities = tuple(declared_capabilities(manifest))
        self.has_run_batch = has_batch
        self.guard: Guard = build_guard(manifest.get("guard"))
        try:
            self.validate_input = compile_schema(manifest["interface"]["input"])
        except SchemaDefinitionError as e:
            raise ManifestError(f"{source}: interface.input is not a supported schema: {e}") from None
        self._module = module
        self._engine = engine
        self._host = host_functions
        self._import_types = import_types
        self._call_path = call_path
        self._lock = threading.Lock()
        self._sandbox: Sandbox | None = None
        self._sandbox = self._new_sandbox()
        self.call_path = self._sandbox.call_path
        self.instantiations = 1
        self.signed_by: str | None = None

    # ------------------------------------------------------------------ loading

    @classmethod
    def load(cls, path_or_bytes: str | os.PathLike | bytes | bytearray | memoryview,
             expected_id: str | None = None, limits: Limits | None = None, *,
             host_functions: HostFunctions | None = None,
             call_path: str | None = None, trust: TrustPolicy | None = None,
             signatures: list[dict[str, Any]] | None = None) -> "Artifact":
        """Load, verify and instantiate an artifact.

        Args:
            path_or_bytes: a path to the ``.wasm`` file, or its bytes.
            expected_id: the ``"sha256:<hex>"`` id it was deployed under; checked when given.
            limits: sandbox limits (defaults: :class:`Limits` ()).
            host_functions: implementations of the manifest's capabilities, keyed
                ``(module, name)`` or ``"module.name"``; each is called with the wasm arguments
                as Python ints/floats. Pure artifacts need none.
            call_path: ``"fast"`` or ``"checked"``; default from
                :func:`auto_runtime.sandbox.default_call_path`.
            trust: when given, the bytes must carry a signature by one of its keys
                (:class:`auto_runtime.signing.TrustPolicy`); checked before anything is parsed.
            signatures: the signature records to check (default: the sidecar file
                ``<path>.sig`` of a path; none for bytes).

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
                required key, or has an unsupported input schema.
            CapabilityError: an import the manifest does not declare, a declared capability
                the module does not import, or one without a host function.
            MemoryLimitExceeded: the module's initial memory exceeds ``limits.memory_bytes``.
            FuelExhausted, CallTimeout, TrapError: the module's start function failed.
        """
        limits = limits or Limits()
        data, source = _read(path_or_bytes)
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
        info = wasm_sections.parse(data)
        payload = manifest_payload(info, source)
        manifest = decode_manifest(payload, source)
        _check_code_digest(data, payload, manifest, source)
        check_manifest_digest(manifest, source)

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

        declared = declared_capabilities(manifest)
        host = _normalize_host(host_functions)
        _check_capabilities(info.imports, declared, host, source)

        engine = shared_engine()
        try:
            module = wasmtime.Module(engine, data)
        except wasmtime.WasmtimeError as e:
            raise MalformedArtifact(f"{source}: not a valid WebAssembly module: {e}") from None

        # wasmtime's view of the imports must agree with ours (it is what gets linked)
        import_types: list[tuple[str, str, wasmtime.FuncType]] = []
        for imp in module.imports:
            ty = imp.type
            if not isinstance(ty, wasmtime.FuncType) or (imp.module, imp.name or "") not in host:
                raise CapabilityError(
                    f"{source}: import {imp.module}.{imp.name} is not a declared, provided capability"
                )
            import_types.append((imp.module, imp.name or "", ty))
        if len(import_types) != len(info.imports):  # pragma: no cover - parsers disagree
            raise MalformedArtifact(f"{source}: import section could not be read consistently")

        has_batch = _check_exports(module, declared_exports(manifest), source)
        art = cls(data=data, artifact_id=artifact_id, manifest=manifest, module=module,
                  engine=engine, limits=limits, host_functions=host, import_types=import_types,
                  has_batch=has_batch, call_path=call_path or default_call_path(), source=source)
        art.signed_by = signed_by
        return art

    def _externs(self, store: wasmtime.Store) -> list[Any]:
        return [wasmtime.Func(store, ty, self._host[(m, n)]) for m, n, ty in self._import_types]

    def _new_sandbox(self) -> Sandbox:
        return Sandbox(self._engine, self._module, self.limits, self._externs,
                       call_path=self._call_path, batch=self.has_run_batch)

    def reset(self) -> None:
        """Discard the instance; the next call starts from a fresh Store and instance."""
        with self._lock:
            self._sandbox = None

    # ------------------------------------------------------------------ calling

    def call(self, input_obj: Any) -> dict[str, Any]:
        """Run the artifact on one input.

        Args:
            input_obj: the task input object (JSON-encodable); not schema-checked here (see
                ``validate_input``).

        Returns:
            The output object: ``{"answer", "margin", "nonconformity"}`` or ``{"error": code}``.

        Raises:
            InputSchemaError: ``input_obj`` is not JSON-encodable (NaN, sets, cycles, ...).
            FuelExhausted, CallTimeout, MemoryLimitExceeded: a sandbox limit stopped the call.
            TrapError: the artifact trapped (or a host function raised).
            OutputError: the output region is out of bounds, or not a JSON object of the ABI's
                shape.
        """
        try:
            data = canonical_text(input_obj).encode("utf-8")
        except (TypeError, ValueError, RecursionError) as e:
            raise InputSchemaError(f"$: input is not JSON-encodable: {e}") from None
        return self._invoke(data, False, 1, _check_one)

    def call_batch(self, inputs: list[Any]) -> list[dict[str, Any]]:
        """Run the artifact on many inputs with one ``run_batch`` call.

        Fuel and deadline scale with ``len(inputs)`` (:meth:`Limits.fuel_for`,
        :meth:`Limits.epoch_ticks`). Without a ``run_batch`` export, calls :meth:`call` per item.

        Returns:
            One output object per input, in order (per-item ``{"error": code}`` included).

        Raises:
            Same as :meth:`call`; :class:`OutputError` also when the output is not a JSON array
            of ``len(inputs)`` objects.
        """
        if not inputs:
            return []
        if not self.has_run_batch:
            return [self.call(x) for x in inputs]
        try:
            data = canonical_text(inputs if isinstance(inputs, list) else list(inputs)).encode("utf-8")
        except (TypeError, ValueError, RecursionError) as e:
            raise InputSchemaError(f"$: batch input is not JSON-encodable: {e}") from None
        return self._invoke(data, True, len(inputs), _check_many)

    def _invoke(self, data: bytes, batch: bool, n: int, check: Any) -> Any:
        """Run ``run`` (or ``run_batch``) on encoded ``data`` in the sandbox, parse and check the
        output; any failure discards the sandbox so the next call gets a fresh instance."""
        with self._lock:
            sb = self._sandbox
            if sb is None:
                sb = self._sandbox = self._new_sandbox()
                self.instantiations += 1
            try:
                return check(strict_loads(sb.invoke(data, batch, n)), n)
            except ValueError as e:
                self._sandbox = None
                what = "run_batch output" if batch else "artifact output"
                raise OutputError(f"{what} is not valid JSON: {e}") from None
            except AutoError:
                self._sandbox = None
                raise
            except Exception as e:  # noqa: BLE001 - never let an internal failure escape unmapped
                self._sandbox = None
                raise TrapError(f"artifact call failed unexpectedly: {e!r}") from e

    def fuel_per_call(self, inputs: list[Any], fuel: int = MEASURE_FUEL) -> list[int]:
        """Fuel one ``run`` call consumes on each input, each on a fresh instance (so the count
        does not depend on earlier calls' heap), ``alloc`` and the input copy included.

        Args:
            inputs: task inputs (JSON-encodable).
            fuel: the budget per measured call (a call needing more raises FuelExhausted).

        Returns:
            Fuel units (≈ WebAssembly instructions) per input, in order; deterministic on any
            machine (wasmtime fuel metering).

        Raises:
            InputSchemaError: an input is not JSON-encodable.
            FuelExhausted, CallTimeout, MemoryLimitExceeded, TrapError, OutputError: a call failed.
        """
        limits = Limits(fuel=fuel, memory_bytes=self.limits.memory_bytes, timeout_ms=MEASURE_TIMEOUT_MS)
        used = []
        for x in inputs:
            try:
                data = canonical_text(x).encode("utf-8")
            except (TypeError, ValueError, RecursionError) as e:
                raise InputSchemaError(f"$: input is not JSON-encodable: {e}") from None
            sb = Sandbox(self._engine, self._module, limits, self._externs, call_path="checked",
                         batch=self.has_run_batch)
            used.append(sb.fuel_used(data))
        return used

    def describe(self) -> dict[str, Any]:
        """A JSON-able summary: id, size (bytes), task, generation, imports, exports, guard,
        limits (fuel units, bytes, ms), call path, the trusted signer (or None) and the manifest."""
        return {
            "id": self.id,
            "bytes": self.size_bytes,
            "task": self.task,
            "generation": self.generation,
            "imports": [f"{m}.{n}" for m, n, _ in self._import_types],
            "exports": [e.name for e in self._module.exports],
            "guard": self.guard.describe(),
            "limits": {"fuel": self.limits.fuel, "memory_bytes": self.limits.memory_bytes,
                       "timeout_ms": self.limits.timeout_ms},
            "call_path": self.call_path,
            "signed_by": self.signed_by,
            "manifest": self.manifest,
        }

    def __repr__(self) -> str:
        return (f"Artifact(task={self.task!r}, generation={self.generation!r}, id={self.id[:19]}..., "
                f"guard={self.guard.method}, call_path={self.call_path})")


# --------------------------------------------------------------------------- helpers


def _check_one(out: Any, _n: int) -> dict[str, Any]:
    """The ``run`` output: an ABI object (fast path for the common well-formed shape)."""
    if out.__class__ is not dict or "answer" not in out or out.get("nonconformity").__class__ is not float:
        out = _check_output_item(out, "artifact output")
    return out


def _check_many(out: Any, n: int) -> list[dict[str, Any]]:
    """The ``run_batch`` output: a JSON array of ``n`` ABI objects."""
    if out.__class__ is not list or len(out) != n:
        raise OutputError(
            f"run_batch output must be a JSON array of {n} objects, got "
            + (f"{len(out)} items" if isinstance(out, list) else type(out).__name__)
        )
    for i, item in enumerate(out):
        if item.__class__ is not dict or "answer" not in item or item.get("nonconformity").__class__ is not float:
            _check_output_item(item, f"run_batch output[{i}]")
    return out


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
