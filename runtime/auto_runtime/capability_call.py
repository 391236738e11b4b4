"""One call of a capability artifact (tools declared in its manifest): its tool calls run in a
:class:`~auto_runtime.tools.ToolSession` under the per-call budget, and the guard decides at the
artifact's ``commit``, before any effectful or paid tool runs. Part of
:class:`auto_runtime.tiered.TieredTask` (the module docstring there gives the reasons).
"""

from __future__ import annotations

import logging
from time import perf_counter_ns
from typing import Any

from auto_runtime.call_result import TIER_1, CallResult, Generation, failure_reason
from auto_runtime.deopt import Deopts
from auto_runtime.errors import AutoError, CapabilityError, InputSchemaError
from auto_runtime.tools import ToolBudget

log = logging.getLogger("auto_runtime.tiered")


class CapabilityCalls(Deopts):
    """The capability-artifact call of a :class:`~auto_runtime.tiered.TieredTask`."""

    _tool_budget: ToolBudget | None

    def _call_capability(self, input_obj: Any, g: Generation, t0: int, defer: bool) -> CallResult:
        """One call of a capability artifact: tools through a session, the guard at the commit."""
        art = g.artifact
        assert art is not None
        if g.tightened is not None:  # every call deopts: do not run the artifact (no tool call at all)
            return self._deopt(input_obj, g, f"shift alarm: {g.tightened}", None, None, t0, 0.0, None, defer)
        guard = g.guard

        def admit(record: Any) -> tuple[bool, str]:
            try:
                passed, p = guard.decide_output(record)
                return passed, "guard-pass" if passed else guard.reason_output(record, p)
            except Exception as e:  # noqa: BLE001 - a broken guard declines, never raises
                return False, self._guard_failed(g, e)

        try:
            sess = art.new_session(admit=admit, budget=self._tool_budget)
        except CapabilityError as e:
            return self._deopt(input_obj, g, f"capability: {e}", None, None, t0, 0.0, None, defer)
        try:
            out = art.call(input_obj, session=sess)
        except AutoError as e:
            if isinstance(e, InputSchemaError) and not (defer or self._reference is not None):
                raise
            log.warning("artifact %s failed, deopting: %s", g.artifact_id, e)
            return self._deopt(input_obj, g, failure_reason(e), None, None, t0, 0.0, None, defer, sess)
        if "answer" not in out:
            return self._deopt(input_obj, g, f"artifact-error: {out.get('error')}", None, None, t0, 0.0, None, defer, sess)
        if sess.committed is False:
            return self._deopt(input_obj, g, f"commit declined: {sess.commit_reason}", None, None, t0, 0.0, out, defer, sess)
        if sess.committed is None:  # only read-only tools: the guard judges the output
            try:
                passed, p = guard.decide_output(out)
                reason = "guard-pass" if passed else guard.reason_output(out, p)
            except Exception as e:  # noqa: BLE001 - a broken guard deopts, never raises
                passed, p, reason = False, None, self._guard_failed(g, e)
        else:  # admitted at the commit; the artifact's own deopt flag is its last word
            p = None
            passed = out.get("deopt") is False
            reason = "guard-pass" if passed else "post-commit deopt"
        if not passed:
            return self._deopt(input_obj, g, reason, out.get("nonconformity"), p, t0, 0.0, out, defer, sess)
        answer = out["answer"]
        audit = self._audit
        if audit.active and not any(d.effects == "effect" for d in art.tools.values()):
            audit.offer(input_obj, answer, task=g.task, artifact_id=g.artifact_id, generation=g.generation,
                        score=out.get("nonconformity"))
        return CallResult(answer, TIER_1, reason, out.get("nonconformity"), p, (perf_counter_ns() - t0) / 1000.0,
                          g.generation, g.artifact_id, out, sess.summary())
