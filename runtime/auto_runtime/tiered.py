"""Tier dispatch: answer from the artifact when its guard passes (tier 1), otherwise deoptimize
to the reference implementation (tier 0) and capture the call for the next generation.

One call (:meth:`TieredTask.__call__`):

1. no artifact installed -> deopt ``"no-artifact"``;
2. the input violates the manifest's ``interface.input`` schema -> deopt
   ``"input-schema: <path>: <what>"`` (or raise :class:`InputSchemaError` without a reference);
3. run the artifact; a sandbox limit, trap or bad output deopts (``"limit: fuel"``,
   ``"limit: memory"``, ``"limit: timeout"``, ``"trap: ..."``, ``"output-error: ..."``); an ABI
   error output deopts ``"artifact-error: <code>"``;
4. the guard decides from the whole output object (:meth:`Guard.decide_output`): it passes ->
   tier-1 answer, reason ``"guard-pass"``; otherwise deopt with the guard's reason
   (``"novelty p=0.01<=alpha=0.05"``, ``"confidence 0.12 < threshold 0.42 (selective risk
   eps=0.05, delta=0.1)"``, ``"program deopt"``, ``"guard-unusable: ..."``, ``"no-score: ..."``,
   ``"shift alarm: ..."`` while tightened). A guard that raises while deciding (a bug in a
   custom guard; built-in guards never raise) deopts with ``"guard-error: <type>: <message>"``:
   the failure is logged and counted (:attr:`TieredTask.guard_errors`), never propagated, and
   the call is answered by the reference like any other deopt. :meth:`TieredTask.batch` treats a
   raising batch decision the same way, for every item of its chunk.

Deopt: call ``reference(input)``, return its answer as tier 0, then call ``capture`` with
``{"task", "input", "output", "reason", "artifact_id", "generation", "latency_us",
"artifact_output"}`` (``artifact_output``: the artifact's would-be output when it ran, else
``None``: every deopt is a labeled point for the installed generation). A host that answers
deopts itself (asynchronously, e.g. a server forwarding them upstream) calls
:meth:`TieredTask.decide` (never calls the reference; a declined result) and then
:meth:`TieredTask.capture_deopt` with the answer, which captures the same record. A capture
failure is logged and never loses the answer; an exception from the reference propagates (it is
the application's own code). Without a reference the result is tier ``"declined"`` with
``answer=None`` (the CLI maps that to exit status 3).

The artifact never hangs or crashes the host: every call runs under fuel, memory and wall-clock
limits, and every failure is a typed error that becomes a deopt.

Capability artifacts (tools declared in the manifest, :mod:`auto_runtime.tools`): the
TieredTask's ``tools`` registry provides them (each artifact is bound to exactly the tools it
declares; a declared tool missing from the registry makes :meth:`TieredTask.swap` raise
:class:`CapabilityError`). Per call a :class:`~auto_runtime.tools.ToolSession` runs the artifact's
tool calls under the per-call budget, and the guard decides at the artifact's ``commit``, on its
decisions so far, *before* any effectful or paid tool runs (decide first, then act): a declined
commit deopts with ``"commit declined: <guard reason>"`` and no effect ran. A refused tool call
deopts with ``"tool: <reason>"``; a program deopt before the commit deopts as usual. An artifact
that never commits (only read-only tools) is judged by the guard on its output. While tightened,
a capability artifact is not run at all (no tool call). If a call deopts after an effect ran (a
failure after the commit), the reference runs inside :func:`auto_runtime.tools.effect_journal`
(a journaled tool answers the repeated effect instead of acting twice) and the deopt is counted
in :attr:`TieredTask.post_commit_deopts`. Capability artifacts run item by item in
:meth:`TieredTask.batch`, and answers of artifacts with effectful tools are never shadow-audited
(the audit would run the reference, and its effects, again).

Tightening (:meth:`TieredTask.tighten`, e.g. on a shift monitor's alarm): until the next
:meth:`TieredTask.swap`, the guard's decision is always "deopt" with reason
``"shift alarm: <reason>"``; the artifact still runs, so ``score`` and ``p_value`` keep being
reported (a shift monitor keeps its input). Calls that deopt before the guard (no artifact,
input schema, artifact failure) keep their own, more specific reason.

Table overlay (``overlay``, :mod:`auto_runtime.overlay`): before the artifact runs, an input
the overlay admits (its witnessed answers meet the admission rule) is answered at tier-1 from the
overlay, reason ``"overlay"``, score 0 (an exact-match hit), generation and artifact id those of
the installed generation (``None`` before the first); it is offered to the shadow audit like a
table hit, with ``origin="overlay"``, at the overlay's rate for the answer's lead (each agreeing
audit halves it: :meth:`~auto_runtime.overlay.TableOverlay.audit_rate`). An input whose
witnesses disagree with none leading (``contested``) deopts, reason ``"overlay-contested"``,
before the artifact runs: its table may hold the disputed answer. An overlay answers while the
task is tightened (its evidence is per input, not the exchangeability of scores) and never for
capability artifacts.

Shadow audit (``audit_rate`` > 0): a seeded random fraction of tier-1 answers is re-asked at
tier 0 on a background thread (:class:`~auto_runtime.audit.ShadowAudit`, :attr:`TieredTask.audit`);
its reference answers are captured like deopts, marked ``"audit": True``. The request path only
pays for the selection (an RNG draw, and a JSON snapshot of the selected input and answer).
"""

