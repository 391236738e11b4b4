"""The stream driver: a deployment replayed item by item through the product's ratchet.

Each item goes through one :class:`auto.ratchet.Ratchet` (the tiered runtime, deopt capture,
evidence-driven compiles in the background, atomic swaps, the shift and risk monitors, the
shadow audit). The run starts with no artifact and no witnesses unless a generation is adopted
first (``initial``: a warm start). This module adds only what a benchmark needs:

- **metering**: every reference call's cost (µ$) and latency is recorded per item; audit calls
  are metered separately (:attr:`StreamRun.audit_cost_usd_micros`) and are part of the tiered
  leg's spend;
- **a control leg**: the reference is asked again on every item (its cost is the all-reference
  baseline, actually run), and a second time to measure the reference's agreement with itself
  (the ceiling for parity and the base of excess silent-wrong). Control calls are measurement
  only: they never reach the store and are not part of the tiered leg's cost;
- **reproducibility**: after each item the driver waits until the ratchet is idle (its audits
  answered, a compile it started finished and installed), so the same seed gives the same run.
  A deployment never waits; this makes a compile "instant" in stream positions, which a real
  reference (about 0.7 s per call) nearly matches: a compile takes a few seconds, a few items.

Per row, ``artifact_answer`` is what the installed artifact would answer regardless of the guard
(its would-be output, computed on the request path anyway; ``None`` without an artifact).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from auto.errors import ArgumentError
from auto.progress import Progress
from auto.ratchet import CompilePolicy, Ratchet
from auto.gate import Contract


@dataclass
class Metered:
    """One reference call's answer with its measured cost (µ$, None if unknown) and latency (ms)."""

    answer: Any
    cost_usd_micros: float | None
    latency_ms: float
    simulated: bool


@dataclass
class StreamRow:
    """One stream position (one row of ratchet.csv)."""

    position: int
    tier: str
    reason: str
    score: float | None
    p_value: float | None
    latency_us: float
    cost_usd_micros: float
    generation: int | None
    answer: Any
    reference_answer: Any
    reference_answer_2: Any
    control_cost_usd_micros: float
    reference_latency_ms: float
    label: str | None = None
    artifact_answer: Any = None
    margin: float | None = None
    audit_cost_usd_micros: float = 0.0
    input: Any = None


@dataclass
class StreamRun:
    """Everything the report needs from one stream run.

    Attributes:
        rows: one per item.
        compiles: every compile attempt (``position`` = items served before it started).
        generations: every installed generation with its trigger and position.
        events: the ratchet's whole log, as it wrote it.
        last_manifest: the manifest of the generation installed at the end (None if none).
        shift_alarms, rollbacks: monitor alarms and rollbacks with their positions.
        shift_monitor: the exchangeability monitor's final state.
        audit: the shadow audit (counters, records); audit_cost_usd_micros: its reference spend.
        status: the ratchet's final :meth:`~auto.ratchet.Ratchet.status`.
    """

    rows: list[StreamRow] = field(default_factory=list)
    compiles: list[dict[str, Any]] = field(default_factory=list)
    generations: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    last_manifest: dict[str, Any] | None = None
    shift_alarms: list[dict[str, Any]] = field(default_factory=list)
    rollbacks: list[dict[str, Any]] = field(default_factory=list)
    shift_monitor: dict[str, Any] | None = None
    audit: Any = None
    audit_cost_usd_micros: float = 0.0
    status: dict[str, Any] = field(default_factory=dict)


