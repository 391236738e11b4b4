"""The one sandboxed instance an artifact's calls run in, one call at a time.

:meth:`Instance.invoke` runs ``run`` (or ``run_batch``) on encoded input bytes and checks the
output; after any failed call (limit, trap, bad output, a refused tool call) the instance is
discarded and a fresh Store and instance are made before the next call, so no state leaks across
a failure.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

import wasmtime

from auto_runtime.errors import AutoError, OutputError, ToolCallError, TrapError
from auto_runtime.sandbox import Limits, Sandbox
from auto_runtime.tool_imports import ToolImports
from auto_runtime.tools import TOOL_MODULE, ToolSession

__all__ = ["Instance"]


class Instance:
    """A compiled module's instance with its imports linked, renewed after a failure.

    Attributes:
        module: the compiled module; engine: the engine it was compiled with.
        import_types: ``(module, name, type)`` of each import, in link order.
        tool_imports: the host side of the tool imports (:class:`~auto_runtime.tool_imports.ToolImports`).
        lock: serializes calls (and anything that sets the tool session).
        call_path: ``"fast"`` (raw ctypes) or ``"checked"`` (``Func.__call__``), as the sandbox chose.
        instantiations: instances made so far (1 after construction).

    Raises (construction):
        FuelExhausted, CallTimeout, TrapError: the module's start function failed.
    """

    def __init__(self, *, engine: wasmtime.Engine, module: wasmtime.Module, limits: Limits,
                 host_functions: dict[tuple[str, str], Callable[..., Any]],
                 import_types: list[tuple[str, str, wasmtime.FuncType]], has_batch: bool,
                 call_path: str, has_tools: bool) -> None:
        self.engine = engine
        self.module = module
        self.import_types = import_types
        self.tool_imports = ToolImports(limits)
        self.lock = threading.Lock()
        self._limits = limits
        self._host = host_functions
        self._has_batch = has_batch
        self._has_tools = has_tools
        self._call_path = call_path
        self.sandbox: Sandbox | None = None
        self.sandbox = self.new_sandbox()
        self.call_path = self.sandbox.call_path
        self.instantiations = 1

    def externs(self, store: wasmtime.Store) -> list[Any]:
        """The functions linked to the imports for one store: the host's, and the runtime's own
        tool imports."""
        tool_fns = self.tool_imports.externs(store) if self._has_tools else {}
        out = []
        for m, n, ty in self.import_types:
            if m == TOOL_MODULE:
                out.append(wasmtime.Func(store, ty, tool_fns[n], access_caller=True))
            else:
                out.append(wasmtime.Func(store, ty, self._host[(m, n)]))
        return out

    def new_sandbox(self, limits: Limits | None = None, call_path: str | None = None) -> Sandbox:
        """A fresh sandbox of this module (under ``limits``, default the artifact's, and
        ``call_path``, default the one the artifact was loaded with)."""
        return Sandbox(self.engine, self.module, limits or self._limits, self.externs,
                       call_path=call_path or self._call_path, batch=self._has_batch)

    def reset(self) -> None:
        """Discard the instance; the next call starts from a fresh Store and instance."""
        with self.lock:
            self.sandbox = None

    def invoke(self, data: bytes, batch: bool, n: int, check: Any, session: ToolSession | None = None) -> Any:
        """Run ``run`` (or ``run_batch`` over ``n`` inputs) on encoded ``data``, and return
        ``check(raw, n)`` (:mod:`auto_runtime.abi_output`); ``session`` is the host side of a
        capability artifact's tool calls. Any failure discards the instance.

        Raises:
            FuelExhausted, CallTimeout, MemoryLimitExceeded, TrapError: as the sandbox raises them.
            ToolCallError: the host refused a tool call. OutputError: the output is not valid JSON.
        """
        with self.lock:
            sb = self.sandbox
            if sb is None:
                sb = self.sandbox = self.new_sandbox()
                self.instantiations += 1
            if session is not None:  # what the tool imports' host side reads
                self.tool_imports.begin(session)
            try:
                raw = sb.invoke(data, batch, n)
                if session is not None and session.failure is not None:
                    self.sandbox = None  # the artifact went on after a refusal: never trust it again
                    raise ToolCallError(session.failure)
                return check(raw, n)
            except TrapError:
                self.sandbox = None
                if session is not None and session.failure is not None:
                    raise ToolCallError(session.failure) from None
                raise
            except ValueError as e:
                self.sandbox = None
                what = "run_batch output" if batch else "artifact output"
                raise OutputError(f"{what} is not valid JSON: {e}") from None
            except AutoError:
                self.sandbox = None
                raise
            except Exception as e:  # noqa: BLE001 - never let an internal failure escape unmapped
                self.sandbox = None
                raise TrapError(f"artifact call failed unexpectedly: {e!r}") from e
            finally:
                if session is not None:
                    self.tool_imports.end()
