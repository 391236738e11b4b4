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
background, and the noise probe (:mod:`~auto.ratchet.probe`) re-asks a bounded number of inputs
answered from a single witness while a refused specialist is near certification. An anytime-valid
risk monitor on the audited specialist answers rolls a generation
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

Table overlay (:mod:`auto_runtime.overlay`): every witness the ratchet captures also feeds the
runtime's overlay, which answers a witnessed input at tier-1 from its first repeat (once its
witnesses meet the contract's ``overlay_min_lead`` rule), before any compile; the shadow audit
re-asks those answers at the table-hit rate halved per agreeing witness, within the contract's
``repeat_audit_budget`` (repeats are audited only out of what derived answers earn, so a stream
of repeats costs what an exact dict costs), and their own risk monitor disables the overlay on an
alarm (until the next install). An input whose witnesses disagree, none leading, deopts. Compiles are scheduled in lanes: a table refresh runs the memo
rung alone, and a slow rung (program, specialist) whose last refusal predicts another is left
out (:mod:`auto.ratchet.scheduler`).

The parts: :mod:`~auto.ratchet.capture` (witness, redaction, counters),
:mod:`~auto.ratchet.scheduler` (policy, compile lock, worker, lanes, ``start_attempt``),
:mod:`~auto.ratchet.installer` (load, compare, install, rollback, restart),
:mod:`~auto.ratchet.monitor` (the shift monitor's thread) and :mod:`~auto.ratchet.events` (the
triggers and the typed log rows); :class:`Ratchet` keeps the request path (``call``, ``decide``,
``complete``) and the controls.

