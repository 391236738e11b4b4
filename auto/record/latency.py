"""Reported latency: how an upstream that does not spend a call's latency in wall time says what it was.

Some OpenAI-compatible upstreams answer at once yet stand for a call that takes time: a simulator
that draws latencies, a replay of recorded calls. Such an upstream reports the latency the call
stands for in a response header, and the recorder records that instead of the wall time:

* ``x-auto-latency-ms`` (:data:`LATENCY_HEADER`): the call's latency in milliseconds, a decimal
  number, finite and ≥ 0 (anything else is ignored: the wall time is recorded);
* ``x-auto-reference-model: simulated`` (:data:`REFERENCE_MODEL_HEADER`): the answer does not come
  from a real model.

What a model-call (``llm``) span records (:meth:`CallLatency.attributes`):

======================================  =====================================================
response headers                        attributes
======================================  =====================================================
neither                                 ``auto.latency_ms`` = wall time, ``auto.latency_source``
                                        ``"measured"``
``x-auto-latency-ms`` only              ``auto.latency_ms`` = reported, source ``"reported"``,
                                        ``auto.latency_measured_ms`` = wall time
both                                    as above with source ``"simulated"``, and
                                        ``auto.reference_model.simulated`` = true
``x-auto-reference-model: simulated``   wall time, source ``"measured"``, and
only                                    ``auto.reference_model.simulated`` = true
======================================  =====================================================

A task or tool span adds the difference (reported − measured) of each of its model calls to its
own wall time (:class:`LatencyTally`). Wall times are measured with ``time.perf_counter``.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Any, Mapping

LATENCY_HEADER = "x-auto-latency-ms"
"""Response header: the latency (ms) a call stands for, when it is not spent in wall time."""

REFERENCE_MODEL_HEADER = "x-auto-reference-model"
"""Response header: ``simulated`` marks an answer that does not come from a real model."""

MEASURED, REPORTED, SIMULATED = "measured", "reported", "simulated"
"""The values of ``auto.latency_source``."""


@dataclass(frozen=True)
class CallLatency:
    """The latency of one model-call attempt.

    Attributes:
        latency_ms: what the span records as ``auto.latency_ms`` (ms).
        source: ``"measured"``, ``"reported"`` or ``"simulated"``.
        measured_ms: the wall time of the attempt (ms).
        simulated: the response said ``x-auto-reference-model: simulated``.
    """

    latency_ms: float
    source: str
    measured_ms: float
    simulated: bool

    @property
    def adjust_ms(self) -> float:
        """Reported − measured latency (ms); 0 for a measured one."""
        return 0.0 if self.source == MEASURED else self.latency_ms - self.measured_ms

    def attributes(self) -> dict[str, Any]:
        """The span attributes (see the module docstring's table)."""
        attrs: dict[str, Any] = {"auto.latency_ms": self.latency_ms, "auto.latency_source": self.source}
        if self.source != MEASURED:
            attrs["auto.latency_measured_ms"] = self.measured_ms
        if self.simulated:
            attrs["auto.reference_model.simulated"] = True
        return attrs


def reported_ms(headers: Mapping[str, str]) -> float | None:
    """The ``x-auto-latency-ms`` value of lower-cased ``headers`` (ms), or None when absent or not
    a finite number ≥ 0."""
    raw = headers.get(LATENCY_HEADER)
    if raw is None:
        return None
    try:
        ms = float(raw)
    except ValueError:
        return None
    return ms if math.isfinite(ms) and ms >= 0.0 else None


def call_latency(headers: Mapping[str, str], measured_ms: float) -> CallLatency:
    """The latency of an attempt from its lower-cased response ``headers`` (empty when there was no
    response) and its wall time ``measured_ms`` (ms)."""
    simulated = headers.get(REFERENCE_MODEL_HEADER) == SIMULATED
    ms = reported_ms(headers)
    if ms is None:
        return CallLatency(measured_ms, MEASURED, measured_ms, simulated)
    return CallLatency(ms, SIMULATED if simulated else REPORTED, measured_ms, simulated)


class LatencyTally:
    """What the model calls inside a task or tool span reported about latency (thread-safe).

    Attributes:
        adjust_ms: Σ (reported − measured) latency of the calls (ms).
        reported: some call reported its latency.
        simulated: some call's response said the reference model is simulated.
    """

    __slots__ = ("_lock", "adjust_ms", "reported", "simulated")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.adjust_ms = 0.0
        self.reported = False
        self.simulated = False

    def add_call(self, latency: CallLatency) -> None:
        """Count one model-call attempt."""
        with self._lock:
            self.adjust_ms += latency.adjust_ms
            self.reported = self.reported or latency.source != MEASURED
            self.simulated = self.simulated or latency.simulated

    def absorb(self, child: "LatencyTally") -> None:
        """Count everything a finished child span counted."""
        with self._lock:
            self.adjust_ms += child.adjust_ms
            self.reported = self.reported or child.reported
            self.simulated = self.simulated or child.simulated

    def attributes(self, wall_ms: float) -> dict[str, Any]:
        """The span attributes for a span whose own wall time is ``wall_ms`` (ms): ``auto.latency_ms``
        (wall time + :attr:`adjust_ms`, at least 0, rounded to µs), ``auto.latency_source``
        (``"simulated"`` when a call was simulated, ``"reported"`` when one reported, else
        ``"measured"``) and ``auto.reference_model.simulated`` when simulated."""
        if self.simulated:
            source = SIMULATED
        elif self.reported:
            source = REPORTED
        else:
            source = MEASURED
        attrs: dict[str, Any] = {}
        if self.simulated:
            attrs["auto.reference_model.simulated"] = True
        attrs["auto.latency_ms"] = round(max(0.0, wall_ms + self.adjust_ms), 3)
        attrs["auto.latency_source"] = source
        return attrs
