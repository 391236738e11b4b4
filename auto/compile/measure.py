"""What a compile measures about its candidate, through the runtime's own sandbox.

- :func:`fuel_per_call`: fuel (≈ WebAssembly instructions) per call, deterministic on any
  machine (wasmtime fuel metering), recorded in the manifest;
- :func:`call_latency_us`: wall-clock ``Artifact.call`` latency in µs, machine- and
  load-dependent, reported by the compile outcome and never embedded in the artifact.
"""

from __future__ import annotations

import statistics
from time import perf_counter_ns
from typing import Any, Sequence

LATENCY_SAMPLE = 200
"""At most this many inputs are timed per compile."""


def percentile(xs: Sequence[float], q: int) -> float | None:
    """The ``q``-th percentile (1–99) of ``xs`` by the inclusive method, rounded to 0.01; None
    when empty."""
    if not xs:
        return None
    if len(xs) == 1:
        return round(xs[0], 2)
    return round(statistics.quantiles(xs, n=100, method="inclusive")[q - 1], 2)


def fuel_per_call(artifact: Any, inputs: Sequence[dict[str, Any]], sessions: Any = None) -> dict[str, Any] | None:
    """Fuel one ``run`` call of ``artifact`` (an :class:`auto_runtime.Artifact`) consumes over
    ``inputs``, each on a fresh instance (a capability artifact's tool calls through
    ``sessions(input)``, e.g. replays; the host's work is not counted).

    Returns:
        ``{"p50", "p95", "max", "n"}`` in fuel units (p50 = the upper median, p95 = the
        ``floor(0.95 n)``-th smallest), or None when there are no inputs.

    Raises:
        AutoError: a measured call failed (see :meth:`auto_runtime.Artifact.fuel_per_call`).
    """
    if not inputs:
        return None
    used = sorted(artifact.fuel_per_call(list(inputs), sessions=sessions) if sessions is not None
                  else artifact.fuel_per_call(list(inputs)))
    return {"p50": used[len(used) // 2], "p95": used[min(len(used) - 1, int(len(used) * 0.95))], "max": used[-1],
            "n": len(used)}


def call_latency_us(artifact: Any, inputs: Sequence[dict[str, Any]], limit: int = LATENCY_SAMPLE) -> list[float]:
    """Wall-clock latency of ``artifact.call`` on up to ``limit`` of ``inputs``, in µs each
    (``perf_counter_ns``; JSON in and out, no guard)."""
    lat: list[float] = []
    for inp in list(inputs)[:limit]:
        t0 = perf_counter_ns()
        artifact.call(inp)
        lat.append((perf_counter_ns() - t0) / 1000.0)
    return lat


def latency_summary(lat: Sequence[float]) -> dict[str, Any]:
    """``{"p50", "p95", "n", "what"}`` of :func:`call_latency_us`'s samples (µs)."""
    return {"p50": percentile(lat, 50), "p95": percentile(lat, 95), "n": len(lat),
            "what": "Artifact.call in-process, JSON in/out, no guard"}
