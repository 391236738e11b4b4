"""The ratchet's scheduler: when to compile, in which lane, one attempt at a time.

After every captured record the host asks :meth:`Scheduler.maybe_compile`: the
:class:`~auto.ratchet.policy.CompilePolicy` reads the counters and may name a trigger;
:meth:`Scheduler.start_attempt` then takes the store's compile lock (shared by every process and
host of the store), does the attempt's bookkeeping (the one place it is written) and starts the
compile on a background thread, which runs it in a child process (:mod:`auto.ratchet.worker`)
and hands a generation that passed its gate to the installer.

Lanes (:meth:`Scheduler.lane`): a compile runs the whole ladder (``full``), or the table rungs
alone (``table``: :data:`TABLE_RUNGS`, the near-duplicate table, else the memo) — for a table refresh, and whenever the last refusals of the slow rungs predict
that they would refuse again (``table (slow rungs predicted to refuse)``; the specialist from its
certificate, :func:`~auto.ratchet.policy.slow_rungs_could_pass`, the program from its
out-of-fold agreement, :func:`~auto.ratchet.policy.program_could_pass`; a specialist refused near
certification is predicted with the contract's ``noise_probe_margin`` added to epsilon once the
re-asked inputs grew since the refusal, :func:`~auto.ratchet.policy.noise_evidence_grew`, since its
next certificate may be on the excess over the reference's noise) — or without the one
slow rung predicted to refuse (``partial``), so that a table refresh does not wait the minutes a
doomed program search or specialist takes. A ``full`` or ``partial`` compile is itself preceded by
a table-lane compile (``table (ahead of a slow compile)``, :meth:`Scheduler.table_first`) when
the overlay answered inputs the installed table lacks: the table lands in seconds, the slow rungs
after it, each logged as its own attempt with its per-rung seconds. After every slow compile the noise probe
(:mod:`auto.ratchet.probe`) re-decides whether it runs, from the refusals just recorded. Table lanes apply only while the installed generation
answers no input it has not witnessed, or only through witnessed neighbourhoods (a near-duplicate
table, which the table lane rebuilds): a table alone would be weaker than anything else. Between two
tables, witnessed inputs are answered by the runtime's table overlay at once
(:mod:`auto_runtime.overlay`): the table lane only makes the overlay's entries portable.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from auto.ratchet.events import CompileRow, Fired, Lane, Trigger
from auto.ratchet.policy import CompilePolicy, noise_evidence_grew, program_could_pass, slow_rungs_could_pass
from auto.ratchet.worker import CompileRequest, CompileResult, default_out_path, run_compile
from auto.store import local_path
from auto.store.lock import compile_lock

log = logging.getLogger("auto.ratchet")

TABLE_RUNGS = ("neardup", "memo")
"""The rungs of a table lane: the near-duplicate table when its step is certified, else the memo."""

TABLE_IN_PROCESS_WITNESSES = 2000
"""A table-lane compile of a task with at most this many distinct witnesses runs on the compile
thread of the serving process, not in a child: a child's start re-imports the compiler (measured
about 1.7 s of CPU, 6 s wall on a loaded 2-core machine), more than such a table compile itself
takes; larger tables go to a child, whose CPU work stays off the serving interpreter."""


class Scheduler:
    """Compile attempts of the host ratchet (see the module docstring).

    Args:
        host: the :class:`~auto.ratchet.core.Ratchet`.
        policy: when to compile.
        worker: ``"process"`` or ``"thread"``.
        timeout_s: a compile running longer is killed (``timeout``).
    """

    def __init__(self, host: Any, policy: CompilePolicy, worker: str, timeout_s: float) -> None:
        self.host = host
        self.policy = policy
        self.worker = worker
        self.timeout_s = timeout_s
        self.lock = compile_lock(host.store_path)
        self._lock_busy_logged = False
        self.thread: threading.Thread | None = None
        self.closed = False
        self._unfolded_at_table = 0

    @property
    def compiling(self) -> bool:
        """Whether a compile runs now."""
        th = self.thread
        return th is not None and th.is_alive()

    def maybe_compile(self) -> None:
        """Start a compile if the policy names a trigger now (and none runs)."""
        h = self.host
        h.installer.poll_store(self.compiling)
        with h.state_lock:
            if self.closed or self.compiling:
                return
            self._sync_overlay()
            fired = self.policy.trigger(h.state)
            if fired is not None:
                self.start_attempt(fired)

    def _sync_overlay(self) -> None:
        """Copy the overlay's service counters into the policy's state (state lock held). Inputs
        the overlay first served count toward ``memo`` only while a table lane can rebuild the
        installed generation (a specialist's refresh is a full compile: it waits for growth)."""
        h, st = self.host, self.host.state
        ov = h.overlay
        if ov is None:
            return
        st.overlay_answers = ov.hits
        if h.installer.table_lane_rebuilds:
            st.overlay_new_inputs = ov.inputs_first_served
        else:
            st.overlay_new_inputs = st.overlay_new_inputs_at_attempt = ov.inputs_first_served

    def on_overlay_answer(self) -> None:
        """After a table-overlay answer (the request path: two integer comparisons unless a
        trigger may fire): a stream of repeats raises no deopt, so the overlay's own counters
        may start the first compile or a table refresh (:mod:`auto.ratchet.policy`)."""
        h = self.host
        ov, st, pol = h.overlay, h.state, self.policy
        if ov is None or self.closed or self.compiling:
            return
        if st.installed is None and st.attempts == 0:
            if st.repeats_consistent + ov.hits < pol.first_repeats:
                return
        elif not pol.memo_new or ov.inputs_first_served - st.overlay_new_inputs_at_attempt < pol.memo_new:
            return
        self.maybe_compile()

    def start_attempt(self, fired: Fired) -> bool:
        """Take the compile lock, count the attempt, reset the counters it consumes, start the
        compile thread. Returns False when another process holds the lock (the trigger waits;
        logged once per such stretch, not counted as an attempt). Call with the state lock held."""
        h = self.host
        if not self._take_lock(fired):
            return False
        st = h.state
        st.attempts += 1
        st.known_misses_at_attempt = st.known_misses
        st.overlay_new_inputs_at_attempt = st.overlay_new_inputs
        st.alarm_streak = st.alarm_streak + 1 if fired.kind.is_alarm else 0
        if fired.kind is not Trigger.MEMO:
            st.witnesses_at_attempt = st.witnesses
            st.reasked_at_attempt = st.reasked
            st.repeats_at_attempt = st.repeats_consistent
            st.new_labels = {}
            st.deopts_since_attempt = st.would_be_correct_since_attempt = 0
        st.alarm = None
        th = threading.Thread(target=self._compile, args=(fired,), name=f"auto-ratchet-{h.task}", daemon=True)
        self.thread = th
        th.start()
        return True

    def _take_lock(self, fired: Fired) -> bool:
        if self.lock.acquire():
            self._lock_busy_logged = False
            return True
        if not self._lock_busy_logged:
            self._lock_busy_logged = True
            self.host.log(CompileRow(verdict="skipped", trigger=fired,
                                     reason="another process holds the compile lock (its generations are installed "
                                            "from the store)"))
        return False

    def lane(self, fired: Fired) -> tuple[Lane, list[str] | None]:
        """The lane of a compile about to run and the rungs it tries (None: the whole ladder;
        see the module docstring): a slow rung whose last refusal predicts another is left out
        (:func:`~auto.ratchet.policy.slow_rungs_could_pass`,
        :func:`~auto.ratchet.policy.program_could_pass`)."""
        h = self.host
        if h.records_runs or not h.installer.table_lane_rebuilds:
            return Lane.FULL, None
        if fired.kind is Trigger.MEMO:
            return Lane.TABLE, list(TABLE_RUNGS)
        st, c = h.state, h.contract
        spec = (st.refusal or {}).get("specialist")
        grew = spec is not None and noise_evidence_grew(spec.get("reasked", 0), st.reasked, c.noise_min_reasked)
        rungs = [r for r, ok in (
            ("program", h.programs and program_could_pass(st.refusal, st.witnesses)),
            ("specialist", slow_rungs_could_pass(spec, (spec or {}).get("witnesses", 0), st.witnesses,
                                                 c.epsilon, c.delta, c.noise_probe_margin if grew else 0.0))) if ok]
        if len(rungs) == (2 if h.programs else 1):
            return Lane.FULL, None
        return (Lane.TABLE_PREDICTED if not rungs else Lane.PARTIAL), rungs + list(TABLE_RUNGS)

    def table_first(self, lane: Lane) -> bool:
        """Whether a compile of ``lane`` is preceded by a table-lane compile (see the module
        docstring): it runs slow rungs, a table lane can rebuild what is installed, and the
        overlay answered inputs the installed table does not hold since the last table step."""
        h = self.host
        ov = h.overlay
        return (lane in (Lane.FULL, Lane.PARTIAL) and ov is not None and not h.records_runs
                and h.installer.table_lane_rebuilds and ov.unfolded_hits > self._unfolded_at_table)

    def mode(self, lane: Lane | None) -> str:
        """Where a compile of ``lane`` runs: a table lane of a small task on this thread
        (:data:`TABLE_IN_PROCESS_WITNESSES`), anything else where the ratchet's ``worker`` says."""
        if lane in (Lane.TABLE, Lane.TABLE_AHEAD) and self.host.state.witnesses <= TABLE_IN_PROCESS_WITNESSES:
            return "thread"
        return self.worker

    def _run(self, req: CompileRequest, lane: Lane | None) -> CompileResult:
        """Run one compile where :meth:`mode` says (in process: through the host's store, so the
        process keeps one connection to the file)."""
        mode = self.mode(lane)
        return run_compile(req, timeout_s=self.timeout_s, mode=mode,
                           store=self.host.store if mode == "thread" and self.worker == "process" else None)

    def _request(self, generation: int, rungs: list[str] | None) -> CompileRequest:
        h = self.host
        return CompileRequest(store_path=h.store_path, task=h.task, contract=h.contract.model_dump(),
                              generation=generation,
                              out_path=default_out_path(local_path(h.store_path), h.task, generation),
                              reference_model=h.reference_model, programs=h.programs, rungs=rungs,
                              served=h.overlay.service() if h.overlay is not None else None)

    def _compile(self, fired: Fired) -> None:
        h = self.host
        try:
            latest = h.store.latest_artifact(h.task)
            generation = (latest.generation + 1) if latest else 1
            fired.lane, rungs = self.lane(fired)
            if self.table_first(fired.lane):  # the table lane never waits behind the slow rungs
                self._unfolded_at_table = h.overlay.unfolded_hits
                ahead = Fired(Trigger.MEMO, {"ahead_of": fired.kind.value, **fired.evidence}, lane=Lane.TABLE_AHEAD)
                res = self._run(self._request(generation, list(TABLE_RUNGS)), Lane.TABLE_AHEAD)
                self._finish(res, ahead)
                if self.closed:
                    return
                latest = h.store.latest_artifact(h.task)
                generation = (latest.generation + 1) if latest else generation + 1
            self._finish(self._run(self._request(generation, rungs), fired.lane), fired)
        except Exception as e:  # noqa: BLE001 - the background thread must survive anything; recorded
            log.exception("task %s: compile thread failed", h.task)
            h.log(CompileRow(verdict="error", reason=f"{type(e).__name__}: {e}", trigger=fired))
        finally:
            self.lock.release()

    def _finish(self, res: CompileResult, fired: Fired) -> None:
        h = self.host
        if fired.lane in (Lane.FULL, Lane.PARTIAL) and res.verdict in ("pass", "refuse"):
            with h.state_lock:  # per slow rung tried: its refusal's certificate, or none if it passed
                st = h.state
                tried = {r.get("rung") for r in res.detail.get("rungs") or []}
                kept = {k: v for k, v in (st.refusal or {}).items() if k not in tried}
                for k, v in (res.detail.get("certificate") or {}).items():
                    kept[k] = {**v, "witnesses": st.witnesses_at_attempt, "reasked": st.reasked_at_attempt}
                st.refusal = kept or None
                h.noise_probe.update(st.refusal)
        h.log(CompileRow(res.generation, res.artifact_id, verdict=res.verdict, reason=res.reason, trigger=fired,
                         seconds=round(res.seconds, 3), compiled_as=res.compiled_as, eval_run_id=res.eval_run_id,
                         rungs=res.detail.get("rungs"), evidence=h.evidence.describe(),
                         overlay=h.overlay.service() if h.overlay is not None else None))
        if res.verdict != "pass" or res.artifact_id is None:
            h.say(f"  compile of generation {res.generation} ({fired.kind.value}): {res.verdict}: {res.reason}")
            return
        h.installer.consider(res.generation, res.artifact_id, fired)

    def compile_now(self, reason: str) -> bool:
        """Start a ``manual`` compile now unless one is running; True when started."""
        h = self.host
        with h.state_lock:
            if self.closed or self.compiling:
                return False
            return self.start_attempt(Fired(Trigger.MANUAL, {"reason": reason}))


__all__ = ["Scheduler"]
