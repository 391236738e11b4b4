"""What a compile measures about its candidate, through the runtime's own sandbox.

- :func:`fuel_per_call`: fuel (≈ WebAssembly instructions) per call, deterministic on any
  machine (wasmtime fuel metering), recorded in the manifest; measured on at most
  :data:`FUEL_SAMPLE` inputs spread evenly over the given ones (each measured call instantiates
  the artifact afresh, so measuring every input of a 100,000-entry table would cost 100,000
  instantiations of a megabytes-large module: quadratic in the table size);
- :func:`call_latency_us`: wall-clock ``Artifact.call`` latency in µs, machine- and
  load-dependent, reported by the compile outcome and never embedded in the artifact.
"""

from __future__ import annotations

import statistics
from time import perf_counter_ns
from typing import Any, Sequence

LATENCY_SAMPLE = 200
"""At most this many inputs are timed per compile."""

FUEL_SAMPLE = 256
"""At most this many inputs are fuel-measured per compile (:func:`fuel_sample`)."""


def fuel_sample(inputs: Sequence[Any], k: int = FUEL_SAMPLE) -> list[Any]:
    """At most ``k`` of ``inputs``, evenly spaced (indices ``round(i (n - 1) / (k - 1))``, so
    the first and the last are always in), in order; all of them when there are ``k`` or fewer.
    Deterministic: the same inputs give the same sample."""
    n = len(inputs)
    if n <= k:
        return list(inputs)
    if k == 1:
        return [inputs[0]]
    return [inputs[round(i * (n - 1) / (k - 1))] for i in range(k)]


def percentile(xs: Sequence[float], q: int) -> float | None:
    """The ``q``-th percentile (1–99) of ``xs`` by the inclusive method, rounded to 0.01; None
    when empty."""
    if not xs:
        return None
    if len(xs) == 1:
        return round(xs[0], 2)
    return round(statistics.quantiles(xs, n=100, method="inclusive")[q - 1], 2)


def fuel_per_call(artifact: Any, inputs: Sequence[dict[str, Any]], sessions: Any = None,
                  sample: int = FUEL_SAMPLE) -> dict[str, Any] | None:
    """Fuel one ``run`` call of ``artifact`` (an :class:`auto_runtime.Artifact`) consumes over
    :func:`fuel_sample` of ``inputs`` (at most ``sample``), each on a fresh instance; the work
    is bounded by ``sample`` instantiations whatever the number of inputs (a capability
    artifact's tool calls go through ``sessions(input)``, e.g. replays; the host's work is not
    counted).

    Returns:
        ``{"p50", "p95", "max", "n", "of"}`` in fuel units over the ``n`` measured inputs of
        ``of`` given (p50 = the upper median, p95 = the ``floor(0.95 n)``-th smallest, max = the
        largest measured), or None when there are no inputs.

    Raises:
        AutoError: a measured call failed (see :meth:`auto_runtime.Artifact.fuel_per_call`).
    """
    if not inputs:
        return None
    measured = fuel_sample(list(inputs), sample)
    used = sorted(artifact.fuel_per_call(measured, sessions=sessions) if sessions is not None
                  else artifact.fuel_per_call(measured))
    return {"p50": used[len(used) // 2], "p95": used[min(len(used) - 1, int(len(used) * 0.95))], "max": used[-1],
            "n": len(used), "of": len(inputs)}


def call_latency_us(artifact: Any, inputs: Sequence[dict[str, Any]], limit: int = LATENCY_SAMPLE,
                    sessions: Any = None) -> list[float]:
    """Wall-clock latency of ``artifact.call`` on up to ``limit`` of ``inputs``, in µs each
    (``perf_counter_ns``; JSON in and out, no guard). For a capability artifact ``sessions(input)``
    gives the tool session each call runs in (e.g. a replay of its recorded tool calls), made
    before its clock starts. A call that hit its wall-clock deadline (a descheduled call on a
    loaded host; a deopt in the runtime) keeps the time it took and does not fail the compile;
    any other failure propagates."""
    from auto_runtime.errors import CallTimeout

    lat: list[float] = []
    for inp in list(inputs)[:limit]:
        kw = {} if sessions is None else {"session": sessions(inp)}
        t0 = perf_counter_ns()
        try:
            artifact.call(inp, **kw)
        except CallTimeout:
            pass
        lat.append((perf_counter_ns() - t0) / 1000.0)
    return lat


def latency_summary(lat: Sequence[float]) -> dict[str, Any]:
    """``{"p50", "p95", "n", "what"}`` of :func:`call_latency_us`'s samples (µs)."""
    return {"p50": percentile(lat, 50), "p95": percentile(lat, 95), "n": len(lat),
            "what": "Artifact.call in-process, JSON in/out, no guard"}
