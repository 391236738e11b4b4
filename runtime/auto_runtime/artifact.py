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

Calls: :meth:`Artifact.call` encodes the input as canonical JSON, ``alloc``s, writes, calls
``run``, decodes ``(out_ptr << 32) | out_len``, reads and strictly decodes the JSON output. A
capability artifact's call runs with a :class:`~auto_runtime.tools.ToolSession` (the host side of
its tool calls); the wall time spent in the host is not charged to the call's compute deadline
(the epoch deadline is re-armed after every host call), and fuel counts only the artifact's own
instructions.
An input whose canonical bytes are a key of the verified table is answered from it, without
entering WebAssembly (the output the code gives for it, a new object each time: each key's first
hit runs the code once and compares, :meth:`auto_runtime.table.TableIndex.bind_code`; a repeated
input is found without encoding it); every other input runs the code (:meth:`Artifact.call_code`
always does).
After any failed call (limit, trap, bad output) the instance is discarded and a fresh Store and
instance are made before the next call, so no state leaks across a failure.
"""

from __future__ import annotations

import functools
import math
import os
import threading
from pathlib import Path
from time import perf_counter
from typing import Any, Callable, Mapping

import wasmtime

from auto_runtime import wasm_sections
from auto_runtime.abi_output import read_many, read_one
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
    ToolCallError,
    TrapError,
)
from auto_runtime.fuel_measure import MEASURE_FUEL, fuel_per_call
from auto_runtime.guard import Guard, build_guard
from auto_runtime.signing import TrustPolicy, read_signatures, sidecar_path
from auto_runtime.jsonio import canonical_text, strict_loads
from auto_runtime.manifest import (
    MANIFEST_SECTION,
    Manifest,
    check_manifest_digest,
    decode_manifest,
    declared_capabilities,
    declared_exports,
    manifest_payload,
)
from auto_runtime.sandbox import EPOCH_TICK_MS, Limits, Sandbox, default_call_path, shared_engine
from auto_runtime.schema import SchemaDefinitionError, compile_schema
from auto_runtime.table import TableIndex, check_against_code, read_table
from auto_runtime.tools import (
    COMMIT,
    MAX_REQUEST_BYTES,
    TOOL_CALL,
    TOOL_MODULE,
    TOOL_RESULT,
    ToolBudget,
    ToolDecl,
    ToolRefused,
    ToolSession,
    check_host_tools,
    manifest_budget,
    tool_decls,
)

__all__ = ["Artifact", "Limits", "MAX_ARTIFACT_BYTES", "HostFunctions"]

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


class Artifact:
    """A loaded, verified artifact, ready to call. Create with :meth:`load`.

    Attributes:
        id: ``"sha256:<hex>"`` of the file's bytes.
        manifest: the decoded manifest.
        typed_manifest: its typed view (:class:`~auto_runtime.manifest.Manifest`, built once, on
            first use), for readers of its keys.
        task: the manifest's ``task``.
        generation: the manifest's ``generation`` (int or None).
        limits: the :class:`Limits` every call runs under.
        guard: the :class:`~auto_runtime.guard.Guard` built from the manifest (never raises).
        validate_input: ``validate_input(obj)`` raises :class:`InputSchemaError` when ``obj``
            violates ``interface.input``.
        call_path: ``"fast"`` (raw ctypes) or ``"checked"`` (``Func.__call__``).
        tools: the declared tools by name (:class:`~auto_runtime.tools.ToolDecl`); empty for an
            artifact without tool capabilities.
        tool_budget: the manifest's per-call tool budget (None without tools).
        signed_by: the trusted key id whose signature was checked at load, or None (loaded
            without a trust policy).

    Thread-safe: calls on one artifact are serialized by a lock.
    """

    def __init__(self, *, data: bytes, artifact_id: str, manifest: dict[str, Any],
                 module: wasmtime.Module, engine: wasmtime.Engine, limits: Limits,
                 host_functions: dict[tuple[str, str], Callable[..., Any]],
                 import_types: list[tuple[str, str, wasmtime.FuncType]],
                 has_batch: bool, call_path: str, source: str,
                 tools: dict[str, ToolDecl] | None = None,
                 host_tools: dict[str, Callable[..., Any]] | None = None) -> None:
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
        self.tools: dict[str, ToolDecl] = tools or {}
        self.tool_budget: ToolBudget | None = manifest_budget(manifest, source) if self.tools else None
        self._host_tools = host_tools
        self._session: ToolSession | None = None
        self._call_t0 = 0.0
        self._host_s = 0.0
        self._lock = threading.Lock()
        self._sandbox: Sandbox | None = None
        self._sandbox = self._new_sandbox()
        self.call_path = self._sandbox.call_path
        self.instantiations = 1
        self.signed_by: str | None = None
        self.table: TableIndex | None = None

    @functools.cached_property
    def typed_manifest(self) -> Manifest:
        """The typed view of :attr:`manifest` (:meth:`Manifest.of`; built on first use)."""
        return Manifest.of(self.manifest)

    # ------------------------------------------------------------------ loading

    @classmethod
    def load(cls, path_or_bytes: str | os.PathLike | bytes | bytearray | memoryview,
             expected_id: str | None = None, limits: Limits | None = None, *,
             host_functions: HostFunctions | None = None,
             call_path: str | None = None, trust: TrustPolicy | None = None,
             signatures: list[dict[str, Any]] | None = None,
             tools: Mapping[str, Callable[..., Any]] | None = None,
             table_fast_path: bool | None = None) -> "Artifact":
        """Load, verify and instantiate an artifact.

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
                later (:meth:`bind_tools`) or pass a session per call.
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

    # ------------------------------------------------------------------ tools

    def bind_tools(self, tools: Mapping[str, Callable[..., Any]]) -> None:
        """Bind the host's tools (exactly the declared ones; see :meth:`load`).

        Raises:
            CapabilityError: a declared tool missing, an undeclared one provided, or not callable.
        """
        checked = check_host_tools(self.tools, tools, self.source)
        with self._lock:
            self._host_tools = checked

    @property
    def bound_tools(self) -> dict[str, Callable[..., Any]] | None:
        """The host tools bound at load or by :meth:`bind_tools` (None when unbound)."""
        return self._host_tools

    def new_session(self, *, admit: Callable[[Any], tuple[bool, str]] | None = None,
                    budget: ToolBudget | None = None, replay: Any = None) -> ToolSession:
        """A :class:`~auto_runtime.tools.ToolSession` for one call: the bound tools (or ``replay``),
        the manifest's budget tightened by ``budget``, the commit decided by ``admit``.

        Raises:
            CapabilityError: no replay and no tools bound.
        """
        if replay is None and self._host_tools is None:
            raise CapabilityError(f"{self.source}: declares tools ({', '.join(sorted(self.tools))}) but none are bound")
        assert self.tool_budget is not None
        return ToolSession(self.tools, None if replay is not None else self._host_tools,
                           self.tool_budget.tightened(budget), admit=admit, replay=replay)

    def _tool_externs(self, store: wasmtime.Store) -> dict[str, Callable[..., Any]]:
        """The host functions of the tool imports for one store: they act on the current call's
        session, re-arm the compute deadline after the host's work, and stop the artifact (a trap)
        on any refusal."""
        limits = self.limits

        def enter() -> tuple[ToolSession, float]:
            sess = self._session
            if sess is None:  # pragma: no cover - a call always sets it for capability artifacts
                raise ToolRefused("no tool session for this call")
            return sess, perf_counter()

        def leave(t0: float) -> None:
            now = perf_counter()
            self._host_s += now - t0
            compute_ms = ((now - self._call_t0) - self._host_s) * 1000.0
            left_ms = max(0.0, limits.deadline - compute_ms)
            store.set_epoch_deadline(math.ceil(left_ms / EPOCH_TICK_MS) + 1)

        def read(caller: Any, ptr: int, n: int, sess: ToolSession, what: str) -> bytes:
            mem = caller["memory"]
            size = mem.data_len(caller)
            if n < 0 or n > MAX_REQUEST_BYTES or ptr < 0 or ptr + n > size:
                raise sess.refuse(f"{what} region [{ptr}, {ptr + n}) is outside memory or above {MAX_REQUEST_BYTES} bytes")
            return bytes(mem.read(caller, ptr, ptr + n))

        def tool_call(caller: Any, ptr: int, n: int) -> int:
            sess, t0 = enter()
            try:
                return len(sess.request(read(caller, ptr & 0xFFFFFFFF, n, sess, "tool request")))
            finally:
                leave(t0)

        def tool_result(caller: Any, ptr: int) -> int:
            sess, t0 = enter()
            try:
                data = sess.take_result()
                mem = caller["memory"]
                ptr &= 0xFFFFFFFF
                if ptr + len(data) > mem.data_len(caller):
                    raise sess.refuse(f"tool_result destination [{ptr}, {ptr + len(data)}) is outside memory")
                mem.write(caller, data, ptr)
                return len(data)
            finally:
                leave(t0)

        def commit(caller: Any, ptr: int, n: int) -> int:
            sess, t0 = enter()
            try:
                return int(sess.commit(read(caller, ptr & 0xFFFFFFFF, n, sess, "commit record")))
            finally:
                leave(t0)

        return {TOOL_CALL: tool_call, TOOL_RESULT: tool_result, COMMIT: commit}

    def _externs(self, store: wasmtime.Store) -> list[Any]:
        tool_fns = self._tool_externs(store) if self.tools else {}
        out = []
        for m, n, ty in self._import_types:
            if m == TOOL_MODULE:
                out.append(wasmtime.Func(store, ty, tool_fns[n], access_caller=True))
            else:
                out.append(wasmtime.Func(store, ty, self._host[(m, n)]))
        return out

    def _new_sandbox(self) -> Sandbox:
        return Sandbox(self._engine, self._module, self.limits, self._externs,
                       call_path=self._call_path, batch=self.has_run_batch)

    def reset(self) -> None:
        """Discard the instance; the next call starts from a fresh Store and instance."""
        with self._lock:
            self._sandbox = None

    # ------------------------------------------------------------------ calling

    def call(self, input_obj: Any, session: ToolSession | None = None) -> dict[str, Any]:
        """Run the artifact on one input.

        Args:
            input_obj: the task input object (JSON-encodable); not schema-checked here (see
                ``validate_input``).
            session: the host side of a capability artifact's tool calls for this call
                (:meth:`new_session`); default: a session over the bound tools that admits every
                commit. Ignored by an artifact without tools.

        Returns:
            The output object: ``{"answer", "margin", "nonconformity"}`` or ``{"error": code}``.

        Raises:
            InputSchemaError: ``input_obj`` is not JSON-encodable (NaN, sets, cycles, ...).
            FuelExhausted, CallTimeout, MemoryLimitExceeded: a sandbox limit stopped the call.
            TrapError: the artifact trapped (or a host function raised).
            ToolCallError: the host refused a tool call (its reason; the session has the rest).
            CapabilityError: a capability artifact without a session and without bound tools.
            OutputError: the output region is out of bounds, or not a JSON object of the ABI's
                shape.
        """
        table = self.table
        if table is not None:
            out = table.recall(input_obj)  # an input that hit before: no encoding
            if out is not None:
                return out
        try:
            data = canonical_text(input_obj).encode("utf-8")
        except (TypeError, ValueError, RecursionError) as e:
            raise InputSchemaError(f"$: input is not JSON-encodable: {e}") from None
        return self.call_encoded(data, input_obj, session)

    def call_encoded(self, data: bytes, input_obj: Any, session: ToolSession | None = None) -> dict[str, Any]:
        """:meth:`call` on ``input_obj`` whose canonical bytes ``data`` the caller has computed
        (``canonical_text(input_obj).encode("utf-8")``, e.g. by
        :attr:`auto_runtime.table.TableIndex.lookup`): the same answer, without encoding again.

        Raises:
            Same as :meth:`call`.
        """
        table = self.table
        if table is not None:
            out = table.hit(data, input_obj)
            if out is not None:
                return out
        if not self.tools:
            return self._invoke(data, False, 1, read_one)
        return self._invoke(data, False, 1, read_one, session if session is not None else self.new_session())

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
        if not self.has_run_batch or self.tools:
            return [self.call(x) for x in inputs]
        table = self.table
        if table is not None:
            inputs = inputs if isinstance(inputs, list) else list(inputs)
            recall = table.recall
            outs = [recall(x) for x in inputs]
            miss = [i for i, o in enumerate(outs) if o is None]
            if miss:
                hit = table.hit
                try:
                    keys = [canonical_text(inputs[i]).encode("utf-8") for i in miss]
                except (TypeError, ValueError, RecursionError) as e:
                    raise InputSchemaError(f"$: batch input is not JSON-encodable: {e}") from None
                run = []
                for i, k in zip(miss, keys):
                    o = outs[i] = hit(k, inputs[i])
                    if o is None:
                        run.append((i, k))
                if run:
                    for (i, _), o in zip(run, self._code_batch([k for _, k in run])):
                        outs[i] = o
            return outs
        try:
            data = canonical_text(inputs if isinstance(inputs, list) else list(inputs)).encode("utf-8")
        except (TypeError, ValueError, RecursionError) as e:
            raise InputSchemaError(f"$: batch input is not JSON-encodable: {e}") from None
        return self._invoke(data, True, len(inputs), read_many)

    def call_batch_texts(self, texts: list[str]) -> list[dict[str, Any]]:
        """:meth:`call_batch` on inputs given as their canonical JSON texts (``canonical_text(x)``
        of each input ``x``, e.g. as a store hands them out), so a caller that has them does not
        encode every input again: the batch sent is ``"[" + ",".join(texts) + "]"``, byte for
        byte what :meth:`call_batch` sends for the inputs themselves. Without a ``run_batch``
        export, or for a capability artifact, each text is decoded and passed to :meth:`call`.

        Returns:
            One output object per text, in order (per-item ``{"error": code}`` included).

        Raises:
            Same as :meth:`call_batch`; a text that is not one JSON value makes the whole batch
            malformed: the artifact answers it with one error object, an :class:`OutputError`
            (without ``run_batch``: :class:`InputSchemaError` naming the text's position).
        """
        if not texts:
            return []
        if self.table is not None and self.has_run_batch:
            return self.call_batch_encoded([t.encode("utf-8") for t in texts])
        if not self.has_run_batch or self.tools:
            out = []
            for i, t in enumerate(texts):
                try:
                    obj = strict_loads(t.encode("utf-8"))
                except ValueError as e:
                    raise InputSchemaError(f"$[{i}]: input text is not JSON: {e}") from None
                out.append(self.call(obj))
            return out
        return self._invoke(("[" + ",".join(texts) + "]").encode("utf-8"), True, len(texts), read_many)

    def table_answer(self, input_obj: Any) -> dict[str, Any] | None:
        """The table fast path's output for ``input_obj`` when its schema check is known to pass
        without running it, else None (the caller validates and calls as usual).

        Known: the input is a table hit and a plain object whose canonical JSON passed
        ``validate_input`` before (checked on the first hit of each, then remembered):
        :meth:`auto_runtime.table.TableIndex.bind_schema` says why the verdict carries over.
        Never raises.
        """
        table = self.table
        return None if table is None else table.answer(input_obj)

    def call_batch_encoded(self, keys: list[bytes]) -> list[dict[str, Any]]:
        """:meth:`call_batch_texts` on inputs given as their canonical bytes (``canonical_text(x)
        .encode("utf-8")``, e.g. :attr:`auto_runtime.table.TableIndex.lookup_many`'s): hits
        from the verified table, the rest through one ``run_batch`` call of the code, the batch
        sent ``b"[" + b",".join(keys) + b"]"`` (in one buffer), in order; nothing is encoded
        or decoded again. Without a ``run_batch`` export, or for a capability artifact, as
        :meth:`call_batch_texts`.

        Raises:
            Same as :meth:`call_batch_texts`.
        """
        if not self.has_run_batch or self.tools:
            return self.call_batch_texts([k.decode("utf-8") for k in keys])
        table = self.table
        if table is None:
            return self._code_batch(keys)
        hit = table.hit
        outs: list[Any] = list(map(hit, keys))
        if None in outs:
            miss = [i for i, o in enumerate(outs) if o is None]
            if len(miss) == len(keys):
                return self._code_batch(keys)
            for i, o in zip(miss, self._code_batch([keys[i] for i in miss])):
                outs[i] = o
        return outs

    def _code_batch_texts(self, texts: list[str]) -> list[dict[str, Any]]:
        """The code's outputs for canonical input ``texts`` (the table fast path not consulted)."""
        return self._code_batch([t.encode("utf-8") for t in texts])

    def _code_batch(self, keys: list[bytes]) -> list[dict[str, Any]]:
        """The code's outputs for canonical input bytes ``keys`` (one ``run_batch`` call; the
        table fast path is not consulted)."""
        if not self.has_run_batch:
            return [self._invoke(k, False, 1, read_one) for k in keys]
        return self._invoke(b"[" + b",".join(keys) + b"]", True, len(keys), read_many)

    def call_code(self, input_obj: Any) -> dict[str, Any]:
        """:meth:`call` through the WebAssembly code only (the table fast path is not consulted);
        same contract. For differential checks of the fast path."""
        try:
            data = canonical_text(input_obj).encode("utf-8")
        except (TypeError, ValueError, RecursionError) as e:
            raise InputSchemaError(f"$: input is not JSON-encodable: {e}") from None
        if not self.tools:
            return self._invoke(data, False, 1, read_one)
        return self._invoke(data, False, 1, read_one, self.new_session())

    def _invoke(self, data: bytes, batch: bool, n: int, check: Any, session: ToolSession | None = None) -> Any:
        """Run ``run`` (or ``run_batch``) on encoded ``data`` in the sandbox, parse and check the
        output; any failure discards the sandbox so the next call gets a fresh instance."""
        with self._lock:
            sb = self._sandbox
            if sb is None:
                sb = self._sandbox = self._new_sandbox()
                self.instantiations += 1
            if session is not None:  # what the tool imports' host side reads
                self._session, self._call_t0, self._host_s = session, perf_counter(), 0.0
            try:
                raw = sb.invoke(data, batch, n)
                if session is not None and session.failure is not None:
                    self._sandbox = None  # the artifact went on after a refusal: never trust it again
                    raise ToolCallError(session.failure)
                return check(raw, n)
            except TrapError:
                self._sandbox = None
                if session is not None and session.failure is not None:
                    raise ToolCallError(session.failure) from None
                raise
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
            finally:
                if session is not None:
                    self._session = None

    def fuel_per_call(self, inputs: list[Any], fuel: int = MEASURE_FUEL,
                      sessions: Callable[[Any], ToolSession] | None = None) -> list[int]:
        """Fuel one ``run`` call consumes on each input, each on a fresh instance: see
        :func:`auto_runtime.fuel_measure.fuel_per_call` (arguments, result, errors)."""
        return fuel_per_call(self, inputs, fuel, sessions)

    def describe(self) -> dict[str, Any]:
        """A JSON-able summary: id, size (bytes), task, generation, imports, exports, guard,
        limits (fuel units, bytes, ms), call path, the trusted signer (or None) and the manifest."""
        return {
            "id": self.id,
            "bytes": self.size_bytes,
            "task": self.task,
            "generation": self.generation,
            "imports": [f"{m}.{n}" for m, n, _ in self._import_types],
            "tools": [{"name": d.name, "kind": d.kind, "effects": d.effects} for d in self.tools.values()],
            "tool_budget": None if self.tool_budget is None else {"calls": self.tool_budget.calls,
                                                                   "wall_ms": self.tool_budget.wall_ms},
            "exports": [e.name for e in self._module.exports],
            "guard": self.guard.describe(),
            "limits": {"fuel": self.limits.fuel, "memory_bytes": self.limits.memory_bytes,
                       "timeout_ms": self.limits.timeout_ms},
            "call_path": self.call_path,
            "table_fast_path": None if self.table is None else {"entries": self.table.entries,
                                                                  "digest": self.table.digest},
            "signed_by": self.signed_by,
            "manifest": self.manifest,
        }

    def __repr__(self) -> str:
        return (f"Artifact(task={self.task!r}, generation={self.generation!r}, id={self.id[:19]}..., "
                f"guard={self.guard.method}, call_path={self.call_path})")


# --------------------------------------------------------------------------- helpers


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
