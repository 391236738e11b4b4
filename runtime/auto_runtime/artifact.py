"""Loading and calling one artifact (.wasm + ``auto.manifest``), per the ABI in
docs/architecture.md.

Loading: :func:`auto_runtime.loading.load_artifact` (behind :meth:`Artifact.load`) reads, checks
and instantiates the bytes, each check's error named, in the order its docstring gives.

Calls: :meth:`Artifact.call` encodes the input as canonical JSON, ``alloc``s, writes, calls
``run``, decodes ``(out_ptr << 32) | out_len``, reads and strictly decodes the JSON output. A
capability artifact's call runs with a :class:`~auto_runtime.tools.ToolSession`, the host side of
its tool calls (:mod:`auto_runtime.tool_imports`); the wall time spent in the host is not charged
to the call's compute deadline (the epoch deadline is re-armed after every host call), and fuel
counts only the artifact's own instructions.
An input whose canonical bytes are a key of the verified table is answered from it, without
entering WebAssembly (the output the code gives for it, a new object each time: each key's first
hit runs the code once and compares, :meth:`auto_runtime.table.TableIndex.bind_code`; a repeated
input is found without encoding it); every other input runs the code (:meth:`Artifact.call_code`
always does).
After any failed call (limit, trap, bad output) the instance is discarded and a fresh Store and
instance are made before the next call, so no state leaks across a failure
(:class:`auto_runtime.instance.Instance`).
"""

from __future__ import annotations

import functools
import os
from typing import Any, Callable, Mapping

import wasmtime

from auto_runtime.abi_output import read_many, read_one
from auto_runtime.errors import CapabilityError, InputSchemaError, ManifestError
from auto_runtime.fuel_measure import MEASURE_FUEL, fuel_per_call
from auto_runtime.guard import Guard, build_guard
from auto_runtime.instance import Instance
from auto_runtime.jsonio import canonical_text, strict_loads
from auto_runtime.loading import MAX_ARTIFACT_BYTES, TABLE_FUEL_FACTOR, HostFunctions, load_artifact
from auto_runtime.manifest import Manifest, declared_capabilities
from auto_runtime.sandbox import Limits
from auto_runtime.schema import SchemaDefinitionError, compile_schema
from auto_runtime.signing import TrustPolicy
from auto_runtime.table import TableIndex
from auto_runtime.tools import ToolBudget, ToolDecl, ToolSession, check_host_tools, manifest_budget

__all__ = ["Artifact", "Limits", "MAX_ARTIFACT_BYTES", "TABLE_FUEL_FACTOR", "HostFunctions"]


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
        self.tools: dict[str, ToolDecl] = tools or {}
        self.tool_budget: ToolBudget | None = manifest_budget(manifest, source) if self.tools else None
        self._host_tools = host_tools
        self._instance = Instance(engine=engine, module=module, limits=limits, host_functions=host_functions,
                                  import_types=import_types, has_batch=has_batch, call_path=call_path,
                                  has_tools=bool(self.tools))
        self._invoke = self._instance.invoke
        self.call_path = self._instance.call_path
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
        """Load, verify and instantiate an artifact: see :func:`auto_runtime.loading.load_artifact`
        (arguments, the checks in order, result, errors: :class:`ArtifactError`,
        :class:`ArtifactIdMismatch`, :class:`UntrustedArtifact`, :class:`MalformedArtifact`,
        :class:`ManifestError`, :class:`CapabilityError`, :class:`MemoryLimitExceeded`, and a start
        function's :class:`FuelExhausted`, :class:`CallTimeout` or :class:`TrapError`)."""
        return load_artifact(cls, path_or_bytes, expected_id, limits, host_functions=host_functions,
                             call_path=call_path, trust=trust, signatures=signatures, tools=tools,
                             table_fast_path=table_fast_path)

    @property
    def instantiations(self) -> int:
        """Instances made so far: 1 after loading, one more for each call that follows a failed
        call or :meth:`reset`."""
        return self._instance.instantiations

    # ------------------------------------------------------------------ tools

    def bind_tools(self, tools: Mapping[str, Callable[..., Any]]) -> None:
        """Bind the host's tools (exactly the declared ones; see :meth:`load`).

        Raises:
            CapabilityError: a declared tool missing, an undeclared one provided, or not callable.
        """
        checked = check_host_tools(self.tools, tools, self.source)
        with self._instance.lock:
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

    def reset(self) -> None:
        """Discard the instance; the next call starts from a fresh Store and instance."""
        self._instance.reset()

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
            "imports": [f"{m}.{n}" for m, n, _ in self._instance.import_types],
            "tools": [{"name": d.name, "kind": d.kind, "effects": d.effects} for d in self.tools.values()],
            "tool_budget": None if self.tool_budget is None else {"calls": self.tool_budget.calls,
                                                                   "wall_ms": self.tool_budget.wall_ms},
            "exports": [e.name for e in self._instance.module.exports],
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
