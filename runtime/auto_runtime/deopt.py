"""Answering at tier-0: the reference runs (inside the effect journal when an effect already
ran), its answer is captured for the next generation, and a guard that raises becomes a deopt
(counted, never propagated). Part of :class:`auto_runtime.tiered.TieredTask`.
"""

from __future__ import annotations

import logging
import threading
from time import perf_counter_ns
from typing import Any, Callable

from auto_runtime.call_result import DECLINED, TIER_0, CallResult, Generation
from auto_runtime.tools import effect_journal

log = logging.getLogger("auto_runtime.tiered")


class Deopts:
    """The tier-0 path of a :class:`~auto_runtime.tiered.TieredTask`."""

    _reference: Callable[[Any], Any] | None
    _capture: Callable[[dict[str, Any]], None] | None
    _task: str | None
    _gen: Generation
    _errors_lock: threading.Lock
    _guard_errors: int
    post_commit_deopts: int

    @property
    def guard_errors(self) -> int:
        """How many guard decisions raised (each deopted; see the module docstring). 0 unless a
        guard is broken."""
        return self._guard_errors

    def _guard_failed(self, g: Generation, exc: Exception) -> str:
        """The one place a guard failure in the request path goes: log it (the first one with
        its traceback), count it, and return the deopt reason."""
        with self._errors_lock:
            self._guard_errors += 1
            first = self._guard_errors == 1
        log.warning("guard %s of artifact %s raised, deopting: %s: %s", g.guard.method,
                    g.artifact_id, type(exc).__name__, exc, exc_info=first)
        return f"guard-error: {type(exc).__name__}: {exc}"


    def capture_deopt(self, input_obj: Any, answer: Any, result: CallResult,
                      latency_us: float | None = None) -> None:
        """Capture the answer of a call :meth:`decide` declined: ``capture`` gets the record a
        deopt answered by the reference gets (``latency_us``: the whole call's, default the
        decision's). A capture failure is logged, never raised."""
        cap = self._capture
        if cap is None:
            return
        try:
            cap({"task": self._gen.task, "input": input_obj,
                 "output": answer, "reason": result.reason, "artifact_id": result.artifact_id,
                 "generation": result.generation,
                 "latency_us": result.latency_us if latency_us is None else latency_us,
                 "artifact_output": result.output})
        except Exception:  # noqa: BLE001 - a capture failure must not lose the answer
            log.exception("capture hook failed for task %s (answer kept)", self._task)

    def _deopt(self, input_obj: Any, g: Generation, reason: str, score: Any, p: float | None,
               t0: int, base_us: float, out: Any = None, defer: bool = False,
               session: Any = None) -> CallResult:
        ref = self._reference
        calls = session.summary() if session is not None else None
        effects = session.effects if session is not None else []
        # a deferring host answers a declined call itself, without the effect journal: once an
        # effect ran, the reference runs here (with the journal) whenever there is one
        if ref is None or (defer and not effects):
            if effects:
                reason = f"{reason} (after {len(effects)} effect(s) ran: {', '.join(e['tool'] for e in effects)})"
            return CallResult(None, DECLINED, reason, score, p,
                              base_us + (perf_counter_ns() - t0) / 1000.0, g.generation, g.artifact_id, out, calls)
        if effects:
            with self._errors_lock:
                self.post_commit_deopts += 1
            log.warning("task %s deopted after %d effect(s) ran (%s); the reference runs with the effect journal",
                        g.task, len(effects), reason)
            with effect_journal(effects):
                answer = ref(input_obj)
        else:
            answer = ref(input_obj)
        latency = base_us + (perf_counter_ns() - t0) / 1000.0
        cap = self._capture
        if cap is not None:
            rec = {"task": g.task, "input": input_obj, "output": answer, "reason": reason,
                   "artifact_id": g.artifact_id, "generation": g.generation,
                   "latency_us": latency, "artifact_output": out}
            if calls is not None:
                rec["tool_calls"] = calls
            try:
                cap(rec)
            except Exception:  # noqa: BLE001 - a capture failure must not lose the answer
                log.exception("capture hook failed for task %s (answer kept)", g.task)
        return CallResult(answer, TIER_0, reason, score, p, latency, g.generation, g.artifact_id, out, calls)