Restart: a new Ratchet on the same store loads the generation the log says is installed (the
artifact's bytes are in the store, checked by id), never a half-written file. Several ratchets on
one store (one per process or host) share its witnesses; a lock file beside the store lets one
of them compile at a time, and each picks up generations the others installed.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import threading
import time
from typing import Any, Callable

from auto_runtime import Artifact, TieredTask
from auto_runtime.overlay import TableOverlay
from auto_runtime.tiered import TIER_1

from auto.canonical import canonical_json
from auto.errors import ArgumentError, AutoError, StoreError
from auto.gate import Contract
from auto.ratchet.capture import Capture
from auto.ratchet.events import AlarmRow, Fired, LogRow, Trigger
from auto.ratchet.evidence import GenerationEvidence
from auto.ratchet.installer import Installer
from auto.ratchet.monitor import ShiftFeed
from auto.ratchet.policy import CompilePolicy, PolicyState
from auto.ratchet.probe import NoiseProbe
from auto.ratchet.scheduler import Scheduler
from auto.ratchet.worker import DEFAULT_TIMEOUT_S
from auto.record import openai_hook
from auto.record.core import Recorder, activate, active_recorder, deactivate
from auto.record.core import task as task_span
from auto.store import Store
from auto.store.postgres import location_label

log = logging.getLogger("auto.ratchet")

DEFAULT_AUDIT_RATE = 0.05
"""Share of tier-1 answers re-asked at tier-0 by the shadow audit. Each audit costs one reference
call, so the steady-state cost per item is at least this share of the reference's; 5% keeps the
audit's cost a twentieth of the all-reference cost while giving the risk monitor ~50 audits per
1,000 tier-1 answers."""

DEFAULT_AUDIT_HIT_RATE = 0.01
"""Share of exact-match table hits (and table-overlay answers) the shadow audit re-asks by default
(capped at ``audit_rate``)."""

AUDIT_RECORDS = 1000
"""The shadow audit keeps the latest this many records in memory (its counters count all)."""


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
            audit measures the reference's own consistency, not the specialist's risk. Overlay
            answers decay from it with their agreeing witnesses, and all exact-match audits stay
            within the repeat budget per derived answer.
        repeat_audit_budget: the shadow audit's repeat budget (:mod:`auto_runtime.audit`): the
            contract's ``repeat_audit_budget`` (``"contract"``, the default), a share in [0, 1],
            or None (exact-match answers audited at ``audit_hit_rate`` alone).
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
            with a trust key passes one that checks the generation's signature (the table
            overlay then repeats only answers this process got from the reference, never rows
            read from the store).

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
                 loader: Callable[[bytes, str], Artifact] | None = None,
                 repeat_audit_budget: float | str | None = "contract") -> None:
        _check_settings(reference, store, task, contract, policy, compile_timeout_s, audit_rate, worker)
        if repeat_audit_budget != "contract" and repeat_audit_budget is not None and (
                isinstance(repeat_audit_budget, bool) or not isinstance(repeat_audit_budget, (int, float))
                or not 0.0 <= repeat_audit_budget <= 1.0):
            raise ArgumentError(f"repeat_audit_budget must be 'contract', None or a share in [0, 1], "
                                f"got {repeat_audit_budget!r}")
        self.task = task
        self.store_path = str(store)
        self.contract = contract or Contract.default_for(task)
        self.reference_model = reference_model
        self.programs = programs
        self.say: Callable[[str], None] = progress or (lambda _m: None)
        self.risk_alpha = risk_alpha
        self._reference = reference
        self._signature = signature
        self.calls = 0
        self.store = Store(self.store_path)
        self._recorder: Recorder | None = None
        self._recorded_reference: Callable[..., Any] | None = None
        if tools is not None:
            self._recorder = Recorder(self.store, owns_store=False)
            if recorded_reference is None:
                def recorded_reference(**kw: Any) -> Any:
                    with task_span(task, input=kw) as span:
                        span.output = reference(kw)
                    return span.output
            self._recorded_reference = recorded_reference
            openai_hook.instrument()
        self.state_lock = threading.RLock()
        self.state = PolicyState()
        self.evidence = GenerationEvidence(None, self.contract.epsilon, risk_alpha)
        self._events: list[dict[str, Any]] = []
        # the table overlay: witnessed inputs answered before the next table (never with tools)
        self.overlay = TableOverlay(self.contract.overlay_min_lead) if tools is None else None
        self.capture = Capture(self, write_witnesses=capture_witnesses and self._recorder is None)
        self.noise_probe = NoiseProbe(self)
        self.shift_feed = ShiftFeed(self, shift_alpha, audit_seed)
        self.installer = Installer(self, guard_factory, loader)
        self.scheduler = Scheduler(self, policy or CompilePolicy(), worker, compile_timeout_s)
        hit_rate = min(audit_rate, DEFAULT_AUDIT_HIT_RATE) if audit_hit_rate is None else audit_hit_rate
        self._tiered = TieredTask(None, reference=self._tier0, capture=self._capture, task=task,
                                  audit_rate=audit_rate, audit_seed=audit_seed, audit_hit_rate=hit_rate,
                                  audit_hit_budget=(self.contract.repeat_audit_budget if repeat_audit_budget == "contract"
                                                    else repeat_audit_budget),
                                  audit_max_records=AUDIT_RECORDS, tools=tools, tool_budget=tool_budget,
                                  overlay=self.overlay)
        self.capture.count_witnesses(seed_overlay=loader is None)
        if load:
            self.installer.load_installed()

    @property
    def records_runs(self) -> bool:
        """Whether the reference runs recorded (a task with tools: the run is the witness)."""
        return self._recorder is not None

    @property
    def policy(self) -> CompilePolicy:
        """When this ratchet compiles."""
        return self.scheduler.policy

    @property
    def tiered(self) -> TieredTask:
        """The runtime object answering calls."""
        return self._tiered

    @property
    def capture_errors(self) -> int:
        """Records not kept as witnesses (not JSON, or the store refused them)."""
        return self.capture.errors

    @property
    def _store(self) -> Store:
        return self.store

    @property
    def _compiling(self) -> threading.Thread | None:
        return self.scheduler.thread

    # ------------------------------------------------------------------ request path

    # ------------------------------------------------------------------ request path

    def call(self, input_obj: dict[str, Any]) -> Any:
        """Answer one input (a dict of the task's named arguments); returns the answer.

        An input that is not JSON-encodable is answered by the reference and never captured (it
        cannot be compiled); a warning says so.

        Raises:
            Exception: whatever the reference raises on a deopt (nothing is captured then).
            StoreError: the ratchet is closed (:meth:`close`); nothing is called.
        """
        return self.call_result(input_obj).answer

    def _check_open(self) -> None:
        if self.scheduler.closed:
            raise StoreError(f"this ratchet (task {self.task!r}) is closed, and its store with it: make a new "
                             "one (auto.ratchet(...)) to keep serving")

    def call_result(self, input_obj: dict[str, Any]) -> Any:
        """Like :meth:`call`, returning the :class:`auto_runtime.CallResult` (tier, reason, score,
        latency in µs, generation).

        Raises:
            StoreError: the ratchet is closed; nothing is called.
        """
        self._check_open()
        prime = self.installer.prime
        if prime is not None:
            prime(input_obj)
        return self._account(input_obj, self._tiered(input_obj))

    def decide(self, input_obj: dict[str, Any]) -> Any:
        """The tier decision without calling the reference: the :class:`auto_runtime.CallResult`
        of a tier-1 answer, or a ``declined`` one (reason, score, would-be output) the caller
        answers itself and then passes to :meth:`complete`. For hosts that answer deopts
        asynchronously (a proxy forwarding them upstream); counted like :meth:`call_result`.

        Raises:
            StoreError: the ratchet is closed.
        """
        self._check_open()
        prime = self.installer.prime
        if prime is not None:
            prime(input_obj)
        return self._account(input_obj, self._tiered.decide(input_obj))

    def complete(self, input_obj: dict[str, Any], answer: Any, result: Any, latency_us: float | None = None) -> None:
        """The answer of a call :meth:`decide` declined: captured like a deopt the reference
        answered (evidence, witness unless ``capture_witnesses`` is False, compile policy)."""
        self._tiered.capture_deopt(input_obj, answer, result, latency_us)

    def _account(self, input_obj: dict[str, Any], res: Any) -> Any:
        self.installer.recent.append(input_obj)
        self.calls += 1
        ev = self.evidence
        ev.calls += 1
        s = res.score
        if res.tier is TIER_1:
            ev.tier1 += 1
            if s == 0:
                ev.table_hits += 1
                if self.noise_probe.armed is not None:
                    self.noise_probe.offer(input_obj, res)
                if res.reason == "overlay":  # a stream of repeats deopts nothing: the overlay's counters decide
                    self.scheduler.on_overlay_answer()
        # every specialist score feeds the exchangeability monitor (a table hit's 0 is no specialist
        # score); deopts are fed at once, tier-1 answers in batches
        if s is not None and s != 0:
            self.shift_feed.offer(s, res.tier is not TIER_1)
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
        """Deopt and audit records from the runtime (the request thread's deopts, the audit
        thread's audits): capture them, act on the alarms they raise, consult the policy."""
        raised = self.capture.record(rec)
        if rec.get("probe"):
            self.noise_probe.observed(rec)
        if raised.risk:
            self.installer.rollback(f"risk alarm: audits reject the certificate ({self.evidence.monitor.describe()})")
        if raised.overlay and self.overlay is not None:
            why = f"risk alarm on the overlay's audited answers ({self.evidence.overlay_monitor.describe()})"
            self.overlay.disable(why)  # until the next install, from fresh evidence
            self.log(AlarmRow(self.state.installed, monitor="overlay-risk", reason=why))
            self.say(f"  overlay disabled: {why}")
        self.scheduler.maybe_compile()

    def log(self, row: LogRow) -> None:
        """Append one typed row to the ratchet log (this ratchet's and the store's)."""
        r = row.row(self.calls)
        self._events.append(r)
        try:
            self.store.add_ratchet_event(self.task, r["kind"], generation=r["generation"],
                                         artifact_id=r["artifact_id"], detail=r["detail"])
        except AutoError as e:
            log.warning("task %s: ratchet event %s not stored: %s", self.task, r["kind"], e)

    # ------------------------------------------------------------------ control

    def compile_now(self, reason: str = "requested") -> bool:
        """Start a compile in the background now (trigger ``manual``), unless one is running.

        Returns:
            True when a compile was started.
        """
        return self.scheduler.compile_now(reason)

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
        aid = self.store.put_artifact(wasm, art.manifest, self.task, gen)
        self.installer.install(aid, gen, parent=self.state.installed, trigger=Fired(Trigger.ADOPTED))
        with self.state_lock:
            self.state.witnesses_at_attempt = self.state.witnesses
            self.state.attempts += 1
        return gen

    def wait_idle(self, timeout_s: float | None = None) -> bool:
        """Wait until the ratchet is idle (benchmarks call this to
        make a run reproducible; serving code never needs to): the shift monitor's thread has fed
        the scores handed to it, queued audits are done, no compile runs. Returns True when idle."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            while not self.shift_feed.idle():
                if deadline is not None and time.monotonic() >= deadline:
                    return False
                time.sleep(0.0005)
            self._tiered.audit.wait(left)
            th = self.scheduler.thread
            if th is not None and th.is_alive():
                th.join(left)
            if th is not None and th.is_alive():
                return False
            if self.scheduler.thread is th:  # the audits may have triggered another compile
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return False

    def close(self, timeout_s: float | None = 30.0) -> None:
        """Stop compiling, wait for a running compile and the audits, close the store."""
        self.scheduler.closed = True
        self.shift_feed.close(timeout_s)
        th = self.scheduler.thread
        if th is not None:
            th.join(timeout_s)
        self._tiered.close(timeout_s)
        if self._recorder is not None and active_recorder() is None:
            openai_hook.uninstrument()
        self.store.close()

    def __enter__(self) -> "Ratchet":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def generation(self) -> int | None:
        """The installed generation, or None."""
        return self.state.installed

    @property
    def events(self) -> list[dict[str, Any]]:
        """This ratchet's log rows, in order (also in the store: ``Store.ratchet_events``)."""
        return list(self._events)

    def status(self) -> dict[str, Any]:
        """JSON-able state: installed generation, counters, the installed generation's evidence
        (``store_path``: a URI without its password, as ``/auto/status`` shows it), the shift
        monitor and the table overlay."""
        with self.state_lock:
            st = self.state
            return {"task": self.task, "store_path": location_label(self.store_path), "calls": self.calls,
                    "generation": st.installed, "artifact_id": self.installer.installed_id,
                    "witnesses": st.witnesses, "compile_attempts": st.attempts,
                    "tightened": self._tiered.tightened, "capture_errors": self.capture.errors,
                    "evidence": self.evidence.describe(), "shift_monitor": self.shift_feed.describe(),
                    "overlay": self.overlay.describe() if self.overlay is not None else None,
                    "determinism": self._determinism(), "noise_probe": self.noise_probe.describe()}

    def _determinism(self) -> dict[str, Any]:
        """What is known of the reference's determinism on this task: the inputs re-asked
        (witnessed again by a deopt or an audit) and how many answered as before, beside the
        repeats the overlay answered from witnesses it never re-asked (determinism unmeasured
        on those; ``rate`` null when nothing was re-asked)."""
        st = self.state
        reasked = st.repeats_consistent + st.repeats_changed
        ov = self.overlay
        return {"reasked": reasked, "consistent": st.repeats_consistent,
                "rate": st.repeats_consistent / reasked if reasked else None,
                "served_from_first_witness": ({"answers": ov.hits, "inputs": ov.served_inputs()}
                                              if ov is not None else None)}


def _check_settings(reference: Any, store: Any, task: Any, contract: Any, policy: Any, compile_timeout_s: Any,
                    audit_rate: Any, worker: Any) -> None:
    """Raise :class:`ArgumentError` for a bad :class:`Ratchet` setting (one clear line each)."""
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
