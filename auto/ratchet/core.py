"""The ratchet: a task served through the tiered runtime that compiles itself from its own deopts.

A :class:`Ratchet` wraps a task's reference implementation (tier-0), a store and a contract.

Request path (:meth:`Ratchet.call`): the input goes through :class:`auto_runtime.TieredTask`. The
installed generation answers at tier-1 when its guard admits the input; otherwise the call deopts
to the reference, whose answer is returned and written to the store as a witness (the trace the
next compile learns from). A reference that raises makes the call raise the same exception, and
nothing is captured. The request path never compiles and never waits for a compile.

Background (one thread per ratchet, plus a child process per compile): after each deopt or audit
the :class:`~auto.ratchet.policy.CompilePolicy` reads the counters and may name a trigger; the
compile then runs off the request path (:mod:`auto.ratchet.worker`). A generation that passed
its gate is loaded (its id checked against the store), its guard built, and swapped in atomically
(a call in flight finishes on the generation it started with). A refused, failed, timed-out or
crashed compile keeps the current generation; every attempt, install, rollback and alarm is a row
of the store's ratchet log, with its trigger and evidence.

Online evidence (:mod:`auto.ratchet.evidence`): every deopt is scored against the installed
generation's would-be answer; shadow audits re-ask a seeded share of tier-1 answers in the
background. An anytime-valid risk monitor on the audited specialist answers rolls a generation
back (to its parent, or to none) when the audits reject its certificate; an exchangeability
monitor on the nonconformity scores (:class:`auto.guards.shift.ShiftMonitor`) tightens the
installed generation (every call deopts) until the next one is installed.

Tasks that call tools (``tools={name: callable}``): the installed generation is a capability
artifact (a region) served with those tools, the guard deciding at its commit before any effect;
a deopt at any step sends the whole call to the reference. The reference then runs *recorded*
into the ratchet's store (its task span with every model call and tool call as linked spans),
because the next region is compiled from the steps of runs, not from their input and output
alone; the recorded task span is the witness. Answers of tasks with effectful tools are never
shadow-audited (the audit would act again).

Restart: a new Ratchet on the same store loads the generation the log says is installed (the
artifact's bytes are in the store, checked by id), never a half-written file. Several ratchets on
one store (one per process or host) share its witnesses; a lock file beside the store lets one
of them compile at a time, and each picks up generations the others installed.
"""

from __future__ import annotations

import collections
import inspect
import json
import logging
import os
import threading
import time
from typing import Any, Callable

from auto_runtime import Artifact, TieredTask
from auto_runtime.overlay import ORIGIN as OVERLAY_ORIGIN
from auto_runtime.overlay import TableOverlay, overlay_rule
from auto_runtime.tiered import TIER_1

from auto.canonical import canonical_json
from auto.compile.witnesses import unit_witnesses
from auto.errors import ArgumentError, AutoError
from auto.guards.shift import ShiftMonitor
from auto.ratchet.evidence import GenerationEvidence
from auto.record.redact import Redactor
from auto.ratchet.policy import CompilePolicy, PolicyState, slow_rungs_could_pass
from auto.ratchet.worker import DEFAULT_TIMEOUT_S, CompileRequest, CompileResult, default_out_path, run_compile
from auto.record import openai_hook
from auto.record.core import Recorder, activate, active_recorder, deactivate
from auto.record.core import task as task_span
from auto.store import Store, local_path
from auto.store.lock import compile_lock
from auto.store.postgres import location_label
from auto.gate import Contract

log = logging.getLogger("auto.ratchet")

DEFAULT_AUDIT_RATE = 0.05
"""Share of tier-1 answers re-asked at tier-0 by the shadow audit. Each audit costs one reference
call, so the steady-state cost per item is at least this share of the reference's; 5% keeps the
audit's cost a twentieth of the all-reference cost while giving the risk monitor ~50 audits per
1,000 tier-1 answers."""

DEFAULT_AUDIT_HIT_RATE = 0.01
"""Share of exact-match table hits the shadow audit re-asks by default (capped at ``audit_rate``)."""

AUDIT_RECORDS = 1000
"""The shadow audit keeps the latest this many records in memory (its counters count all)."""

POLL_INTERVAL_S = 1.0
"""How often (at most) a ratchet looks in the store for a generation another ratchet installed."""

RECENT_INPUTS = 256
"""Recent call inputs kept (references, not copies) to compare a candidate with the installed
generation before a swap."""

SHARE_TOLERANCE = 0.02
"""A candidate answering at most this much less of the recent inputs than the installed
generation still replaces it (fresher witnesses, a newer table)."""

MIN_KNOWN = 10
"""Witnessed recent inputs a candidate must answer before its disagreement with them is judged."""

FOLD_CHECK = 4096
"""At most this many overlay entries are run through a newly installed table to mark the ones it
repeats as folded (off the request path)."""

SCORE_BATCH = 32
"""Nonconformity scores of tier-1 answers are handed to the shift monitor's thread in batches of
this many (or at the next deopt)."""

MONITOR_SLICE = 4
"""The monitor thread feeds this many scores (about 10 µs each, measured) between two yields of
the interpreter lock, so a request never waits behind a whole batch."""


