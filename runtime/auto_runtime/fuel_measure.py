"""Measuring the fuel an artifact's calls consume (the manifest's ``fuel_per_call``), off the
request path: each input runs once on a fresh instance, through the checked call path.
"""

from __future__ import annotations

from typing import Any, Callable

from auto_runtime.errors import InputSchemaError, ToolCallError, TrapError
from auto_runtime.jsonio import canonical_text
from auto_runtime.sandbox import Limits

MEASURE_FUEL = 10**10
"""Fuel budget of one measured call (:func:`fuel_per_call`): 200x the default call budget, so
measurement never stops where a real call would still have succeeded."""

MEASURE_TIMEOUT_MS = 60_000.0
"""Wall-clock backstop of one measured call, in ms (measurement runs off the request path)."""


def fuel_per_call(art: Any, inputs: list[Any], fuel: int = MEASURE_FUEL,
                  sessions: Callable[[Any], Any] | None = None) -> list[int]:
    """Fuel one ``run`` call of ``art`` consumes on each input, each on a fresh instance (so the
    count does not depend on earlier calls' heap), ``alloc`` and the input copy included.

    Args:
        art: the loaded :class:`~auto_runtime.artifact.Artifact` (its module, limits and host
            functions are used).
        inputs: task inputs (JSON-encodable).
        fuel: the budget per measured call (a call needing more raises FuelExhausted).
        sessions: for a capability artifact, ``sessions(input)`` -> a
            :class:`~auto_runtime.tools.ToolSession` (e.g. a
            replay); default ``art.new_session()``. Host work is not counted.

    Returns:
        Fuel units (≈ WebAssembly instructions) per input, in order; deterministic on any
        machine (wasmtime fuel metering).

    Raises:
        InputSchemaError: an input is not JSON-encodable.
        FuelExhausted, CallTimeout, MemoryLimitExceeded, TrapError, OutputError: a call failed.
    """
    limits = Limits(fuel=fuel, memory_bytes=art.limits.memory_bytes, timeout_ms=MEASURE_TIMEOUT_MS)
    used = []
    for x in inputs:
        try:
            data = canonical_text(x).encode("utf-8")
        except (TypeError, ValueError, RecursionError) as e:
            raise InputSchemaError(f"$: input is not JSON-encodable: {e}") from None
        inst = art._instance
        sb = inst.new_sandbox(limits, call_path="checked")
        if not art.tools:
            used.append(sb.fuel_used(data))
            continue
        with inst.lock:  # the tool imports' host side reads the session of the call in flight
            sess = sessions(x) if sessions is not None else art.new_session()
            inst.tool_imports.begin(sess)
            try:
                used.append(sb.fuel_used(data))
            except TrapError:
                if sess.failure is not None:
                    raise ToolCallError(sess.failure) from None
                raise
            finally:
                inst.tool_imports.end()
    return used


__all__ = ["MEASURE_FUEL", "MEASURE_TIMEOUT_MS", "fuel_per_call"]