def run_stream(
    *,
    task: str,
    items: list[dict[str, Any]],
    labels: list[str | None],
    reference: Callable[[dict[str, Any]], Metered],
    store_path: Path,
    contract: Contract,
    initial: Any = None,
    reference_model: str | None = None,
    progress: Callable[[str], None] | None = None,
    shift_alpha: float | None = 0.05,
    audit_rate: float = 0.05,
    audit_seed: int = 0,
    guard_factory: Callable[[Any, Any], Any] | None = None,
    policy: CompilePolicy | None = None,
    worker: str = "process",
) -> StreamRun:
    """Drive ``items`` through a ratchet on ``store_path``; see the module docstring.

    Args:
        task: the task name (as recorded).
        items: task inputs (dicts of the task's named arguments), in stream order.
        labels: design labels per item (reporting only; may be None).
        reference: the metered reference agent: input → :class:`Metered`.
        store_path: the stream's store (its witnesses, eval runs, artifacts, ratchet log).
        contract: the gate's contract for every generation.
        initial: a :class:`~auto.compile.CompileOutcome` adopted before the first item (a warm
            start); None starts with no artifact.
        reference_model: provenance label written into every generation's manifest.
        progress: optional callback for human-readable progress lines.
        shift_alpha: level of the exchangeability monitor (None: off).
        audit_rate, audit_seed: the shadow audit.
        guard_factory: replaces each installed artifact's guard (see :class:`Ratchet`).
        policy: when to compile (default :class:`CompilePolicy`).
        worker: the ratchet's compile worker (``"process"`` or ``"thread"``).

    Raises:
        ArgumentError: ``audit_rate`` outside [0, 1], ``shift_alpha`` outside (0, 1), an unknown
            worker.
    """
    if shift_alpha is not None and not 0.0 < shift_alpha < 1.0:
        raise ArgumentError(f"shift alpha must be in (0, 1), got {shift_alpha!r}")
    say = progress or (lambda _m: None)
    run = StreamRun()
    main_thread = threading.get_ident()
    last: dict[str, Metered] = {}
    audit_lock = threading.Lock()

    def tier0(inp: dict[str, Any]) -> Any:
        m = reference(inp)
        if threading.get_ident() == main_thread:
            last["m"] = m
        else:  # a shadow-audit call in the background: its spend is the tiered leg's too
            with audit_lock:
                run.audit_cost_usd_micros += m.cost_usd_micros or 0.0
        return m.answer

    r = Ratchet(tier0, store_path, task, contract=contract, audit_rate=audit_rate, audit_seed=audit_seed,
                policy=policy, shift_alpha=shift_alpha, worker=worker, reference_model=reference_model,
                progress=lambda m: say(f"  [{r.calls:>4}]{m}"), guard_factory=guard_factory, load=False)
    run.audit = r.tiered.audit
    try:
        if initial is not None:
            r.adopt(initial.wasm, generation=initial.generation)
        done = Progress("  [stream] items", len(items), say, stream=None)  # lines: the ratchet's own lines interleave
        for pos, inp in enumerate(items):
            if pos:
                done.advance()
            last.clear()
            audit_before = run.audit_cost_usd_micros
            res = r.call_result(inp)
            r.wait_idle()
            m = last.get("m")
            out = res.output if isinstance(res.output, dict) else None
            control = reference(inp)
            second = reference(inp)
            margin = out.get("margin") if out else None
            run.rows.append(StreamRow(
                position=pos, tier=res.tier, reason=res.reason, score=res.score, p_value=res.p_value,
                latency_us=res.latency_us if res.tier == "tier-1" else (m.latency_ms * 1000.0 if m else res.latency_us),
                cost_usd_micros=(m.cost_usd_micros or 0.0) if m else 0.0, generation=res.generation,
                answer=res.answer, reference_answer=control.answer, reference_answer_2=second.answer,
                control_cost_usd_micros=control.cost_usd_micros or 0.0, reference_latency_ms=control.latency_ms,
                label=labels[pos] if pos < len(labels) else None,
                artifact_answer=out.get("answer") if out else None,
                margin=margin if isinstance(margin, (int, float)) and not isinstance(margin, bool) else None,
                audit_cost_usd_micros=run.audit_cost_usd_micros - audit_before, input=inp,
            ))
        if items:
            done.advance()
        done.close()
        r.wait_idle()
    finally:
        run.status = r.status()
        run.events = r.events
        r.close()
    _summarize(run)
    return run


def _summarize(run: StreamRun) -> None:
    """Compiles, generations, alarms and rollbacks from the ratchet's log."""
    from auto.store import Store

    for e in run.events:
        d = e["detail"]
        pos = d.get("at_call", e.get("calls"))
        if e["kind"] == "compile":
            run.compiles.append({"position": pos, "generation": e["generation"], "verdict": d.get("verdict"),
                                 "reason": d.get("reason"), "eval_run_id": d.get("eval_run_id"),
                                 "compiled_as": d.get("compiled_as"), "trigger": (d.get("trigger") or {}).get("kind"),
                                 "trigger_evidence": (d.get("trigger") or {}).get("evidence"),
                                 "compile_s": d.get("seconds"), "lane": (d.get("trigger") or {}).get("lane"),
                                 "rung_s": {r["rung"]: r["seconds"] for r in d.get("rungs") or []},
                                 "after_shift_alarm": (d.get("trigger") or {}).get("kind") == "shift-alarm"})
        elif e["kind"] == "install":
            run.generations.append({"generation": e["generation"], "position": pos, "artifact_id": e["artifact_id"],
                                    "compiled_as": d.get("compiled_as"), "parent": d.get("parent"),
                                    "trigger": (d.get("trigger") or {}).get("kind")})
        elif e["kind"] == "alarm":
            run.shift_alarms.append({"position": pos, "generation": e["generation"], "reason": d.get("reason"),
                                     "monitor": d.get("monitor")})
        elif e["kind"] == "rollback":
            run.rollbacks.append({"position": pos, "generation": e["generation"], "reason": d.get("reason"),
                                  "to": d.get("to")})
    run.shift_monitor = run.status.get("shift_monitor")
    aid = run.status.get("artifact_id")
    if aid is not None and run.status.get("store_path"):
        with Store(run.status["store_path"]) as st:
            stored = st.get_artifact(aid)
            run.last_manifest = stored.manifest if stored else None
