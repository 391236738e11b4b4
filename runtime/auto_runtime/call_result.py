"""What one tiered call hands back: its tier, :class:`CallResult`, the deopt reason of an
artifact failure (:func:`failure_reason`), and the installed :class:`Generation` a call runs on
(see :mod:`auto_runtime.tiered` for the decision order).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

from auto_runtime.artifact import Artifact
from auto_runtime.errors import (
    AutoError,
    CallTimeout,
    CapabilityError,
    FuelExhausted,
    InputSchemaError,
    LimitError,
    MemoryLimitExceeded,
    OutputError,
    ToolCallError,
    TrapError,
)
from auto_runtime.guard import Guard

OVERLAY_REASON = "overlay"
"""The ``reason`` of a tier-1 answer given by the table overlay."""

TIER_1 = "tier-1"
TIER_0 = "tier-0"
DECLINED = "declined"


@dataclass(slots=True)
class CallResult:
    """The outcome of one tiered call.

    Attributes:
        answer: the task output (``None`` when declined).
        tier: ``"tier-1"`` (artifact), ``"tier-0"`` (reference) or ``"declined"``.
        reason: ``"guard-pass"`` or why the call deopted / was declined.
        score: the artifact's ``nonconformity`` output for this input, or ``None`` (no artifact
            output, or an artifact without that field, e.g. a program).
        p_value: the guard's p-value (a stack's: its ``conformal-novelty`` component's), or
            ``None``; still reported while the task is tightened.
        latency_us: wall time of the whole call in µs (``perf_counter_ns``), reference included,
            capture hook excluded; in a batch, the batch's artifact time is divided evenly among
            its items and each deopted item adds its own reference time.
        generation: the artifact's manifest generation (``None`` without an artifact).
        artifact_id: the artifact's ``sha256:`` id (``None`` without an artifact).
        output: the artifact's whole output object for this input (``{"answer", "margin",
            "nonconformity", ...}``) when it ran and answered, also when the guard deopted (its
            would-be answer); ``None`` otherwise.
        tool_calls: a capability artifact's tool calls in this call (``tool``, ``arguments``,
            ``effects``, ``kind``, ``live``, ``ms``, ``error``), also when it deopted; ``None``
            otherwise.
    """

    answer: Any
    tier: str
    reason: str
    score: float | None
    p_value: float | None
    latency_us: float
    generation: int | None
    artifact_id: str | None
    output: Any = None
    tool_calls: list[dict[str, Any]] | None = None


class Generation(NamedTuple):
    """The installed generation a call runs on (swapped atomically; a call in flight keeps its own)."""

    artifact: Artifact | None
    guard: Guard
    validate: Callable[[Any], None]
    generation: int | None
    artifact_id: str | None
    task: str | None
    tightened: str | None = None
    table: Callable[[Any], tuple[Any, bytes | None]] | None = None
    """The artifact's table answers whose schema check is known to pass, with the input's
    canonical bytes where computed (:attr:`auto_runtime.table.TableIndex.lookup`), or None."""
    table_many: Callable[[list[Any]], tuple[list[Any], list[bytes | None] | None]] | None = None
    """The same for a list of inputs (:attr:`auto_runtime.table.TableIndex.lookup_many`), or None."""



def failure_reason(err: AutoError) -> str:
    """The deopt reason for an artifact failure."""
    if isinstance(err, FuelExhausted):
        return "limit: fuel"
    if isinstance(err, CallTimeout):
        return "limit: timeout"
    if isinstance(err, MemoryLimitExceeded):
        return "limit: memory"
    if isinstance(err, LimitError):
        return "limit: other"
    if isinstance(err, TrapError):
        return f"trap: {getattr(err, 'trap_message', err)}"
    if isinstance(err, OutputError):
        return f"output-error: {err}"
    if isinstance(err, InputSchemaError):
        return f"input-schema: {err}"
    if isinstance(err, ToolCallError):
        return f"tool: {err.reason}"
    if isinstance(err, CapabilityError):
        return f"capability: {err}"
    return f"error: {type(err).__name__}: {err}"
