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
import math
import threading
from dataclasses import dataclass
from time import perf_counter_ns
from typing import Any, Callable, Iterable, NamedTuple

from auto_runtime.artifact import Artifact
from auto_runtime.audit import DEFAULT_AUDIT_QUEUE, ShadowAudit
from auto_runtime.errors import (
    AutoError,
    CallTimeout,
    CapabilityError,
    FuelExhausted,
    InputSchemaError,
    LimitError,
    ManifestError,
    MemoryLimitExceeded,
    OutputError,
    ToolCallError,
    TrapError,
)
from auto_runtime.guard import AlwaysDeopt, Guard, TightenedGuard
from auto_runtime.overlay import ADMITTED, CONTESTED, CONTESTED_REASON, TableOverlay
from auto_runtime.tools import ToolBudget, effect_journal, missing_tools_line

log = logging.getLogger("auto_runtime.tiered")

OVERLAY_REASON = "overlay"
"""The ``reason`` of a tier-1 answer given by the table overlay."""

TIER_1 = "tier-1"
TIER_0 = "tier-0"
DECLINED = "declined"

DEFAULT_BATCH_CHUNK = 64
"""Inputs per ``run_batch`` call in :meth:`TieredTask.batch`. Large enough to amortize the call
overhead (~1/64 per item), small enough that one runaway input burns at most 64 inputs' fuel."""


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


class _Generation(NamedTuple):
    artifact: Artifact | None
    guard: Guard
    validate: Callable[[Any], None]
    generation: int | None
    artifact_id: str | None
    task: str | None
    tightened: str | None = None


def _no_validation(obj: Any) -> None:
    return None


_NO_ARTIFACT_GUARD = AlwaysDeopt("no artifact")


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


