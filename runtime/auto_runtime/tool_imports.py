"""The host functions behind a capability artifact's tool imports (``auto.tool_call``,
``auto.tool_result``, ``auto.commit``; the ABI is in docs/architecture.md, "Tool capabilities").

They act on the :class:`~auto_runtime.tools.ToolSession` of the call in flight, which the caller
sets with :meth:`ToolImports.begin` (under the artifact's call lock); the wall time spent in the
host is not charged to the call's compute deadline (the epoch deadline is re-armed after every
host call), and any refusal stops the artifact (the host function raises, the artifact traps).
"""

from __future__ import annotations

import math
from time import perf_counter
from typing import Any, Callable

import wasmtime

from auto_runtime.sandbox import EPOCH_TICK_MS, Limits
from auto_runtime.tools import COMMIT, MAX_REQUEST_BYTES, TOOL_CALL, TOOL_RESULT, ToolRefused, ToolSession

__all__ = ["ToolImports"]


class ToolImports:
    """The host side of one artifact's tool imports.

    Attributes:
        session: the session of the call in flight, or None between calls.
        call_t0: :func:`time.perf_counter` at the call's start (s).
        host_s: wall time the call has spent in the host so far (s).
    """

    def __init__(self, limits: Limits) -> None:
        self._limits = limits
        self.session: ToolSession | None = None
        self.call_t0 = 0.0
        self.host_s = 0.0

    def begin(self, session: ToolSession) -> None:
        """Make ``session`` the one the tool imports act on, its clock starting now."""
        self.session, self.call_t0, self.host_s = session, perf_counter(), 0.0

    def end(self) -> None:
        """No call in flight any more."""
        self.session = None

    def externs(self, store: wasmtime.Store) -> dict[str, Callable[..., Any]]:
        """The host functions of the tool imports for one store, by import name: they act on the
        current call's session, re-arm the compute deadline after the host's work, and stop the
        artifact (a trap) on any refusal."""
        limits = self._limits

        def enter() -> tuple[ToolSession, float]:
            sess = self.session
            if sess is None:  # pragma: no cover - a call always sets it for capability artifacts
                raise ToolRefused("no tool session for this call")
            return sess, perf_counter()

        def leave(t0: float) -> None:
            now = perf_counter()
            self.host_s += now - t0
            compute_ms = ((now - self.call_t0) - self.host_s) * 1000.0
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
