"""The stream driver: a deployment replayed item by item through the tiered runtime (the ratchet).

The run starts with no artifact, as a deployment would. Each item goes through
:class:`auto_runtime.TieredTask`: tier-1 when a generation is installed and its guard passes,
otherwise a deopt to the reference agent whose answer is returned and whose witness is handed to
the capture sink (the stream's store). Whenever ``compile_every`` new witnesses have accumulated
the next generation is compiled; a refused compile keeps the current generation.

Beside the tiered leg, a control leg asks the reference agent on every item (its cost is the
all-reference baseline, actually run), and a second reference call per item measures the
reference's agreement with itself (the ceiling for parity). Control and self-agreement calls
are measurement only: they never reach the store and are not part of the tiered leg's cost.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from auto_runtime import Artifact, TieredTask

from auto.errors import GateRefused
from auto.pipeline import compile_task
from auto.store import Store
from auto.verify import Contract


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


@dataclass
class StreamRun:
    """Everything the report needs from one stream run."""

    rows: list[StreamRow] = field(default_factory=list)
    compiles: list[dict[str, Any]] = field(default_factory=list)
    artifacts: list[Path] = field(default_factory=list)
    last_outcome: Any = None


def run_stream(
    *,
    task: str,
    items: list[dict[str, Any]],
    labels: list[str | None],
    reference: Callable[[dict[str, Any]], Metered],
    store: Store,
    out_dir: Path,
    contract: Contract,
    compile_every: int = 25,
    initial: Any = None,
    reference_model: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> StreamRun:
    """Drive ``items`` through the tiered runtime with recompiles; see the module docstring.

    Args:
        task: the task name (as recorded).
        items: task inputs (dicts of the task's named arguments), in stream order.
        labels: design labels per item (reporting only; may be None).
        reference: the metered reference agent: input → :class:`Metered`.
        store: the stream's own store (starts empty); the capture sink writes witnesses here.
        out_dir: where generation artifacts are written.
        contract: the gate's contract for every generation.
        compile_every: new witnesses between compile attempts.
        reference_model: provenance label written into every generation's manifest.
        initial: a :class:`~auto.pipeline.CompileOutcome` to install before the first item (a warm
            start: a generation compiled before deployment); None starts with no artifact.
        progress: optional callback for human-readable progress lines.
    """
    say = progress or (lambda _m: None)
    run = StreamRun()
    last_meter: dict[str, Metered] = {}

    def tier0(inp: dict[str, Any]) -> Any:
        m = reference(inp)
        last_meter["m"] = m
        return m.answer

    def capture(rec: dict[str, Any]) -> None:
        store.add_witness(task=task, input=rec["input"], output=rec["output"], attributes={
            "auto.deopt.reason": rec.get("reason"),
            "auto.deopt.artifact_id": rec.get("artifact_id"),
            "auto.deopt.generation": rec.get("generation"),
        })

    tiered = TieredTask(None, reference=tier0, capture=capture)
    new_witnesses = 0
    generation = 0
    if initial is not None:
        tiered.swap(Artifact.load(initial.wasm, expected_id=initial.artifact_id))
        generation = initial.generation
        run.last_outcome = initial
    for pos, inp in enumerate(items):
        last_meter.clear()
        res = tiered(inp)
        if res.tier == "tier-0":
            new_witnesses += 1
        m = last_meter.get("m")
        control = reference(inp)
        second = reference(inp)
        run.rows.append(
            StreamRow(
                position=pos,
                tier=res.tier,
                reason=res.reason,
                score=res.score,
                p_value=res.p_value,
                latency_us=res.latency_us if res.tier == "tier-1" else (m.latency_ms * 1000.0 if m else res.latency_us),
                cost_usd_micros=(m.cost_usd_micros or 0.0) if m else 0.0,
                generation=res.generation,
                answer=res.answer,
                reference_answer=control.answer,
                reference_answer_2=second.answer,
                control_cost_usd_micros=control.cost_usd_micros or 0.0,
                reference_latency_ms=control.latency_ms,
                label=labels[pos] if pos < len(labels) else None,
            )
        )
        if new_witnesses >= compile_every and pos + 1 < len(items):
            new_witnesses = 0
            t0 = time.perf_counter()
            path = out_dir / f"{task}.gen{generation + 1}.wasm"
            try:
                outcome = compile_task(store, task, contract=contract, generation=generation + 1, out_path=path,
                                       reference_model=reference_model)
            except GateRefused as e:
                run.compiles.append({"position": pos + 1, "generation": generation + 1, "verdict": "refuse", "reason": e.reason,
                                     "eval_run_id": e.eval_run_id, "compile_s": time.perf_counter() - t0})
                say(f"  [{pos + 1:>4}] compile of generation {generation + 1} refused: {e.reason}")
                continue
            generation += 1
            tiered.swap(Artifact.load(outcome.wasm, expected_id=outcome.artifact_id))
            run.artifacts.append(path)
            run.last_outcome = outcome
            run.compiles.append({"position": pos + 1, "generation": generation, "verdict": "pass",
                                 "compiled_as": outcome.manifest["compiled_as"], "reason": outcome.reason,
                                 "eval_run_id": outcome.eval_run_id, "artifact_id": outcome.artifact_id,
                                 "artifact_bytes": outcome.artifact_bytes, "compile_s": time.perf_counter() - t0})
            say(f"  [{pos + 1:>4}] generation {generation} installed, compiled as {outcome.manifest['compiled_as']}"
                + (" (the specialist did not pass the gate yet)" if outcome.manifest["compiled_as"] == "memo" else ""))
    return run
