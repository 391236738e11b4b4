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

The guard stack in the stream:

* **shift alarm** — each call's nonconformity score (not exact-match table hits, whose score 0
  is not a specialist score) feeds an online exchangeability test
  (:class:`auto.guards.shift.ShiftMonitor`): the score's smoothed conformal p-value against the
  installed generation's calibration scores plus the scores fed since that generation was
  installed (independent and uniform when the live traffic is exchangeable with the calibration
  inputs), bet on by a one-sided test martingale that grows only on small p-values. The monitor
  restarts at 1 whenever a generation is installed (``reset_monitor_on_recompile``), so
  ``shift_alpha`` bounds the probability of a false alarm *per generation* (Ville's inequality;
  a calibration split stranger than the live traffic only makes alarms rarer). When it alarms,
  the runtime is tightened (:meth:`TieredTask.tighten`: every call deopts until the next
  generation is installed) and the next generation is compiled as soon as
  ``recompile_after_alarm`` new witnesses exist. Alarm positions are in
  :attr:`StreamRun.shift_alarms`.
* **shadow audit** — with ``audit_rate > 0`` a seeded fraction of tier-1 answers is re-asked at
  tier 0 in the background (``TieredTask(audit_rate=...)``); its reference calls are metered
  separately (:attr:`StreamRun.audit_cost_usd_micros`) and are part of the tiered leg's spend.
* **host guard** — ``guard_factory`` may replace each installed artifact's guard (e.g. the
  host-side semantic novelty test of :mod:`auto.guards.semantic`); a guard with a ``prime(input)`` method
  is primed with each input before the call.

Per row, ``artifact_answer`` is what the installed artifact answers for the item regardless of
the guard (measurement only, for false-abstain rates; ``None`` without an artifact or on error).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from auto_runtime import Artifact, TieredTask

from auto.errors import GateRefused
from auto.compile import compile_task
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
    artifact_answer: Any = None
    margin: float | None = None


@dataclass
class StreamRun:
    """Everything the report needs from one stream run."""

    rows: list[StreamRow] = field(default_factory=list)
    compiles: list[dict[str, Any]] = field(default_factory=list)
    artifacts: list[Path] = field(default_factory=list)
    last_outcome: Any = None
    shift_alarms: list[dict[str, Any]] = field(default_factory=list)
    shift_monitor: dict[str, Any] | None = None
    audit: Any = None
    audit_cost_usd_micros: float = 0.0