class TieredTask:
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

    def _make_generation(self, artifact: Artifact | None) -> _Generation:
        if artifact is None:
            return _Generation(None, _NO_ARTIFACT_GUARD, _no_validation, None, None, self._task)
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
        return _Generation(artifact, artifact.guard, artifact.validate_input, artifact.generation,
                           artifact.id, self._task)

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
    def guard_errors(self) -> int:
        """How many guard decisions raised (each deopted; see the module docstring). 0 unless a
        guard is broken."""
        return self._guard_errors

    def _guard_failed(self, g: _Generation, exc: Exception) -> str:
        """The one place a guard failure in the request path goes: log it (the first one with
        its traceback), count it, and return the deopt reason."""
        with self._errors_lock:
            self._guard_errors += 1
            first = self._guard_errors == 1
        log.warning("guard %s of artifact %s raised, deopting: %s: %s", g.guard.method,
                    g.artifact_id, type(exc).__name__, exc, exc_info=first)
        return f"guard-error: {type(exc).__name__}: {exc}"

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
        return self._call(input_obj, False)

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

    def _call(self, input_obj: Any, defer: bool) -> CallResult:
        t0 = perf_counter_ns()
        g = self._gen
        art = g.artifact
        ov = self.overlay
        answers = defer or self._reference is not None
        if ov is not None:
            state, answer, lead = ov.probe(input_obj)
            if state is ADMITTED:
                return self._overlay_answer(input_obj, answer, lead, g, t0)
            if state is CONTESTED and answers:  # the artifact's table may hold the answer disputed
                return self._deopt(input_obj, g, CONTESTED_REASON, None, None, t0, 0.0, None, defer)
        if art is None:
            return self._deopt(input_obj, g, "no-artifact", None, None, t0, 0.0, None, defer)
        # a table hit whose schema check is known to pass (Artifact.table_answer); else as always
        out = art.table_answer(input_obj) if g.validate is art.validate_input else None
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
                out = art.call(input_obj)
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

    def _overlay_answer(self, input_obj: Any, answer: Any, lead: int, g: _Generation, t0: int) -> CallResult:
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

    def _call_capability(self, input_obj: Any, g: _Generation, t0: int, defer: bool) -> CallResult:
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

    def _deopt(self, input_obj: Any, g: _Generation, reason: str, score: Any, p: float | None,
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

    # ------------------------------------------------------------------ batches

    def batch(self, inputs: Iterable[Any]) -> list[CallResult]:
        """Answer many inputs; results are in input order.

        Valid inputs run through ``run_batch`` in chunks of ``batch_chunk``; if a chunk fails as
        a whole (limit, trap, bad output), its items are retried one by one so only the items
        that fail deopt. The guard is evaluated vectorized (numpy) per chunk. Deopted items call
        the reference one at a time, in input order.

        Raises:
            InputSchemaError: an input violates the schema and there is no reference.
            Exception: whatever the reference raises.
        """
        items = inputs if isinstance(inputs, list) else list(inputs)
        n = len(items)
        if n == 0:
            return []
        g = self._gen
        if g.artifact is not None and g.artifact.tools:  # tool sessions are per call
            return [self(x) for x in items]
        t0 = perf_counter_ns()
        art = g.artifact
        results: list[CallResult | None] = [None] * n
        # (index, reason, score, p) for items to deopt after the artifact work
        deopts: list[tuple[int, str, Any, float | None, Any]] = []
        if art is None:
            deopts = [(i, "no-artifact", None, None, None) for i in range(n)]
        else:
            ok: list[int] = []
            validate = g.validate
            # table hits whose schema check is known to pass (Artifact.table_answer), answered here
            pre: dict[int, Any] = {}
            known = art.table_answer if art.table is not None and validate is art.validate_input else None
            for i, x in enumerate(items):
                if known is not None:
                    o = known(x)
                    if o is not None:
                        pre[i] = o
                        ok.append(i)
                        continue
                try:
                    validate(x)
                except InputSchemaError as e:
                    if self._reference is None:
                        raise
                    deopts.append((i, f"input-schema: {e}", None, None, None))
                else:
                    ok.append(i)
            chunk = self.batch_chunk
            gen, aid = g.generation, g.artifact_id
            for start in range(0, len(ok), chunk):
                idx = ok[start:start + chunk]
                if pre:
                    rest = [i for i in idx if i not in pre]
                    ran = iter(self._run_chunk(art, [items[i] for i in rest]) if rest else ())
                    outs = [pre[i] if i in pre else next(ran) for i in idx]
                else:
                    outs = self._run_chunk(art, [items[i] for i in idx])
                passed, pvals, failed = self._decide_chunk(g, outs)
                for i, o, ok_j, p in zip(idx, outs, passed, pvals):
                    score = o.get("nonconformity") if o.__class__ is dict else None
                    if ok_j and o.__class__ is dict:  # a guard passes only dict outputs
                        if "answer" in o:
                            results[i] = CallResult(o["answer"], TIER_1, "guard-pass", score,
                                                    None if p != p else p, 0.0, gen, aid, o)
                            continue
                    if o.__class__ is not dict:  # the AutoError of a per-item retry
                        if isinstance(o, InputSchemaError) and self._reference is None:
                            raise o
                        deopts.append((i, failure_reason(o), None, None, None))
                    elif "answer" not in o:
                        deopts.append((i, f"artifact-error: {o.get('error')}", None, None, None))
                    else:
                        p = None if p != p else p
                        deopts.append((i, failed or self._reason(g, o, p), score, p, o))
            audit = self._audit
            if audit.active:
                for i, r in enumerate(results):
                    if r is not None and audit.active:
                        audit.offer(items[i], r.answer, task=g.task, artifact_id=aid,
                                    generation=gen, score=r.score)
        per_item = (perf_counter_ns() - t0) / 1000.0 / n
        for r in results:
            if r is not None:
                r.latency_us = per_item
        deopts.sort(key=lambda d: d[0])
        for i, reason, score, p, o in deopts:
            results[i] = self._deopt(items[i], g, reason, score, p, perf_counter_ns(), per_item, o)
        return results  # type: ignore[return-value]

    def _decide_chunk(self, g: _Generation, outs: list[Any]) -> tuple[list[bool], list[float], str | None]:
        """``(passed, p-values (nan = none), failure reason or None)`` of the guard's batch
        decision on one chunk; a guard that raises (or answers for another number of items)
        deopts the whole chunk."""
        try:
            passed, pvals = g.guard.evaluate_batch_outputs(outs)
            passed, pvals = passed.tolist(), pvals.tolist()
            if len(passed) != len(outs) or len(pvals) != len(outs):
                raise ValueError(f"the batch decision has {len(passed)} verdicts and {len(pvals)} "
                                 f"p-values for {len(outs)} outputs")
            return passed, pvals, None
        except Exception as e:  # noqa: BLE001 - a broken guard deopts, never raises
            return [False] * len(outs), [math.nan] * len(outs), self._guard_failed(g, e)

    def _reason(self, g: _Generation, out: Any, p: float | None) -> str:
        """The guard's deopt reason for ``out``, or the failure reason if asking for it raises."""
        try:
            return g.guard.reason_output(out, p)
        except Exception as e:  # noqa: BLE001 - a broken guard deopts, never raises
            return self._guard_failed(g, e)

    @staticmethod
    def _run_chunk(art: Artifact, chunk: list[Any]) -> list[Any]:
        """Outputs for ``chunk``: dicts, or the :class:`AutoError` an item failed with."""
        try:
            return art.call_batch(chunk)
        except AutoError as e:
            if len(chunk) == 1:
                return [e]
            log.warning("run_batch of %d items failed (%s); retrying item by item", len(chunk), e)
        outs: list[Any] = []
        for x in chunk:
            try:
                outs.append(art.call(x))
            except AutoError as e:
                outs.append(e)
        return outs