class Ratchet:
    """A task answered by its latest verified generation, compiling the next from its deopts.

    Args:
        reference: the task's reference implementation, ``reference(input_obj) -> answer``
            (``input_obj`` is the dict of the task's named arguments; the answer must be JSON).
        store: path of the store file (created if missing) or a ``postgresql://`` URI; a child
            process must be able to open it (the compile runs there). The artifacts live beside
            it (:func:`auto.store.local_path`); the compile lock is the store's
            (:func:`auto.store.lock.compile_lock`: shared by every host of a PostgreSQL store).
        task: the task name (the compilation unit's name in the store).
        contract: the gate's contract (default :meth:`Contract.default_for`).
        audit_rate: share of tier-1 answers the shadow audit re-asks (:data:`DEFAULT_AUDIT_RATE`).
        audit_hit_rate: share of exact-match table hits it re-asks (default
            :data:`DEFAULT_AUDIT_HIT_RATE`): a hit repeats a witnessed reference answer, so its
            audit measures the reference's own consistency, not the specialist's risk.
        audit_seed: the audit's selection seed.
        policy: when to compile (:class:`CompilePolicy`).
        shift_alpha: level of the exchangeability monitor (None: off).
        risk_alpha: level of the online risk monitor (P(a false rollback) per generation).
        worker: ``"process"`` (default: a spawned child per compile) or ``"thread"``.
        compile_timeout_s: a compile running longer is killed and recorded as ``timeout``.
        reference_model: provenance label for manifests (None: read from recorded spans).
        programs: try the program rung (the ladder's first).
        load: load the installed generation from the store's ratchet log (a restart).
        progress: optional callback for human-readable lines (installs, refusals, alarms).
        signature: the task function's signature (``__call__`` then takes the task's own
            arguments); None: ``__call__`` takes one input dict.
        guard_factory: ``(artifact, store) -> Guard`` replacing each installed artifact's guard
            (e.g. :func:`auto.guards.semantic.make_host_guard`); a guard with a ``prime(input)``
            method is primed with each input before the call. None keeps the manifest's guard.
        tools: the host's tools for capability generations (``{name: callable}``); given, the
            reference runs recorded into the store (see the module docstring).
        tool_budget: a per-call :class:`auto_runtime.ToolBudget` tightening the manifests'.
        recorded_reference: with ``tools``, the task function whose calls record a task span
            (default: ``reference`` itself, wrapped in ``auto.task(task)``).
        capture_witnesses: write each deopt's and audit's answer to the store as a witness (a
            task span). False when the host records the witness itself: a proxy serving a
            model-call site records the upstream call, which is the site's witness.
        loader: ``(wasm, artifact_id) -> Artifact`` loading each generation before it is
            installed (default :meth:`auto_runtime.Artifact.load` with the id checked); a host
            with a trust key passes one that checks the generation's signature.

    Raises:
        ArgumentError: a bad setting (audit rate outside [0, 1], unknown worker mode).
        StoreError: the store cannot be opened.
    """

    def __init__(self, reference: Callable[[dict[str, Any]], Any], store: str | os.PathLike, task: str, *,
                 contract: Contract | None = None, audit_rate: float = DEFAULT_AUDIT_RATE,
                 audit_hit_rate: float | None = None, audit_seed: int = 0,
                 policy: CompilePolicy | None = None, shift_alpha: float | None = 0.05, risk_alpha: float = 0.05,
                 worker: str = "process", compile_timeout_s: float = DEFAULT_TIMEOUT_S,
                 reference_model: str | None = None, programs: bool = True, load: bool = True,
                 progress: Callable[[str], None] | None = None, signature: inspect.Signature | None = None,
                 guard_factory: Callable[[Artifact, Store], Any] | None = None,
                 tools: dict[str, Callable[..., Any]] | None = None, tool_budget: Any = None,
                 recorded_reference: Callable[..., Any] | None = None,
                 capture_witnesses: bool = True,
                 loader: Callable[[bytes, str], Artifact] | None = None) -> None:
        if not callable(reference):
            raise ArgumentError("the reference must be callable")
        if isinstance(store, bool) or not isinstance(store, (str, os.PathLike)) or not str(store):
            raise ArgumentError(f"store must be a path to the store file, got {store!r}")
        if contract is not None and not isinstance(contract, Contract):
            raise ArgumentError(f"contract must be an auto.Contract, got {type(contract).__name__}")
        if policy is not None and not isinstance(policy, CompilePolicy):
            raise ArgumentError(f"policy must be an auto.ratchet.CompilePolicy, got {type(policy).__name__}")
        if isinstance(compile_timeout_s, bool) or not isinstance(compile_timeout_s, (int, float)) or not compile_timeout_s > 0:
            raise ArgumentError(f"compile_timeout_s must be a number of seconds > 0, got {compile_timeout_s!r}")
        if not isinstance(task, str) or not task:
            raise ArgumentError(f"task must be a non-empty name, got {task!r}")
        if isinstance(audit_rate, bool) or not isinstance(audit_rate, (int, float)) or not 0.0 <= audit_rate <= 1.0:
            raise ArgumentError(f"audit_rate must be in [0, 1], got {audit_rate!r}")
        if worker not in ("process", "thread"):
            raise ArgumentError(f"worker must be 'process' or 'thread', got {worker!r}")
        self.task = task
        self.store_path = str(store)
        self.contract = contract or Contract.default_for(task)
        self.policy = policy or CompilePolicy()
        self.worker = worker
        self.compile_timeout_s = compile_timeout_s
        self.reference_model = reference_model
        self.programs = programs
        self._say = progress or (lambda _m: None)
        self._reference = reference
        self._signature = signature
        self._guard_factory = guard_factory
        self._capture_witnesses = capture_witnesses
        self._loader = loader or (lambda wasm, aid: Artifact.load(wasm, expected_id=aid))
        self._prime: Callable[[Any], Any] | None = None
        self.calls = 0
        self._store = Store(self.store_path)
        self._recorder: Recorder | None = None
        self._recorded_reference: Callable[..., Any] | None = None
        if tools is not None:
            self._recorder = Recorder(self._store, owns_store=False)
            if recorded_reference is None:
                def recorded_reference(**kw: Any) -> Any:
                    with task_span(task, input=kw) as span:
                        span.output = reference(kw)
                    return span.output
            self._recorded_reference = recorded_reference
            openai_hook.instrument()
        self._state_lock = threading.RLock()
        self._compile_lock = compile_lock(self.store_path)
        self._lock_busy_logged = False
        self._compiling: threading.Thread | None = None
        self._closed = False
        self._last_poll = 0.0
        self._events: list[dict[str, Any]] = []
        self.capture_errors = 0
        self._warned_json = False
        self._redactor = Redactor()
        self._risk_alpha = risk_alpha
        self._shift_alpha = shift_alpha
        self._shift = ShiftMonitor(alpha=shift_alpha, method="step-jumper", jump_size=0.02, seed=audit_seed) \
            if shift_alpha is not None else None
        self._pending_scores: collections.deque[float] = collections.deque()
        self._scores_ready = threading.Event()
        self._monitor_busy = False
        self._monitor: threading.Thread | None = None
        self._recent: collections.deque[Any] = collections.deque(maxlen=RECENT_INPUTS)
        self._last_comparison: dict[str, Any] | None = None
        self._labels: set[str] = set()
        self._seen: dict[str, str] = {}
        self._state = PolicyState()
        self._installed_id: str | None = None
        self._parent: dict[int, int | None] = {}
        self._evidence = GenerationEvidence(None, self.contract.epsilon, risk_alpha)
        hit_rate = min(audit_rate, DEFAULT_AUDIT_HIT_RATE) if audit_hit_rate is None else audit_hit_rate
        # the table overlay: witnessed inputs answered before the next table (never with tools)
        self._overlay = TableOverlay(self.contract.overlay_min_lead) if tools is None else None
        self._tiered = TieredTask(None, reference=self._tier0, capture=self._capture, task=task,
                                  audit_rate=audit_rate, audit_seed=audit_seed, audit_hit_rate=hit_rate,
                                  audit_max_records=AUDIT_RECORDS, tools=tools, tool_budget=tool_budget,
                                  overlay=self._overlay)
        self._count_witnesses()
        if load:
            self._load_installed()

    # ------------------------------------------------------------------ request path

    def call(self, input_obj: dict[str, Any]) -> Any:
        """Answer one input (a dict of the task's named arguments); returns the answer.

        Raises:
            Exception: whatever the reference raises on a deopt (nothing is captured then).
            InputSchemaError: the input is not JSON-encodable.
        """
        return self.call_result(input_obj).answer

    def call_result(self, input_obj: dict[str, Any]) -> Any:
        """Like :meth:`call`, returning the :class:`auto_runtime.CallResult` (tier, reason, score,
        latency, generation)."""
        prime = self._prime
        if prime is not None:
            prime(input_obj)
        return self._account(input_obj, self._tiered(input_obj))

    def decide(self, input_obj: dict[str, Any]) -> Any:
        """The tier decision without calling the reference: the :class:`auto_runtime.CallResult`
        of a tier-1 answer, or a ``declined`` one (reason, score, would-be output) the caller
        answers itself and then passes to :meth:`complete`. For hosts that answer deopts
        asynchronously (a proxy forwarding them upstream); counted like :meth:`call_result`."""
        prime = self._prime
        if prime is not None:
            prime(input_obj)
        return self._account(input_obj, self._tiered.decide(input_obj))

    def complete(self, input_obj: dict[str, Any], answer: Any, result: Any, latency_us: float | None = None) -> None:
        """The answer of a call :meth:`decide` declined: captured like a deopt the reference
        answered (evidence, witness unless ``capture_witnesses`` is False, compile policy)."""
        self._tiered.capture_deopt(input_obj, answer, result, latency_us)

    def _account(self, input_obj: dict[str, Any], res: Any) -> Any:
        self._recent.append(input_obj)
        self.calls += 1
        ev = self._evidence
        ev.calls += 1
        s = res.score
        if res.tier is TIER_1:
            ev.tier1 += 1
            if s == 0:
                ev.table_hits += 1
        # every specialist score feeds the exchangeability monitor (a table hit's 0 is no specialist
        # score); deopts are fed at once, tier-1 answers in batches
        if s is not None and s != 0 and self._shift is not None:
            self._pending_scores.append(s)
            if res.tier is not TIER_1 or len(self._pending_scores) >= SCORE_BATCH:
                self._wake_monitor()
        return res

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call with the task's own signature (when the ratchet was made from a function by
        :func:`ratchet`), or with one input dict."""
        sig = self._signature
        if sig is None:
            if len(args) != 1 or kwargs or not isinstance(args[0], dict):
                raise TypeError("this ratchet takes one input dict (made without a function signature)")
            return self.call(args[0])
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        return self.call(dict(bound.arguments))

    def _tier0(self, input_obj: dict[str, Any]) -> Any:
        """The reference's answer in its JSON form (a tuple becomes a list, ``{1: x}`` becomes
        ``{"1": x}``), the form a tier-1 answer has: both tiers return the same types. An answer
        that is not JSON is returned as it is and never captured (it cannot be compiled). With
        tools, the run is recorded into the store (its task span is the witness)."""
        rec = self._recorder
        if rec is None:
            answer = self._reference(input_obj)
        else:
            activate(rec)  # the run's task span, model calls and tool calls become the witness
            try:
                answer = self._recorded_reference(**input_obj)  # type: ignore[misc]
            finally:
                deactivate(rec)
        try:
            return json.loads(canonical_json(answer))
        except (TypeError, ValueError):
            return answer

    def _capture(self, rec: dict[str, Any]) -> None:
        """Deopt and audit records from the runtime: write the witness, update the evidence,
        consult the policy (runs on the request thread for deopts, the audit thread for audits)."""
        inp, out = rec["input"], rec["output"]
        try:
            key = canonical_json(inp)
            out_key = canonical_json(out)
        except (TypeError, ValueError) as e:
            self.capture_errors += 1
            if not self._warned_json:
                self._warned_json = True
                log.warning("task %s: an input or reference answer that is not JSON was not kept as a witness "
                            "(%s); answers must be JSON values to be compiled", self.task, e)
            return
        attrs = {"auto.deopt.reason": rec.get("reason"), "auto.deopt.artifact_id": rec.get("artifact_id"),
                 "auto.deopt.generation": rec.get("generation")}
        if rec.get("audit"):
            attrs["auto.audit"] = True
        clean = True  # no secret in the input or the answer: the overlay may repeat it
        # with tools, the recorded run is the witness (the recorder redacts)
        if self._capture_witnesses and self._recorder is None:
            # never store a secret: a witness is a span like any other (a compile leaves redacted ones out)
            kept_in, n_in = self._redactor.redact_value(inp)
            kept_out, n_out = self._redactor.redact_value(out)
            if n_in or n_out:
                clean = False
                attrs["auto.redactions"] = n_in + n_out
                attrs["auto.redacted"] = [f for f, n in (("input", n_in), ("output", n_out)) if n]
            try:
                self._store.add_witness(task=self.task, input=kept_in, output=kept_out, attributes=attrs)
            except AutoError as e:
                self.capture_errors += 1
                log.warning("task %s: witness not stored (%s); the answer was returned", self.task, e)
                return
        elif self._overlay is not None:
            clean = self._redactor.redact_value(inp)[1] == 0 and self._redactor.redact_value(out)[1] == 0
        if clean and self._overlay is not None:  # a redacted witness is never compiled, nor repeated
            self._overlay.observe(inp, out)
        alarm = overlay_alarm = False
        with self._state_lock:
            st = self._state
            prev = self._seen.get(key)
            if prev is None:
                st.witnesses += 1
                self._seen[key] = out_key
            else:
                if prev == out_key:
                    st.repeats_consistent += 1
                if not rec.get("audit"):
                    st.known_misses += 1
            if out_key not in self._labels:
                st.new_labels[out_key] = st.new_labels.get(out_key, 0) + 1
            if st.alarm is not None:
                st.new_since_alarm += 1
            ev = self._evidence
            if rec.get("audit"):
                if rec.get("origin") == OVERLAY_ORIGIN:
                    overlay_alarm = ev.audited_overlay(not rec.get("agree", True))
                else:
                    alarm = ev.audited(not rec.get("agree", True), table_hit=rec.get("tier1_score") == 0)
            else:
                ev.deopts += 1
                wb = rec.get("artifact_output")
                if isinstance(wb, dict) and "answer" in wb:
                    right = canonical_json(wb["answer"]) == out_key
                    ev.would_be_answered += 1
                    ev.would_be_correct += int(right)
                    st.deopts_since_attempt += 1
                    st.would_be_correct_since_attempt += int(right)
        if alarm:
            self._rollback(f"risk alarm: audits reject the certificate ({self._evidence.monitor.describe()})")
        if overlay_alarm:
            self._disable_overlay()
        self._maybe_compile()

    def _disable_overlay(self) -> None:
        """The risk monitor of the overlay's audited answers rejected epsilon: stop answering from
        the overlay and forget its evidence until the next generation is installed."""
        ov = self._overlay
        if ov is None:
            return
        why = f"risk alarm on the overlay's audited answers ({self._evidence.overlay_monitor.describe()})"
        ov.disable(why)
        self._log("alarm", generation=self._state.installed, detail={"monitor": "overlay-risk", "reason": why})
        self._say(f"  overlay disabled: {why}")

    def _wake_monitor(self) -> None:
        """Hand the pending scores to the monitor thread (started on first use)."""
        if self._monitor is None:
            with self._state_lock:
                if self._monitor is None:
                    self._monitor = threading.Thread(target=self._monitor_loop, name=f"auto-ratchet-monitor-{self.task}",
                                                     daemon=True)
                    self._monitor.start()
        self._scores_ready.set()

    def _monitor_loop(self) -> None:
        """The shift monitor's thread: feeds pending scores, :data:`MONITOR_SLICE` at a time, off
        the request path (a batch of 32 on the request thread cost one call in 32 ~300-400 µs)."""
        while not self._closed:
            self._scores_ready.wait(POLL_INTERVAL_S)
            self._monitor_busy = True
            self._scores_ready.clear()
            try:
                while self._pending_scores and not self._closed:
                    self._feed_scores(MONITOR_SLICE)
                    time.sleep(0)  # yield the interpreter lock to the requests
            finally:
                self._monitor_busy = False

    def _feed_scores(self, at_most: int) -> None:
        mon = self._shift
        if mon is None:
            return
        pending = self._pending_scores
        with self._state_lock:
            scores = [pending.popleft() for _ in range(min(at_most, len(pending)))]
            if self._tiered.tightened is not None or self._installed_id is None:
                return
            for s in scores:
                if mon.update_score(s):
                    why = f"exchangeability martingale {mon.statistic:.3g} >= 1/alpha = {1.0 / self._shift_alpha:.3g}"
                    self._tiered.tighten(why)
                    self._state.alarm, self._state.new_since_alarm = "shift-alarm", 0
                    self._log("alarm", generation=self._state.installed, detail={"monitor": "shift", "reason": why})
                    self._say(f"  shift alarm ({why}): every call deopts until the next generation")
                    pending.clear()
                    break

    # ------------------------------------------------------------------ compiles

    def _maybe_compile(self) -> None:
        self._poll_store()
        with self._state_lock:
            if self._closed or (self._compiling is not None and self._compiling.is_alive()):
                return
            trig = self.policy.trigger(self._state)
            if trig is None:
                return
            if not self._take_compile_lock(trig):
                return
            st = self._state
            st.attempts += 1
            st.known_misses_at_attempt = st.known_misses
            st.alarm_streak = st.alarm_streak + 1 if trig["kind"] in ("shift-alarm", "risk-alarm") else 0
            if trig["kind"] != "memo":
                st.witnesses_at_attempt = st.witnesses
                st.repeats_at_attempt = st.repeats_consistent
                st.new_labels = {}
                st.deopts_since_attempt = st.would_be_correct_since_attempt = 0
            if st.alarm is not None:
                st.alarm = None
            th = threading.Thread(target=self._compile, args=(trig,), name=f"auto-ratchet-{self.task}", daemon=True)
            self._compiling = th
            th.start()

    def _take_compile_lock(self, trigger: dict[str, Any]) -> bool:
        """Take the store's compile lock for a compile about to start (the compile thread gives
        it back). While another process holds it, the trigger waits: logged once per such
        stretch, not counted as an attempt (that process's generations are installed from the
        store as they appear)."""
        if self._compile_lock.acquire():
            self._lock_busy_logged = False
            return True
        if not self._lock_busy_logged:
            self._lock_busy_logged = True
            self._log("compile", detail={"verdict": "skipped", "reason": "another process holds the compile lock "
                                         "(its generations are installed from the store)", "trigger": trigger})
        return False

    def _compile(self, trigger: dict[str, Any]) -> None:
        try:
            latest = self._store.latest_artifact(self.task)
            generation = (latest.generation + 1) if latest else 1
            lane = self._lane(trigger)
            req = CompileRequest(store_path=self.store_path, task=self.task, contract=self.contract.model_dump(),
                                 generation=generation, out_path=default_out_path(local_path(self.store_path), self.task, generation),
                                 reference_model=self.reference_model, programs=self.programs,
                                 rungs=["memo"] if lane != "full" else None)
            res = run_compile(req, timeout_s=self.compile_timeout_s, mode=self.worker)
            self._finish(res, {**trigger, "lane": lane})
        except Exception as e:  # noqa: BLE001 - the background thread must survive anything; recorded
            log.exception("task %s: compile thread failed", self.task)
            self._log("compile", detail={"verdict": "error", "reason": f"{type(e).__name__}: {e}", "trigger": trigger})
        finally:
            self._compile_lock.release()

    def _lane(self, trigger: dict[str, Any]) -> str:
        """``"full"`` (the whole ladder) or a table-only lane: ``"table"`` for a table refresh, or
        ``"table (slow rungs predicted to refuse)"`` when the last specialist refusal's
        certificate says it cannot pass yet (:func:`~auto.ratchet.policy.slow_rungs_could_pass`).
        Both table lanes apply only while no installed generation answers new inputs (a table
        alone would be weaker than it) and the task calls no tools."""
        if self._recorder is not None or self._installed_answers_new_inputs():
            return "full"
        if trigger["kind"] == "memo":
            return "table"
        st = self._state
        if not slow_rungs_could_pass(st.refusal, st.refusal_witnesses, st.witnesses, self.contract.epsilon):
            return "table (slow rungs predicted to refuse)"
        return "full"

    def _finish(self, res: CompileResult, trigger: dict[str, Any]) -> None:
        detail = {"verdict": res.verdict, "reason": res.reason, "trigger": trigger, "seconds": round(res.seconds, 3),
                  "compiled_as": res.compiled_as, "eval_run_id": res.eval_run_id,
                  "rungs": res.detail.get("rungs"), "evidence": self._evidence.describe()}
        if trigger.get("lane") == "full" and res.verdict in ("pass", "refuse"):
            with self._state_lock:
                self._state.refusal = res.detail.get("certificate")
                self._state.refusal_witnesses = self._state.witnesses_at_attempt
        self._log("compile", generation=res.generation, artifact_id=res.artifact_id, detail=detail)
        if res.verdict != "pass" or res.artifact_id is None:
            self._say(f"  compile of generation {res.generation} ({trigger['kind']}): {res.verdict}: {res.reason}")
            return
        self._last_comparison = None
        weaker = self._weaker_than_installed(res.artifact_id)
        if weaker is not None:
            self._log("install-skipped", generation=res.generation, artifact_id=res.artifact_id,
                      detail={"reason": weaker, "comparison": self._last_comparison})
            self._say(f"  generation {res.generation} not installed: {weaker}")
            return
        try:
            self._install(res.artifact_id, res.generation, parent=self._state.installed,
                          trigger={**trigger, "comparison": self._last_comparison} if self._last_comparison else trigger)
        except AutoError as e:
            self._log("install-failed", generation=res.generation, artifact_id=res.artifact_id,
                      detail={"reason": f"{type(e).__name__}: {e}"})
            self._say(f"  generation {res.generation} could not be installed: {e}")

    def _installed_answers_new_inputs(self) -> bool:
        cur = self._installed_id
        stored = self._store.get_artifact(cur) if cur is not None else None
        return stored is not None and _answers_new_inputs(stored.manifest)

    def _weaker_than_installed(self, candidate_id: str) -> str | None:
        """Why the candidate would answer less, or worse, than the installed generation, or None.

        Both are run on the same recent live inputs (the last :data:`RECENT_INPUTS` calls, tier-1
        ones included), off the request path, with their own guards:

        - **less**: the candidate would answer at tier-1 on fewer of them than the installed
          generation, by more than :data:`SHARE_TOLERANCE`;
        - **worse**: on the recent inputs that were witnessed (the reference's answer is known),
          the candidate's tier-1 answers disagree with the witnessed answers more often than
          the contract's epsilon and than the installed generation's by more than
          :data:`SHARE_TOLERANCE` (e.g. a program that contradicts frequent witnessed inputs).

        Certified coverages on witnesses are not comparable between generations (witnesses
        over-represent the inputs earlier generations declined), so live inputs are used.
        """
        cur = self._installed_id
        recent = list(self._recent)
        if cur is None or not recent:
            return None
        cand = self._store.get_artifact(candidate_id)
        old = self._store.get_artifact(cur)
        if cand is None or old is None:
            return None
        known = []
        for x in recent:
            try:
                known.append(self._seen.get(canonical_json(x)))
            except (TypeError, ValueError):
                known.append(None)
        new = _tier1_answers(cand.wasm, candidate_id, recent, self._guard_factory, self._store)
        was = _tier1_answers(old.wasm, cur, recent, self._guard_factory, self._store)
        new_share = sum(a is not _DEOPT for a in new) / len(recent)
        old_share = sum(a is not _DEOPT for a in was) / len(recent)
        nd, nn = _disagreement(new, known)
        od, on = _disagreement(was, known)
        self._last_comparison = {"recent_inputs": len(recent), "candidate_tier1_share": new_share,
                                 "installed_tier1_share": old_share, "candidate_disagreements": [nd, nn],
                                 "installed_disagreements": [od, on]}
        if new_share + SHARE_TOLERANCE < old_share:
            return (f"on the last {len(recent)} inputs it would answer {new_share:.1%} at tier-1, the installed "
                    f"generation {self._state.installed} answers {old_share:.1%}")
        if nn >= MIN_KNOWN and nd / nn > max(self.contract.epsilon, (od / on if on else 0.0) + SHARE_TOLERANCE):
            return (f"on the last {len(recent)} inputs its tier-1 answers contradict the witnessed answer on {nd} of "
                    f"{nn}, the installed generation {self._state.installed}'s on {od} of {on}")
        return None

    def _install(self, artifact_id: str, generation: int, *, parent: int | None, trigger: dict[str, Any] | None,
                 record: bool = True) -> None:
        stored = self._store.get_artifact(artifact_id)
        if stored is None:
            raise AutoError(f"artifact {artifact_id} is not in the store")
        art = self._loader(stored.wasm, artifact_id)
        if self._guard_factory is not None:
            art.guard = self._guard_factory(art, self._store)
        labels = {canonical_json(a) for a in ((art.manifest.get("interface") or {}).get("output") or {}).get("enum") or []}
        folded = self._fold_overlay(art)
        with self._state_lock:
            self._tiered.swap(art)
            self._prime = getattr(art.guard, "prime", None)
            self._installed_id = artifact_id
            self._parent.setdefault(generation, parent)
            self._state.installed = generation
            self._labels = labels
            self._evidence = GenerationEvidence(generation, self.contract.epsilon, self._risk_alpha)
            if self._shift is not None:
                self._shift.reset(_calibration_scores(art.manifest))
                self._pending_scores.clear()
            if record:
                self._log("install", generation=generation, artifact_id=artifact_id,
                          detail={"parent": parent, "trigger": trigger, "compiled_as": art.manifest.get("compiled_as"),
                                  "overlay_folded": folded})
        self._say(f"  generation {generation} installed, compiled as {art.manifest.get('compiled_as')}"
                  + (f" (trigger: {trigger['kind']})" if trigger else ""))

    def _fold_overlay(self, art: Artifact) -> int | None:
        """Before ``art`` is installed: adopt its manifest's overlay rule, re-enable a disabled
        overlay (fresh evidence), and mark the overlay entries the new table repeats as folded
        (at most :data:`FOLD_CHECK` of them are run through it). Returns how many were folded."""
        ov = self._overlay
        if ov is None:
            return None
        k = overlay_rule(art.manifest)
        if k is not None:
            ov.set_min_lead(k)
        if ov.disabled is not None:
            ov.enable()
        if art.tools:
            return 0
        inputs = ov.unfolded_inputs(FOLD_CHECK)
        if not inputs:
            return 0
        tt = TieredTask(art, reference=None)
        same = []
        for x in inputs:
            try:
                r = tt(x)
            except (AutoError, TypeError, ValueError):
                continue
            if r.tier == TIER_1 and r.score == 0 and ov.answer_of(x) == (True, r.answer):
                same.append(x)
        return ov.fold(same)

    def _rollback(self, reason: str) -> None:
        with self._state_lock:
            gen = self._state.installed
            parent = self._parent.get(gen) if gen is not None else None
            target = None
            if parent is not None:
                row = next((e for e in reversed(self._store.ratchet_events(self.task))
                            if e["kind"] == "install" and e["generation"] == parent), None)
                target = row["artifact_id"] if row else None
            self._log("rollback", generation=gen, detail={"reason": reason, "to": parent if target else None,
                                                            "evidence": self._evidence.describe()})
            self._state.alarm, self._state.new_since_alarm = "risk-alarm", 0
        if target is not None and parent is not None:
            self._install(target, parent, parent=self._parent.get(parent), trigger={"kind": "rollback"}, record=True)
        else:
            with self._state_lock:
                self._tiered.swap(None)
                self._prime = None
                self._installed_id = None
                self._state.installed = None
                self._evidence = GenerationEvidence(None, self.contract.epsilon, self._risk_alpha)
        self._say(f"  generation {gen} rolled back: {reason}")

    # ------------------------------------------------------------------ store

    def _log(self, kind: str, *, generation: int | None = None, artifact_id: str | None = None,
             detail: dict[str, Any] | None = None) -> None:
        detail = {**(detail or {}), "at_call": self.calls}
        row = {"kind": kind, "generation": generation, "artifact_id": artifact_id, "detail": detail,
               "calls": self.calls}
        self._events.append(row)
        try:
            self._store.add_ratchet_event(self.task, kind, generation=generation, artifact_id=artifact_id,
                                          detail=detail)
        except AutoError as e:
            log.warning("task %s: ratchet event %s not stored: %s", self.task, kind, e)

    def _count_witnesses(self) -> None:
        for w in unit_witnesses(self._store, self.task):
            try:
                key, out = canonical_json(w.input), canonical_json(w.output)
            except (TypeError, ValueError):
                continue
            prev = self._seen.get(key)
            if prev is None:
                self._seen[key] = out
            elif prev == out:
                self._state.repeats_consistent += 1
            if self._overlay is not None:
                self._overlay.observe(w.input, w.output)
        self._state.witnesses = len(self._seen)

    def _load_installed(self) -> None:
        """Load the generation the log says is installed; when its artifact is missing or fails
        its checks (a tampered or corrupt row), the generations installed before it, newest
        first, and log why."""
        cur = self._store.installed_generation(self.task)
        if cur is None:
            return
        candidates = [cur] + [(int(e["generation"]), e["artifact_id"]) for e in reversed(self._store.ratchet_events(self.task))
                              if e["kind"] == "install" and e["artifact_id"] and e["artifact_id"] != cur[1]]
        tried: set[str] = set()
        for gen, aid in candidates:
            if aid in tried:
                continue
            tried.add(aid)
            if aid != cur[1]:
                self._log("rollback", generation=cur[0], detail={"reason": "its artifact could not be loaded at restart",
                                                                "to": gen})
            try:
                self._install(aid, gen, parent=None, trigger={"kind": "restart fallback"} if aid != cur[1] else None,
                              record=aid != cur[1])
                self._state.witnesses_at_attempt = self._state.witnesses
                return
            except AutoError as e:
                self._say(f"  generation {gen} could not be loaded ({type(e).__name__}: {e})")
        self._say("  no installed generation could be loaded; starting with none")

    def _poll_store(self) -> None:
        now = time.monotonic()
        if now - self._last_poll < POLL_INTERVAL_S:
            return
        self._last_poll = now
        if self._compiling is not None and self._compiling.is_alive():
            return
        cur = self._store.installed_generation(self.task)
        if cur is not None and cur[1] != self._installed_id and (self._state.installed or 0) < cur[0]:
            try:
                self._install(cur[1], cur[0], parent=self._state.installed, trigger={"kind": "installed elsewhere"},
                              record=False)
            except AutoError as e:
                log.warning("task %s: generation %s installed by another ratchet could not be loaded: %s",
                            self.task, cur[0], e)

    # ------------------------------------------------------------------ control

    def compile_now(self, reason: str = "requested") -> bool:
        """Start a compile in the background now (trigger ``manual``), unless one is running.

        Returns:
            True when a compile was started.
        """
        with self._state_lock:
            if self._closed or (self._compiling is not None and self._compiling.is_alive()):
                return False
            trig = {"kind": "manual", "evidence": {"reason": reason}}
            if not self._take_compile_lock(trig):
                return False
            st = self._state
            st.attempts += 1
            st.witnesses_at_attempt = st.witnesses
            st.known_misses_at_attempt = st.known_misses
            st.deopts_since_attempt = st.would_be_correct_since_attempt = 0
            th = threading.Thread(target=self._compile, args=(trig,), name=f"auto-ratchet-{self.task}", daemon=True)
            self._compiling = th
            th.start()
            return True

    def adopt(self, wasm: bytes, *, generation: int | None = None) -> int:
        """Install an artifact compiled elsewhere (e.g. before deployment) as the current
        generation: stored, logged (``install``, trigger ``adopted``), swapped in.

        Returns:
            The generation number it was installed as (its manifest's, unless given).

        Raises:
            ArtifactError: the bytes are not a loadable artifact, or it is for another task.
        """
        art = Artifact.load(wasm)
        if art.task != self.task:
            raise ArgumentError(f"the artifact is for task {art.task!r}, this ratchet serves {self.task!r}")
        gen = generation if generation is not None else int(art.generation or 1)
        aid = self._store.put_artifact(wasm, art.manifest, self.task, gen)
        self._install(aid, gen, parent=self._state.installed, trigger={"kind": "adopted"})
        with self._state_lock:
            self._state.witnesses_at_attempt = self._state.witnesses
            self._state.attempts += 1
        return gen

    def wait_idle(self, timeout_s: float | None = None) -> bool:
        """Wait until the ratchet is idle (benchmarks call this to
        make a run reproducible; serving code never needs to): the shift monitor's thread has fed
        the scores handed to it, queued audits are done, no compile runs. Returns True when idle."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            while self._monitor is not None and (self._scores_ready.is_set() or self._monitor_busy):
                if deadline is not None and time.monotonic() >= deadline:
                    return False
                time.sleep(0.0005)
            self._tiered.audit.wait(left)
            th = self._compiling
            if th is not None and th.is_alive():
                th.join(left)
            if th is not None and th.is_alive():
                return False
            if self._compiling is th:  # the audits may have triggered another compile
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return False

    def close(self, timeout_s: float | None = 30.0) -> None:
        """Stop compiling, wait for a running compile and the audits, close the store."""
        self._closed = True
        self._scores_ready.set()
        if self._monitor is not None:
            self._monitor.join(timeout_s)
        th = self._compiling
        if th is not None:
            th.join(timeout_s)
        self._tiered.close(timeout_s)
        if self._recorder is not None and active_recorder() is None:
            openai_hook.uninstrument()
        self._store.close()

    def __enter__(self) -> "Ratchet":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def generation(self) -> int | None:
        """The installed generation, or None."""
        return self._state.installed

    @property
    def tiered(self) -> TieredTask:
        """The runtime object answering calls."""
        return self._tiered

    @property
    def events(self) -> list[dict[str, Any]]:
        """This ratchet's log rows, in order (also in the store: ``Store.ratchet_events``)."""
        return list(self._events)

    def status(self) -> dict[str, Any]:
        """JSON-able state: installed generation, counters, the installed generation's evidence
        (``store_path``: a URI without its password, as ``/auto/status`` shows it)."""
        with self._state_lock:
            st = self._state
            return {"task": self.task, "store_path": location_label(self.store_path), "calls": self.calls,
                    "generation": st.installed, "artifact_id": self._installed_id,
                    "witnesses": st.witnesses, "compile_attempts": st.attempts,
                    "tightened": self._tiered.tightened, "capture_errors": self.capture_errors,
                    "evidence": self._evidence.describe(),
                    "shift_monitor": self._shift.describe() if self._shift is not None else None,
                    "overlay": self._overlay.describe() if self._overlay is not None else None}


_DEOPT = object()


def _tier1_answers(wasm: bytes, artifact_id: str, inputs: list[Any], guard_factory: Any, store: Any) -> list[Any]:
    """Per input, the canonical JSON of a (fresh instance of the) artifact's tier-1 answer, or
    ``_DEOPT`` where it would deopt."""
    art = Artifact.load(wasm, expected_id=artifact_id)
    if guard_factory is not None:
        art.guard = guard_factory(art, store)
    tt = TieredTask(art, reference=None)
    prime = getattr(art.guard, "prime", None)
    out: list[Any] = []
    for x in inputs:
        if prime is not None:
            prime(x)
        try:
            r = tt(x)
            out.append(canonical_json(r.answer) if r.tier == TIER_1 else _DEOPT)
        except (AutoError, TypeError, ValueError):
            out.append(_DEOPT)
    return out


def _disagreement(answers: list[Any], known: list[str | None]) -> tuple[int, int]:
    """``(disagreements, n)`` of the tier-1 answers with the known (witnessed) answers."""
    pairs = [(a, k) for a, k in zip(answers, known) if a is not _DEOPT and k is not None]
    return sum(1 for a, k in pairs if a != k), len(pairs)


def _answers_new_inputs(manifest: dict[str, Any]) -> bool:
    """Whether an artifact may answer inputs that were never witnessed: a program or a region, or a
    specialist whose guard certified a threshold (not a fallback that always deopts)."""
    kind = manifest.get("compiled_as")
    if kind in ("program", "region"):
        return True
    if kind not in ("specialist", "memo-first"):
        return False
    guard = manifest.get("guard") or {}
    if guard.get("fallback_reason"):
        return False
    risk = [c for c in guard.get("components") or [] if isinstance(c, dict) and c.get("method") == "selective-risk"]
    return bool(risk) and risk[-1].get("threshold") is not None


def _calibration_scores(manifest: dict[str, Any]) -> list[float] | None:
    guard = manifest.get("guard") or {}
    for e in [guard] + [c for c in guard.get("components") or [] if isinstance(c, dict)]:
        if e.get("method") == "conformal-novelty" and isinstance(e.get("calibration_scores"), list):
            return list(e["calibration_scores"])
    return None


def ratchet(fn: Callable[..., Any], store: str | os.PathLike, task: str | None = None, **options: Any) -> Ratchet:
    """A :class:`Ratchet` serving the task function ``fn``: the result is called exactly like
    ``fn`` (its named arguments are the task's input), and ``fn(**input)`` is the reference.

    Args:
        fn: the task function (plain, or decorated with ``@auto.task``; its arguments and result
            must be JSON values).
        store: the store file.
        task: the task name (default: the ``@auto.task`` name, else ``fn.__name__``).
        options: the other :class:`Ratchet` arguments.

    Raises:
        ArgumentError: ``fn`` is not callable or has no usable name.
    """
    if not callable(fn):
        raise ArgumentError(f"auto.ratchet() wraps a function, got {type(fn).__name__}")
    name = task or getattr(fn, "__auto_task__", None) or getattr(fn, "__name__", None)
    if not isinstance(name, str) or not name or name == "<lambda>":
        raise ArgumentError("give the task a name (task=...)")
    target = inspect.unwrap(fn)
    sig = inspect.signature(target)

    def reference(inp: dict[str, Any]) -> Any:
        return target(**inp)

    if options.get("tools") is not None and options.get("recorded_reference") is None:
        options["recorded_reference"] = fn if getattr(fn, "__auto_task__", None) == name else None
    return Ratchet(reference, store, name, signature=sig, **options)


__all__ = ["DEFAULT_AUDIT_HIT_RATE", "DEFAULT_AUDIT_RATE", "Ratchet", "ratchet"]