def novelty_calibration_scores(manifest: dict[str, Any] | None) -> list[float] | None:
    """The calibration scores of a manifest's ``conformal-novelty`` guard (top level or in a stack).

    Returns:
        The scores (ascending, as stored), or ``None`` when the guard has no such component (a
        program or memo artifact): the shift monitor then ranks scores only against the stream's.
    """
    guard = (manifest or {}).get("guard") or {}
    entries = [guard] + [c for c in guard.get("components") or [] if isinstance(c, dict)]
    for e in entries:
        if e.get("method") == "conformal-novelty" and isinstance(e.get("calibration_scores"), list):
            return list(e["calibration_scores"])
    return None


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
    shift_alpha: float | None = 0.05,
    recompile_after_alarm: int = 1,
    audit_rate: float = 0.0,
    audit_seed: int = 0,
    audit_max: int | None = None,
    guard_factory: Callable[[Artifact, Store], Any] | None = None,
    reset_monitor_on_recompile: bool = True,
    shift_method: str = "step-jumper",
    shift_input: str = "score",
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
        initial: a :class:`~auto.compile.CompileOutcome` to install before the first item (a warm
            start: a generation compiled before deployment); None starts with no artifact.
        progress: optional callback for human-readable progress lines.
        shift_alpha: level of the shift alarm (the martingale alarms at ``1/shift_alpha``;
            Ville's inequality bounds the false-alarm probability per generation by it); ``None``
            disables the monitor. The default 0.05 weighs what an alarm costs: a false one only
            deopts until the next generation, which is compiled at once (one extra compile, a few
            tier-0 calls, never a wrong answer); a missed one leaves silent-wrong answers in
            place. With ~5 generations per 300 items that is at most ~0.25 expected false
            alarms per such stream.
        recompile_after_alarm: after an alarm, compile as soon as this many new witnesses exist.
        audit_rate: fraction of tier-1 answers re-asked at tier 0 in the background (0 = off).
        audit_seed, audit_max: the audit's sampling seed and its cap on audited answers.
        guard_factory: ``(artifact, store) -> Guard`` replacing each installed artifact's guard
            (None keeps the manifest's guard).
        reset_monitor_on_recompile: restart the shift monitor (wealth back to 1) whenever a
            generation is installed, so ``shift_alpha`` bounds the false-alarm probability per
            generation; False keeps the wealth across routine recompiles and only swaps the
            reference scores (:meth:`ShiftMonitor.rebase`), so evidence of a shift that began under
            the previous generation carries over. The generation compiled after an alarm always
            restarts it.
        shift_method: the monitor's bets (:class:`auto.guards.shift.ShiftMonitor` ``method``):
            ``"step-jumper"`` (one-sided), ``"jumper"`` or ``"plugin"`` (MAPIE's).
        shift_input: ``"score"`` feeds each call's nonconformity score as an online conformal
            p-value against the installed generation's calibration scores plus the scores fed
            since it was installed; ``"p_value"`` feeds the guard's own p-value against the fixed
            calibration set (the earlier behaviour; see the module docstring).

    Raises:
        UsageError: ``audit_rate`` outside [0, 1], ``compile_every`` or ``recompile_after_alarm``
            below 1, ``shift_alpha`` outside (0, 1), an unknown ``shift_input`` or ``shift_method``.
    """
    from auto.errors import UsageError

    if not 0.0 <= audit_rate <= 1.0:
        raise UsageError(f"audit rate must be in [0, 1], got {audit_rate!r}")
    if compile_every < 1 or recompile_after_alarm < 1:
        raise UsageError("compile_every and recompile_after_alarm must be >= 1")
    if shift_alpha is not None and not 0.0 < shift_alpha < 1.0:
        raise UsageError(f"shift alpha must be in (0, 1), got {shift_alpha!r}")
    if shift_input not in ("score", "p_value"):
        raise UsageError(f"shift_input must be 'score' or 'p_value', got {shift_input!r}")
    say = progress or (lambda _m: None)
    run = StreamRun()
    main_thread = threading.get_ident()
    last_meter: dict[str, Metered] = {}
    audit_lock = threading.Lock()

    def tier0(inp: dict[str, Any]) -> Any:
        m = reference(inp)
        if threading.get_ident() == main_thread:
            last_meter["m"] = m
        else:  # a shadow-audit call in the background: its spend is the tiered leg's too
            with audit_lock:
                run.audit_cost_usd_micros += m.cost_usd_micros or 0.0
        return m.answer

    def capture(rec: dict[str, Any]) -> None:
        store.add_witness(task=task, input=rec["input"], output=rec["output"], attributes={
            "auto.deopt.reason": rec.get("reason"),
            "auto.deopt.artifact_id": rec.get("artifact_id"),
            "auto.deopt.generation": rec.get("generation"),
        })

    monitor = None
    if shift_alpha is not None:
        from auto.guards.shift import ShiftMonitor

        # jump_size 0.02: the share of wealth moved back onto the bets each step, so a shift that
        # starts tens of items into a generation still finds capital on them
        monitor = ShiftMonitor(alpha=shift_alpha, method=shift_method, jump_size=0.02, seed=audit_seed)
    tiered = TieredTask(None, reference=tier0, capture=capture, audit_rate=audit_rate, audit_seed=audit_seed,
                        audit_max=audit_max)
    run.audit = tiered.audit

    def install(wasm: bytes, artifact_id: str, reset_monitor: bool) -> Artifact:
        art = Artifact.load(wasm, expected_id=artifact_id)
        if guard_factory is not None:
            art.guard = guard_factory(art, store)
        tiered.swap(art)
        if monitor is not None:
            ref = novelty_calibration_scores(art.manifest) if shift_input == "score" else None
            if reset_monitor or monitor.alarm:  # an alarm is answered by the generation installed after it
                monitor.reset(ref)
            else:
                monitor.rebase(ref)
        return art

    new_witnesses = 0
    generation = 0
    alarm_pending = False
    art: Artifact | None = None
    if initial is not None:
        art = install(initial.wasm, initial.artifact_id, True)
        generation = initial.generation
        run.last_outcome = initial
    for pos, inp in enumerate(items):
        last_meter.clear()
        prime = getattr(art.guard, "prime", None) if art is not None else None
        if prime is not None:
            prime(inp)
        res = tiered(inp)
        if res.tier == "tier-0":
            new_witnesses += 1
        artifact_answer = None
        margin = None
        if art is not None:
            try:
                out = art.call(inp)
                artifact_answer = out.get("answer") if isinstance(out, dict) else None
                margin = out.get("margin") if isinstance(out, dict) else None
            except Exception:  # noqa: BLE001 - measurement only; a failing artifact answers nothing
                artifact_answer = None
        # a memo-first table hit reports score 0 (p = 1): that score does not come from the
        # specialist's calibration distribution, so it is not fed to the monitor
        fed = False
        if monitor is not None and tiered.tightened is None and res.score is not None and res.score != 0:
            if shift_input == "score":
                fed = monitor.update_score(res.score)
            elif res.p_value is not None and res.p_value == res.p_value:
                fed = monitor.update(float(res.p_value))
        if fed and monitor is not None and tiered.tightened is None:
            alarm_pending = True
            why = f"exchangeability martingale {monitor.statistic:.3g} >= 1/alpha = {1.0 / shift_alpha:.3g}"
            tiered.tighten(why)
            run.shift_alarms.append({"position": pos, "generation": generation, "statistic": monitor.statistic,
                                     "fed": monitor.n, "reason": why})
            say(f"  [{pos:>4}] shift alarm ({why}): every call deopts until the next generation")
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
                artifact_answer=artifact_answer,
                margin=margin if isinstance(margin, (int, float)) and not isinstance(margin, bool) else None,
            )
        )
        due = new_witnesses >= compile_every or (alarm_pending and new_witnesses >= recompile_after_alarm)
        if due and pos + 1 < len(items):
            new_witnesses = 0
            t0 = time.perf_counter()
            path = out_dir / f"{task}.gen{generation + 1}.wasm"
            after_alarm = alarm_pending
            alarm_pending = False  # a refusal stays tightened and retries at the ordinary cadence
            if audit_rate > 0 and run.audit is not None:
                run.audit.wait(30.0)  # audits already selected finish first: the compile sees their witnesses
            try:
                outcome = compile_task(store, task, contract=contract, generation=generation + 1, out_path=path,
                                       reference_model=reference_model)
            except GateRefused as e:
                run.compiles.append({"position": pos + 1, "generation": generation + 1, "verdict": "refuse", "reason": e.reason,
                                     "eval_run_id": e.eval_run_id, "compile_s": time.perf_counter() - t0,
                                     "after_shift_alarm": after_alarm})
                say(f"  [{pos + 1:>4}] compile of generation {generation + 1} refused: {e.reason}")
                continue
            generation += 1
            art = install(outcome.wasm, outcome.artifact_id, after_alarm or reset_monitor_on_recompile)
            run.artifacts.append(path)
            run.last_outcome = outcome
            run.compiles.append({"position": pos + 1, "generation": generation, "verdict": "pass",
                                 "compiled_as": outcome.manifest["compiled_as"], "reason": outcome.reason,
                                 "eval_run_id": outcome.eval_run_id, "artifact_id": outcome.artifact_id,
                                 "artifact_bytes": outcome.artifact_bytes, "compile_s": time.perf_counter() - t0,
                                 "after_shift_alarm": after_alarm})
            say(f"  [{pos + 1:>4}] generation {generation} installed, compiled as {outcome.manifest['compiled_as']}"
                + (" (the specialist did not pass the gate yet)" if outcome.manifest["compiled_as"] == "memo" else "")
                + (" (after a shift alarm)" if after_alarm else ""))
    if monitor is not None:
        run.shift_monitor = monitor.describe()
    if run.audit is not None and audit_rate > 0:
        run.audit.wait(60.0)
    return run