from __future__ import annotations

import logging
import threading
from time import perf_counter_ns
from typing import Any, Callable

from auto_runtime.artifact import Artifact
from auto_runtime.audit import DEFAULT_AUDIT_QUEUE, ShadowAudit
from auto_runtime.call_result import (
    DECLINED,
    OVERLAY_REASON,
    TIER_0,
    TIER_1,
    CallResult,
    Generation,
    failure_reason,
)
from auto_runtime.capability_call import CapabilityCalls
from auto_runtime.errors import AutoError, CapabilityError, InputSchemaError, ManifestError
from auto_runtime.guard import AlwaysDeopt, TightenedGuard
from auto_runtime.overlay import ADMITTED, CONTESTED, CONTESTED_REASON, TableOverlay
from auto_runtime.tiered_batch import DEFAULT_BATCH_CHUNK, BatchCalls
from auto_runtime.tools import ToolBudget, missing_tools_line

log = logging.getLogger("auto_runtime.tiered")


def _no_validation(obj: Any) -> None:
    return None


_NO_ARTIFACT_GUARD = AlwaysDeopt("no artifact")



class TieredTask(BatchCalls, CapabilityCalls):
    """A task answered by an artifact when its guard allows, else by the reference.

    Args:
        artifact: the current generation's artifact, or ``None`` (every call deopts).
        reference: the tier-0 implementation, ``reference(input_obj) -> answer``; ``None``
            means calls the artifact cannot answer are declined.
        capture: called with a dict for every deopt answered by the reference (see the module
            docstring); its exceptions are logged and ignored.
        task: the task name for capture records; defaults to the artifact's manifest ``task``.
        batch_chunk: inputs per ``run_batch`` call in :meth:`batch`.
        audit_rate: fraction in [0, 1] of tier-1 answers re-asked at tier 0 in the background
            (shadow audit; 0 disables it). Needs a ``reference``.
        audit_seed: seed of the audit's selection RNG (same seed and same sequence of tier-1
            answers -> same audited answers).
        audit_max: at most this many answers are audited (``None``: no cap).
        audit_max_records: the audit keeps at most this many latest records (``None``: all).
        audit_hit_rate: the audit's rate for exact-match table hits (``None``: ``audit_rate``).
        audit_queue: audits that may wait for the audit thread; when full, a selected answer
            is skipped (counted in ``audit.skipped``) rather than delaying the request.
        audit_hit_budget: the audit's repeat budget (a share in [0, 1], see
            :class:`~auto_runtime.audit.ShadowAudit`), or ``None`` (no budget).
        tools: the host's tools, ``{name: callable}`` (called as ``tool(**arguments)``), for
            capability artifacts; each artifact is bound to the ones it declares.
        tool_budget: a per-call :class:`~auto_runtime.tools.ToolBudget` that tightens the
            manifest's (None: the manifest's).
        overlay: a :class:`~auto_runtime.overlay.TableOverlay` answering admitted witnessed
            inputs ahead of the artifact (None: none; never used with ``tools``).

    Raises:
        ValueError: ``batch_chunk`` < 1, or a bad audit setting (see :class:`ShadowAudit`);
            ``audit_rate`` > 0 without a reference.
        TypeError: non-integer ``audit_seed`` / ``audit_max`` / ``audit_queue``.
        ManifestError, CapabilityError: see :meth:`swap`.

    Thread-safe: :meth:`swap` and :meth:`tighten` install a new generation atomically; a call in
    flight finishes on the generation it started with. ``reference`` and ``capture`` may be
    called concurrently (from request threads and the audit thread).
    """

    def __init__(self, artifact: Artifact | None, reference: Callable[[Any], Any] | None,
                 capture: Callable[[dict[str, Any]], None] | None = None, *,
                 task: str | None = None, batch_chunk: int = DEFAULT_BATCH_CHUNK,
                 audit_rate: float = 0.0, audit_seed: int = 0, audit_max: int | None = None,
                 audit_hit_rate: float | None = None,
                 audit_queue: int = DEFAULT_AUDIT_QUEUE, audit_max_records: int | None = None,
                 audit_hit_budget: float | None = None,
                 tools: dict[str, Callable[..., Any]] | None = None,
                 tool_budget: ToolBudget | None = None, overlay: TableOverlay | None = None) -> None:
        if batch_chunk < 1:
            raise ValueError("batch_chunk must be >= 1")
        if reference is None and not isinstance(audit_rate, bool) and \
                isinstance(audit_rate, (int, float)) and audit_rate > 0:
            raise ValueError("a shadow audit (audit_rate > 0) needs a reference to ask")
        self._audit = ShadowAudit(reference, capture, rate=audit_rate, seed=audit_seed, hit_rate=audit_hit_rate,
                                  max_audits=audit_max, queue_size=audit_queue,
                                  max_records=audit_max_records, hit_budget=audit_hit_budget)
        self._reference = reference
        self._capture = capture
        self._task = task
        self.batch_chunk = batch_chunk
        self._swap_lock = threading.Lock()
        self._errors_lock = threading.Lock()
        self._guard_errors = 0
        self._tools = dict(tools) if tools is not None else None
        self._tool_budget = tool_budget
        self.post_commit_deopts = 0
        self.overlay = overlay if tools is None else None
        self._gen = self._make_generation(artifact)

    # ------------------------------------------------------------------ generations

    def _make_generation(self, artifact: Artifact | None) -> Generation:
        if artifact is None:
            return Generation(None, _NO_ARTIFACT_GUARD, _no_validation, None, None, self._task)
        if self._task is None:
            self._task = artifact.task  # the first artifact names the task this object serves
        elif artifact.task != self._task:
            raise ManifestError(
                f"artifact {artifact.id} is for task {artifact.task!r}, this TieredTask serves "
                f"{self._task!r}"
            )
        if artifact.tools:
            missing = sorted(set(artifact.tools) - set(self._tools or {}))
            if missing:
                raise CapabilityError(f"artifact {artifact.id[:19]}… (task {artifact.task!r}) "
                                      f"{missing_tools_line(missing, self._tools or {})}")
            assert self._tools is not None
            artifact.bind_tools({n: self._tools[n] for n in artifact.tools})
        tab = artifact.table if not artifact.tools else None
        return Generation(artifact, artifact.guard, artifact.validate_input, artifact.generation,
                          artifact.id, self._task, None, tab.lookup if tab is not None else None,
                          tab.lookup_many if tab is not None else None)

    def swap(self, artifact: Artifact | None) -> Artifact | None:
        """Install ``artifact`` (or ``None``) as the current generation, atomically.

        Returns:
            The previously installed artifact.

        Raises:
            ManifestError: ``artifact`` is for a different task than the one installed.
            CapabilityError: ``artifact`` declares a tool the TieredTask's ``tools`` lack.
        """
        with self._swap_lock:
            old = self._gen
            self._gen = self._make_generation(artifact)
            return old.artifact

    def tighten(self, reason: str) -> None:
        """Make every guard decision "deopt" until the next :meth:`swap` (e.g. on a shift
        alarm); the deopt reason becomes ``"shift alarm: <reason>"``. Calling it again replaces
        the reason. Atomic with respect to :meth:`swap`.

        Raises:
            ValueError: ``reason`` is not a non-empty string.
        """
        if not isinstance(reason, str) or not reason.strip():
            raise ValueError(f"tighten needs a non-empty reason string, got {reason!r}")
        with self._swap_lock:
            g = self._gen
            inner = g.guard.inner if isinstance(g.guard, TightenedGuard) else g.guard
            self._gen = g._replace(guard=TightenedGuard(inner, reason), tightened=reason)
        log.warning("task %s tightened (every call deopts until the next swap): %s",
                    g.task, reason)

    @property
    def tightened(self) -> str | None:
        """The reason given to :meth:`tighten` while tightened, else ``None``."""
        return self._gen.tightened

    @property
    def audit(self) -> ShadowAudit:
        """The shadow audit (counters ``n``, ``disagreements``, ``errors``, ``skipped``;
        ``records``; ``wait(timeout_s)``); inactive when ``audit_rate`` is 0."""
        return self._audit

    def close(self, timeout_s: float | None = 5.0) -> bool:
        """Stop the shadow audit's thread after its queued audits finish (calls keep working,
        without audits).

        Returns:
            ``True`` when the audit thread stopped within ``timeout_s`` seconds (or never ran).
        """
        return self._audit.close(timeout_s)

    @property
    def artifact(self) -> Artifact | None:
        """The artifact currently installed."""
        return self._gen.artifact

    @property
    def generation(self) -> int | None:
        """The installed artifact's generation."""
        return self._gen.generation

    @property
    def task(self) -> str | None:
        """The task name (explicit, or the installed artifact's)."""
        return self._gen.task

    # ------------------------------------------------------------------ one call

    def __call__(self, input_obj: Any) -> CallResult:
        """Answer one input (see the module docstring for the decision order).

        Raises:
            InputSchemaError: the input violates the schema and there is no reference.
            Exception: whatever the reference raises.
        """
        # the table-hit path inline (no further frame): overlay first, then the table, the guard,
        # the audit's selection; anything else goes the whole way
        t0 = perf_counter_ns()
        g = self._gen
        table = g.table
        if table is None or self.overlay is not None:
            return self._call(input_obj, False, t0, None, g)
        out, key = table(input_obj)
        if out is None:
            return self._call(input_obj, False, t0, (None, key), g)
        try:
            passed, p = g.guard.decide_output(out)
        except Exception:  # noqa: BLE001 - decided again in _call, where a failure deopts
            passed = False
        if not passed:
            return self._call(input_obj, False, t0, (out, key), g)
        score = out["nonconformity"]
        if self._audit.active:
            self._audit.offer(input_obj, out["answer"], task=g.task, artifact_id=g.artifact_id,
                              generation=g.generation, score=score)
        return CallResult(out["answer"], TIER_1, "guard-pass", score, p, (perf_counter_ns() - t0) / 1000.0,
                          g.generation, g.artifact_id, out)

    def decide(self, input_obj: Any) -> CallResult:
        """Like calling, but the reference is never called here: an input the artifact does not
        answer comes back with tier ``"declined"`` (its reason, score, p-value, would-be output).

        For a host that answers deopts itself, asynchronously (a server forwarding the request
        upstream): it answers the declined call, then passes the answer to
        :meth:`capture_deopt`, which captures it exactly as a deopt answered here would be.
        Tier-1 answers are offered to the shadow audit as usual. An input that violates the
        schema is declined (reason ``"input-schema: ..."``), never raised.
        """
        return self._call(input_obj, True)

    def _call(self, input_obj: Any, defer: bool, t0: int | None = None,
              table_out: tuple[Any, bytes | None] | None = None, g: Generation | None = None) -> CallResult:
        """One call on generation ``g`` (default: the installed one). ``table_out``: what its
        table's lookup gave for this input when the caller asked it already (None: not asked),
        the overlay not consulted then (none is set)."""
        if t0 is None:
            t0 = perf_counter_ns()
        if g is None:
            g = self._gen
        if table_out is None:
            ov = self.overlay
            if ov is not None:
                state, answer, lead = ov.probe(input_obj)
                if state is ADMITTED:
                    return self._overlay_answer(input_obj, answer, lead, g, t0)
                if state is CONTESTED and (defer or self._reference is not None):
                    # the artifact's table may hold the answer disputed
                    return self._deopt(input_obj, g, CONTESTED_REASON, None, None, t0, 0.0, None, defer)
            # a table hit whose schema check is known to pass (Artifact.table_answer); else as always
            table = g.table
            out, key = table(input_obj) if table is not None else (None, None)
        else:
            out, key = table_out
        if out is not None:
            guard = g.guard
            try:
                passed, p = guard.decide_output(out)
            except Exception:  # noqa: BLE001 - decided again below, where a failure deopts
                passed = False
            if passed:
                audit = self._audit
                score = out["nonconformity"]
                if audit.active:
                    audit.offer(input_obj, out["answer"], task=g.task, artifact_id=g.artifact_id,
                                generation=g.generation, score=score)
                return CallResult(out["answer"], TIER_1, "guard-pass", score, p,
                                  (perf_counter_ns() - t0) / 1000.0, g.generation, g.artifact_id, out)
        art = g.artifact
        answers = defer or self._reference is not None
        if art is None:
            return self._deopt(input_obj, g, "no-artifact", None, None, t0, 0.0, None, defer)
        if out is None:
            try:
                g.validate(input_obj)
            except InputSchemaError as e:
                if not answers:
                    raise
                return self._deopt(input_obj, g, f"input-schema: {e}", None, None, t0, 0.0, None, defer)
            if art.tools:
                return self._call_capability(input_obj, g, t0, defer)
        try:
            if out is None:
                out = art.call(input_obj) if key is None else art.call_encoded(key, input_obj)
        except AutoError as e:
            if isinstance(e, InputSchemaError) and not answers:
                raise
            reason = failure_reason(e)
            log.warning("artifact %s failed, deopting: %s", g.artifact_id, e)
            return self._deopt(input_obj, g, reason, None, None, t0, 0.0, None, defer)
        if "answer" not in out:
            return self._deopt(input_obj, g, f"artifact-error: {out.get('error')}", None, None, t0, 0.0, None, defer)
        guard = g.guard
        try:
            passed, p = guard.decide_output(out)
            reason = "guard-pass" if passed else guard.reason_output(out, p)
        except Exception as e:  # noqa: BLE001 - a broken guard deopts, never raises
            passed, p, reason = False, None, self._guard_failed(g, e)
        if passed:
            answer = out["answer"]
            audit = self._audit
            score = out.get("nonconformity")
            if audit.active:
                audit.offer(input_obj, answer, task=g.task, artifact_id=g.artifact_id,
                            generation=g.generation, score=score)
            return CallResult(answer, TIER_1, reason, score, p,
                              (perf_counter_ns() - t0) / 1000.0, g.generation, g.artifact_id, out)
        return self._deopt(input_obj, g, reason, out.get("nonconformity"), p, t0, 0.0, out, defer)

    def _overlay_answer(self, input_obj: Any, answer: Any, lead: int, g: Generation, t0: int) -> CallResult:
        """A tier-1 answer from the table overlay (offered to the audit like a table hit, at the
        overlay's decayed rate for its lead)."""
        audit = self._audit
        if audit.active:
            ov = self.overlay
            rate = ov.audit_rate(audit.hit_rate, lead) if ov is not None else None
            audit.offer(input_obj, answer, task=g.task, artifact_id=g.artifact_id, generation=g.generation,
                        score=0.0, origin="overlay", rate=rate)
        return CallResult(answer, TIER_1, OVERLAY_REASON, 0.0, None, (perf_counter_ns() - t0) / 1000.0,
                          g.generation, g.artifact_id, None)


__all__ = ["DECLINED", "DEFAULT_BATCH_CHUNK", "OVERLAY_REASON", "TIER_0", "TIER_1", "CallResult", "TieredTask",
           "failure_reason"]
