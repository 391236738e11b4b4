"""Recording core: the active recorder, span scopes (contextvars), ``@auto.task`` and ``@auto.tool``.

Model of a recording:

* A :class:`Recorder` is *active* between :func:`~auto.record.session.start_recording` and
  :func:`~auto.record.session.stop_recording` (or inside ``with recording(store):``). It is
  process-wide: every thread and every asyncio task records into it.
* A :class:`SpanScope` is one open span (a task or tool execution). The innermost open scope of
  the running thread/task is the contextvar :data:`CURRENT`; model calls made inside it become
  its child ``llm`` spans. (New threads start with an empty context in Python 3.11: to keep
  nesting across a thread pool, submit ``contextvars.copy_context().run``.)
* A span is written when it **ends**: the agent's thread builds what only it can know then
  (ids, times, status, input and output as JSON values, what a scope counted) and hands the span
  to a background writer (:mod:`auto.record.writer`, off the agent's call path) that completes
  it (a model call's response body parsed, its attributes, template digest and site; a scope's
  counts of the model calls below it), redacts it, appends it to the store's journal (from then
  on it survives the process being killed outright) and writes it in a short transaction of its
  own or batched with others that ended meanwhile (flushed at stop and before any read through
  the same store). The writer completes spans one at a time in the order they ended, so what a
  span reads from the spans that ended before it is there. A killed process loses its open
  spans and those that ended in the last moments before the kill, not yet journaled (at most
  about :data:`auto.record.writer.POLL_S` while the agent is busy; :meth:`Recorder.wait_durable`
  waits for them). A trace row is written when its root span ends.

Tool use (linked spans): a model call whose response asks for tool calls registers them on its
scope (:meth:`SpanScope.request_tools`); a ``tool`` span below that scope with the same tool
name takes, when it is completed, the oldest matching request (canonically equal arguments
first, else the oldest of that name) and records ``gen_ai.tool.call.id``,
``auto.tool.requested_by`` (the model-call span) and ``auto.tool.arguments_match``; a later
model call that sends a ``tool`` message back records ``auto.tool_results`` (which tool span's
result went back, and whether the content is that result). A tool declares
``auto.tool.effects``: ``"read"`` or ``"effect"``.

Times: ``*_ns`` are ``time.time_ns()``; latencies ``auto.latency_ms`` are milliseconds (float;
a span's wall time plus what its model calls reported, :mod:`auto.record.latency`).
Costs: ``auto.cost_usd_micros`` in µ$ (None = unknown).
"""

from __future__ import annotations

import contextvars
import dataclasses
import enum
import functools
import inspect
import json
import logging
import math
import os
import sys
import threading
import time
import types
from typing import Any, Callable

from auto_runtime.tools import journal_active, journaled_result

from auto.canonical import canonical_json, digest
from auto.errors import ArgumentError, RecordError
from auto.record.latency import CallLatency, LatencyTally
from auto.record.redact import Redactor
from auto.record.writer import SpanWriter
from auto.store import Store, local_path, new_span_id, new_trace_id
from auto.store.journal import Journal, journal_dir

log = logging.getLogger("auto.record")

CURRENT: contextvars.ContextVar["SpanScope | None"] = contextvars.ContextVar("auto_record_current", default=None)
"""The innermost open task/tool scope of the running context (None outside any)."""

_ACTIVE: list["Recorder"] = []
ACTIVE_LOCK = threading.RLock()
"""Guards the stack of active recorders (held while one is activated or deactivated)."""


# ----------------------------------------------------------------------------- JSON values


def to_jsonable(value: Any, what: str = "value") -> Any:
    """Convert a task argument/result to a JSON value (raises :class:`RecordError` if impossible).

    Accepted: None, bool, int, finite float, str, lists/tuples, dicts with str keys, pydantic
    models (``model_dump(mode="json")``), dataclass instances, ``enum.Enum`` (its value).
    """
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise RecordError(f"{what} is not JSON-serializable (non-finite float {value!r})")
        return value
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v, f"{what}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise RecordError(f"{what} is not JSON-serializable (dict key {k!r} is not a string)")
            out[k] = to_jsonable(v, f"{what}[{k!r}]")
        return out
    if isinstance(value, enum.Enum):
        return to_jsonable(value.value, what)
    if hasattr(value, "model_dump") and callable(value.model_dump):
        return to_jsonable(value.model_dump(mode="json"), what)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_jsonable(dataclasses.asdict(value), what)
    raise RecordError(f"{what} is not JSON-serializable (type {type(value).__name__})")


_PLAIN = frozenset({str, int, bool})
"""Exact types :func:`to_jsonable` returns as they are (checked first on the recording path)."""


def _json_equal_text(text: str, value: Any) -> bool:
    """Whether ``text`` is JSON whose value is canonically equal to ``value``."""
    try:
        return canonical_json(json.loads(text)) == canonical_json(value)
    except (TypeError, ValueError):
        return False


def error_json(exc: BaseException) -> dict:
    """``{"type": "module.QualName", "message": str(exc)}`` (+ ``status_code`` when the error has one)."""
    cls = type(exc)
    out: dict[str, Any] = {"type": f"{cls.__module__}.{cls.__qualname__}", "message": str(exc)}
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        out["status_code"] = status
    return out


# ----------------------------------------------------------------------------- recorder


class Recorder:
    """Writes finished spans into a :class:`~auto.store.Store`.

    Attributes:
        store: the target store.
        owns_store: the recorder opened the store (from a path) and closes it at stop.
        process_scope: with ``task=T``, the per-process task span that groups model calls made
            outside any ``@auto.task`` (closed by :meth:`finish`).
        written: spans written; write_errors: failed writes (logged, counted, reported at stop).
        sync: spans are written in the thread that ended them (``sync=True`` or
            ``AUTO_RECORD_SYNC=1``) instead of by the background writer (the default).
        open_streams: model-call attempts whose response stream is still open.
        redactor: redacts secrets from every span and trace before it is written
            (:class:`~auto.record.redact.Redactor`).
    """

    def __init__(self, store: Store | str | os.PathLike, task: str | None = None, owns_store: bool | None = None,
                 sync: bool | None = None):
        self.store = store if isinstance(store, Store) else Store(store)
        self.owns_store = (not isinstance(store, Store)) if owns_store is None else owns_store
        self.written = 0
        self.write_errors: list[str] = []
        self._lock = threading.Lock()
        self.sync = os.environ.get("AUTO_RECORD_SYNC") == "1" if sync is None else sync
        self._writer: SpanWriter | None = None
        if not self.sync:  # spans are written off the agent's call path (auto.record.writer)
            self._writer = SpanWriter(self.store, self._count_written, self._count_failed,
                                      journal=Journal(journal_dir(local_path(self.store.location))),
                                      prepare=self.redact)
            self.store.add_read_barrier(self._writer.flush)
        self.open_streams: set = set()  # attempts whose response stream is still open
        self.redactor = Redactor()
        self.process_scope: SpanScope | None = None
        if task:
            self.process_scope = SpanScope.open(self, task, "task", {"argv": list(sys.argv)}, parent=None,
                                                attributes={"auto.scope": "process", "process.pid": os.getpid()})

    def write(self, spans: list[dict], traces: list[dict] = (), complete: Callable[[], None] | None = None) -> None:
        """Hand one batch over to be redacted and ingested (one short transaction, all or
        nothing): queued for the background writer, which redacts it before its journal write
        (no secret reaches the disk), or redacted and ingested in this thread with ``sync``.
        ``complete``: fills in what the spans still lack, in place (called first, by whichever
        thread writes them). Failures are logged and counted, not raised (a span that cannot be
        completed or redacted is not written). The caller does not change the spans afterwards
        (``complete`` may fill the two lists themselves: they are handed over as they are)."""
        try:
            if self._writer is not None:
                self._writer.submit(spans, traces if type(traces) is list else list(traces), complete)
                return
            if complete is not None:
                complete()
            if not spans and not traces:
                return  # (a batch that only completes: what the writer learns, in order)
            spans, traces = self.redact(spans, traces)
            self.store.ingest(spans, traces)
            self._count_written(len(spans))
        except Exception as exc:  # recording must not break the agent
            self._count_failed(len(spans), exc)

    def redact(self, spans: list[dict], traces: list[dict]) -> tuple[list[dict], list[dict]]:
        """``(spans, traces)`` with their secrets redacted (:attr:`redactor`)."""
        values = self.redactor.values()
        return ([self.redactor.redact_span(s, values) for s in spans],
                [self.redactor.redact_span(t, values) for t in traces])

    def _count_written(self, n: int) -> None:
        with self._lock:
            self.written += n

    def _count_failed(self, n: int, exc: BaseException) -> None:
        msg = f"{type(exc).__name__}: {exc}"
        with self._lock:
            self.write_errors.append(msg)
        log.error("auto: could not record %d span(s): %s", n, msg)

    def flush(self) -> None:
        """Wait until every span ended so far is written (or its failure counted)."""
        if self._writer is not None:
            self._writer.flush()

    def wait_durable(self, timeout: float | None | object = ...) -> bool:
        """Wait until every span ended so far would survive the process being killed outright
        (journaled or written: :meth:`auto.record.writer.SpanWriter.wait_durable`; at once with
        ``sync``); False on timeout (s; None: no limit; by default
        :data:`auto.record.writer.DURABLE_WAIT_S`, which bounds the wait through a database outage) and False once any span was lost (not journaled and not written)."""
        if self._writer is None:
            return not self.write_errors
        return self._writer.wait_durable(timeout)

    def current_scope(self) -> "SpanScope | None":
        """The innermost open scope of this context, else the process scope (or None)."""
        return CURRENT.get() or self.process_scope

    def finish(self, error: BaseException | None = None) -> None:
        """End what is still open: streams (recorded as incomplete) and the process scope
        (status ``error`` with ``error`` when given, else ``ok``)."""
        for attempt in list(self.open_streams):
            try:
                attempt.finish_incomplete("recording stopped before the stream was closed")
            except Exception:  # pragma: no cover - best effort
                log.exception("auto: could not finish an open stream")
        if self.process_scope is not None:
            scope, self.process_scope = self.process_scope, None
            if error is not None:
                scope.finish_error(error)
            else:
                scope.finish_ok(None)
        if self._writer is not None:  # everything ended is written before the recording stops
            self._writer.close()
            self.store.remove_read_barrier(self._writer.flush)


def active_recorder() -> Recorder | None:
    """The recorder that is recording now (innermost :func:`~auto.record.session.recording`), or None."""
    return _ACTIVE[-1] if _ACTIVE else None


def activate(rec: Recorder) -> None:
    """Make ``rec`` the innermost active recorder."""
    with ACTIVE_LOCK:
        _ACTIVE.append(rec)


def is_active(rec: Recorder) -> bool:
    """Whether ``rec`` is active (at any depth)."""
    with ACTIVE_LOCK:
        return rec in _ACTIVE


def deactivate(rec: Recorder) -> int:
    """Remove ``rec`` from the active recorders; returns how many stay active."""
    with ACTIVE_LOCK:
        if rec in _ACTIVE:
            _ACTIVE.remove(rec)
        return len(_ACTIVE)


# ----------------------------------------------------------------------------- scopes

_NO_CALLS: frozenset[str] = frozenset()
_NO_RUNS: Any = types.MappingProxyType({})
_NO_LATENCY = LatencyTally()
_NO_ATTRIBUTES: Any = types.MappingProxyType({})
_SCOPES_LOCK = threading.Lock()
"""What a scope holds until its first child reports (never changed: a scope makes its own then)."""


class SpanScope:
    """One open span (kind ``task`` or ``tool``) and what its children reported to it.

    Attributes:
        trace_id, span_id, parent_span_id: ids; name, kind; task: the enclosing task's name;
        task_input: the enclosing task's input (used for prompt templates);
        input: this span's input; attributes: extra attributes written with the span.
    """

    # what a scope starts with (class defaults: the calling thread stores only what differs);
    # aggregates reported by children are made when the first child reports, on the writer
    _lock = _SCOPES_LOCK  # (held for a few fields at a time: one lock for every scope)
    _done = False
    attributes: Any = _NO_ATTRIBUTES
    parent_span_id: str | None = None
    is_root = True
    llm_calls: frozenset[str] | set[str] = _NO_CALLS
    llm_attempts = 0
    cost_micros: float | None = 0.0
    cost_known = True
    latency: LatencyTally | None = None  # what the model calls below reported about latency
    # tool use: calls requested by model calls in this scope, and the tool spans that ran them
    tool_requests: list[dict[str, Any]] | tuple = ()
    tool_runs: Any = _NO_RUNS

    def __init__(self, recorder: Recorder, name: str, kind: str, input: Any, parent: "SpanScope | None",
                 attributes: dict | None = None) -> None:  # use SpanScope.open
        self.recorder = recorder
        self.name, self.kind, self.input = name, kind, input
        self.parent = parent
        if attributes:
            self.attributes = dict(attributes)
        self.span_id = new_span_id()
        if parent is None:
            self.trace_id = new_trace_id()
        else:
            self.trace_id, self.parent_span_id, self.is_root = parent.trace_id, parent.span_id, False
        self.task: str | None
        if kind == "task":
            self.task, self.task_input = name, input if isinstance(input, dict) else {}
        else:
            self.task = parent.task if parent else None
            self.task_input = parent.task_input if parent else {}
        self._t0 = time.perf_counter_ns()
        self.started_ns = time.time_ns()

    @classmethod
    def open(cls, recorder: Recorder, name: str, kind: str, input: Any, parent: "SpanScope | None",
             attributes: dict | None = None) -> "SpanScope":
        """Open a span now (ids drawn, clock started)."""
        return cls(recorder, name, kind, input, parent, attributes)

    # -- tool use ------------------------------------------------------------------------

    def request_tools(self, llm_span_id: str, tool_calls: list[dict[str, Any]]) -> None:
        """Register the tool calls a model call (span ``llm_span_id``) asked for."""
        with self._lock:
            if type(self.tool_requests) is tuple:
                self.tool_requests = []
            for tc in tool_calls:
                fn = tc.get("function") or {}
                try:
                    args = canonical_json(json.loads(fn.get("arguments") or "{}"))
                except (TypeError, ValueError):
                    args = None
                self.tool_requests.append({"id": tc.get("id"), "name": fn.get("name"), "arguments": args,
                                           "llm_span_id": llm_span_id})

    def claim_tool_request(self, name: str, arguments: Any) -> dict[str, Any] | None:
        """The oldest request for tool ``name`` in this scope or an enclosing one (canonically equal
        ``arguments`` preferred), removed from its scope; None when no model call asked for it."""
        try:
            key = canonical_json(arguments)
        except (TypeError, ValueError):
            key = None
        scope: SpanScope | None = self
        while scope is not None:
            with scope._lock:
                same = [r for r in scope.tool_requests if r["name"] == name]
                pick = next((r for r in same if r["arguments"] == key), same[0] if same else None)
                if pick is not None:
                    scope.tool_requests.remove(pick)  # type: ignore[union-attr]
                    return {**pick, "arguments_match": pick["arguments"] == key, "scope": scope}
            scope = scope.parent
        return None

    def tool_ran(self, call_id: str, span_id: str, output: Any) -> None:
        """A tool span that ran the request ``call_id`` ended with ``output``."""
        with self._lock:
            if self.tool_runs is _NO_RUNS:
                self.tool_runs = {}
            self.tool_runs[call_id] = {"span_id": span_id, "output": output}

    def tool_results(self, messages: Any) -> list[dict[str, Any]]:
        """For each ``tool`` message of a request: which tool span's result went back
        (``tool_call_id``, ``tool_span_id`` or None, ``matches_result``: the content equals the
        span's output as text or as canonical JSON)."""
        out = []
        for m in messages if isinstance(messages, list) else []:
            if not isinstance(m, dict) or m.get("role") != "tool":
                continue
            cid = m.get("tool_call_id")
            run = None
            scope: SpanScope | None = self
            while scope is not None and run is None:
                with scope._lock:
                    run = scope.tool_runs.get(cid)
                scope = scope.parent
            content = m.get("content")
            match = None
            if run is not None:
                o = run["output"]
                match = content == o or (isinstance(content, str) and _json_equal_text(content, o))
            out.append({"tool_call_id": cid, "tool_span_id": run["span_id"] if run else None, "matches_result": match})
        return out

    # -- children report here ------------------------------------------------------------

    def add_llm_attempt(self, logical_id: str, ok: bool, cost: float | None, latency: CallLatency,
                        billed: bool | None = None) -> None:
        """Called when a child model-call attempt ends. Its cost (µ$, None = unknown) counts when
        it was billed (default: when ``ok``): a stream cut short was billed, and with no reported
        usage it makes the scope's cost unknown, never 0."""
        with self._lock:
            self.llm_calls = self.llm_calls | {logical_id}
            self.llm_attempts += 1
            if ok if billed is None else billed:
                if cost is None:
                    self.cost_known = False
                elif self.cost_micros is not None:
                    self.cost_micros += cost
        self._tally().add_call(latency)

    def _tally(self) -> LatencyTally:
        """:attr:`latency`, made on first use."""
        with self._lock:
            if self.latency is None:
                self.latency = LatencyTally()
            return self.latency

    def _absorb(self, child: "SpanScope") -> None:
        with self._lock:
            self.llm_calls = self.llm_calls | child.llm_calls
            self.llm_attempts += child.llm_attempts
            if not child.cost_known:
                self.cost_known = False
            elif self.cost_micros is not None and child.cost_micros is not None:
                self.cost_micros += child.cost_micros
        if child.latency is not None:
            self._tally().absorb(child.latency)

    # -- ending --------------------------------------------------------------------------

    def finish_ok(self, output: Any) -> None:
        self._finish("ok", output, None)

    def finish_error(self, exc: BaseException) -> None:
        self._finish("error", None, error_json(exc))

    def _finish(self, status: str, output: Any, error: dict | None) -> None:
        with self._lock:
            if self._done:
                return
            self._done = True
        # a model call of this scope whose stream is still open ends with the scope (its span and
        # its cost belong to this span, not to the garbage collector or the end of the recording)
        if self.recorder.open_streams:
            for attempt in list(self.recorder.open_streams):
                if getattr(attempt, "scope", None) is self:
                    attempt.finish_incomplete(f"the {self.kind} ended before the stream was read to the end or closed")
        wall_ns = time.perf_counter_ns() - self._t0
        ended = self.started_ns + wall_ns
        wall_ms = wall_ns / 1e6
        spans: list[dict] = []
        traces: list[dict] = []
        # the span (and the trace of a root) are built by whichever thread completes them: the
        # values they hold are taken now (ids, times, status, and JSON values nobody changes)
        attrs = {} if self.attributes is _NO_ATTRIBUTES else dict(self.attributes)
        complete: Callable[[], None] | None = functools.partial(self._build, spans, traces, status, output, error,
                                                                 ended, attrs, wall_ms)
        if self.parent is not None and self.parent.recorder is not self.recorder:
            complete()  # another recorder writes the parent: what it reads is settled now
            complete = None
        self.recorder.write(spans, traces, complete)

    def _build(self, spans: list[dict], traces: list[dict], status: str, output: Any, error: dict | None,
               ended: int, attrs: dict[str, Any], wall_ms: float) -> None:
        """Fill ``spans`` (and ``traces``, for a root) with this ended span, then complete it."""
        span = {
            "trace_id": self.trace_id, "span_id": self.span_id, "parent_span_id": self.parent_span_id,
            "name": self.name, "kind": self.kind, "task": self.task, "site": None,
            "started_ns": self.started_ns, "ended_ns": ended, "status": status,
            "input": self.input, "output": output, "error": error, "attributes": None,
        }
        spans.append(span)
        if self.is_root:
            traces.append({"trace_id": self.trace_id, "name": self.name, "started_ns": self.started_ns,
                           "ended_ns": ended, "status": status, "attributes": {"auto.root_kind": self.kind}})
        self._complete(span, attrs, wall_ms, output)

    def _complete(self, span: dict, attrs: dict[str, Any], wall_ms: float, output: Any) -> None:
        """Complete the span's attributes (run by the recorder's writer, in the order spans
        ended, so every model call and child span that ended before this one has reported to
        it): for a tool span the model call's request it ran (:meth:`claim_tool_request`), the
        model calls, cost and latency counted here; then this span's counts go to its parent."""
        if self.kind == "tool" and self.parent is not None:
            req = self.parent.claim_tool_request(self.name, self.input)
            if req is not None:
                attrs["gen_ai.tool.call.id"] = req["id"]
                attrs["auto.tool.requested_by"] = req["llm_span_id"]
                attrs["auto.tool.arguments_match"] = req["arguments_match"]
        attrs["auto.llm_calls"] = len(self.llm_calls)
        attrs["auto.llm_attempts"] = self.llm_attempts
        attrs["auto.cost_usd_micros"] = (self.cost_micros if self.cost_known else None) if self.llm_attempts else 0.0
        attrs.update((self.latency or _NO_LATENCY).attributes(wall_ms))
        call_id = attrs.get("gen_ai.tool.call.id")
        if self.kind == "tool" and call_id and self.parent is not None:
            self.parent.tool_ran(call_id, self.span_id, output)
        span["attributes"] = attrs
        if self.parent is not None:
            self.parent._absorb(self)


# ----------------------------------------------------------------------------- @task / @tool


def _positional_names(sig: inspect.Signature) -> tuple[str, ...] | None:
    """The parameter names when every parameter is positional-or-keyword (then a call with one
    positional argument per parameter binds them in order), else None."""
    params = list(sig.parameters.values())
    if all(p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p in params):
        return tuple(p.name for p in params)
    return None


def _bind_input(sig: inspect.Signature, skip_first: bool, name: str, args: tuple, kwargs: dict,
                names: tuple[str, ...] | None = None) -> dict | None:
    """Bound arguments as a JSON object (defaults applied), or None if the call does not bind.
    ``names``: :func:`_positional_names` of ``sig`` (binds a call with all arguments given
    positionally without :meth:`inspect.Signature.bind`)."""
    if names is not None and not kwargs and len(args) == len(names):
        items = list(zip(names, args))
    else:
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError:
            return None
        bound.apply_defaults()
        items = list(bound.arguments.items())
    if skip_first and items:
        items = items[1:]
    out = {}
    plain = True
    for k, v in items:
        if v is None or type(v) in _PLAIN:
            out[k] = v
        else:
            out[k] = to_jsonable(v, f"{name}: argument {k!r}")
            plain = False
    if not plain:  # (None, str, int and bool values always have a canonical JSON text)
        canonical_json(out)
    return out


class _current:
    """``with _current(scope):`` — ``scope`` is the innermost open scope inside the block; an
    exception leaving the block is recorded on it (status ``error``) and propagates."""

    __slots__ = ("scope", "token")

    def __init__(self, scope: SpanScope) -> None:
        self.scope = scope

    def __enter__(self) -> None:
        self.token = CURRENT.set(self.scope)

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> bool:
        try:
            if exc is not None:
                self.scope.finish_error(exc)
        finally:
            CURRENT.reset(self.token)
        return False


class TaskSpec:
    """What ``auto.task(name)`` returns: a decorator and a (sync or async) context manager.

    As a decorator, each call of the function while recording is active becomes one span
    (kind ``task``) whose ``input`` is the bound arguments (defaults applied; a leading
    ``self``/``cls`` is left out) and whose ``output`` is the return value. Outside recording
    the function runs unchanged. Arguments and results must be JSON values (see
    :func:`to_jsonable`), else :class:`~auto.errors.RecordError` (before the call for arguments;
    after it, with the span recorded as an error, for results). Exceptions raised by the
    function are recorded (status ``error``) and re-raised unchanged.

    As a context manager: ``with auto.task("triage", input={"ticket": t}) as span:`` then
    ``span.output = value`` (recorded when the block ends).
    """

    def __init__(self, name: str | None, kind: str = "task", input: dict | None = None, effects: str | None = None):
        self.name = name
        self.kind = kind
        self.input = input
        self.effects = effects
        self.output: Any = None
        self._stack: list[tuple[SpanScope | None, contextvars.Token | None]] = []

    # -- decorator -----------------------------------------------------------------------

    def __call__(self, fn: Callable) -> Callable:
        if not callable(fn):
            raise TypeError(f"auto.{self.kind}() decorates a function, got {type(fn).__name__}")
        name = self.name or getattr(fn, "__name__", "task")
        kind = self.kind
        if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
            raise RecordError(f"auto.{kind}({name!r}): generator functions cannot be tasks (they return no value)")
        sig = inspect.signature(fn)
        params = list(sig.parameters)
        skip_first = bool(params) and params[0] in ("self", "cls")
        names = _positional_names(sig)

        effects = self.effects

        def begin(args: tuple, kwargs: dict) -> SpanScope | None:
            rec = active_recorder()
            if rec is None:
                return None
            inp = _bind_input(sig, skip_first, name, args, kwargs, names)
            if inp is None:
                return None  # the call itself will raise TypeError
            if kind == "tool":
                return SpanScope.open(rec, name, kind, inp, CURRENT.get(), attributes=_tool_attributes(name, effects))
            return SpanScope.open(rec, name, kind, inp, CURRENT.get())

        def journaled(args: tuple, kwargs: dict) -> tuple[bool, Any]:
            """An effect this call already ran at tier-1 (:mod:`auto_runtime.tools`): its result."""
            if kind != "tool" or not journal_active():
                return False, None
            try:
                bound = sig.bind(*args, **kwargs)
            except TypeError:
                return False, None
            bound.apply_defaults()
            items = list(bound.arguments.items())[1 if skip_first else 0:]
            return journaled_result(name, dict(items))

        def end_ok(scope: SpanScope, result: Any) -> None:
            try:
                if result is None or type(result) in _PLAIN:
                    out = result  # (always has a canonical JSON text)
                else:
                    out = to_jsonable(result, f"{name}: result")
                    canonical_json(out)
            except (RecordError, ValueError, TypeError) as exc:
                err = exc if isinstance(exc, RecordError) else RecordError(f"{name}: result is not JSON: {exc}")
                scope.finish_error(err)
                raise err from None
            scope.finish_ok(out)

        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def awrapper(*args: Any, **kwargs: Any) -> Any:
                hit, value = journaled(args, kwargs)
                if hit:
                    return value
                scope = begin(args, kwargs)
                if scope is None:
                    return await fn(*args, **kwargs)
                with _current(scope):
                    result = await fn(*args, **kwargs)
                end_ok(scope, result)
                return result

            awrapper.__auto_task__ = name  # type: ignore[attr-defined]
            return awrapper

        tool = kind == "tool"

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if tool:
                hit, value = journaled(args, kwargs)
                if hit:
                    return value
            scope = begin(args, kwargs) if _ACTIVE else None
            if scope is None:
                return fn(*args, **kwargs)
            token = CURRENT.set(scope)  # (what _current does, inline: this runs on every call)
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:
                scope.finish_error(exc)
                raise
            finally:
                CURRENT.reset(token)
            if result is None or type(result) in _PLAIN:
                scope._finish("ok", result, None)  # (always has a canonical JSON text)
            else:
                end_ok(scope, result)
            return result

        wrapper.__auto_task__ = name  # type: ignore[attr-defined]
        if kind == "tool":
            wrapper.__auto_tool__ = {"name": name, "effects": effects or "read"}  # type: ignore[attr-defined]
        return wrapper

    # -- context manager -----------------------------------------------------------------

    def __enter__(self) -> "TaskSpec":
        rec = active_recorder()
        if rec is None:
            self._stack.append((None, None))
            return self
        name = self.name or self.kind
        inp = to_jsonable(self.input if self.input is not None else {}, f"{name}: input")
        if not isinstance(inp, dict):
            raise RecordError(f"{name}: a task input must be a JSON object (dict of arguments)")
        parent = CURRENT.get()
        attrs = _tool_attributes(name, self.effects) if self.kind == "tool" else None
        scope = SpanScope.open(rec, name, self.kind, inp, parent, attributes=attrs)
        self._stack.append((scope, CURRENT.set(scope)))
        self.output = None
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        scope, token = self._stack.pop()
        if scope is None:
            return
        CURRENT.reset(token)  # type: ignore[arg-type]
        if exc is not None:
            scope.finish_error(exc)
            return
        try:
            out = to_jsonable(self.output, f"{scope.name}: output")
        except RecordError as err:
            scope.finish_error(err)
            raise
        scope.finish_ok(out)

    async def __aenter__(self) -> "TaskSpec":
        return self.__enter__()

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        self.__exit__(exc_type, exc, tb)


def task(name: str | Callable | None = None, *, input: dict | None = None) -> Any:
    """Declare a task: ``@auto.task("triage")``, ``@auto.task``, or ``with auto.task("t", input=...)``.

    See :class:`TaskSpec`. The name defaults to the function's ``__name__``. (``auto.task`` also
    takes ``ratchet=``: :func:`auto.tasks.task`.)
    """
    if callable(name):
        return TaskSpec(None)(name)
    return TaskSpec(name, "task", input)


TOOL_EFFECTS = ("read", "effect")
"""What a tool may do: ``read`` (no effect outside; safe to call before the guard decided) or
``effect`` (acts on the world: a compiled path calls it only after the guard admitted the call)."""


def _tool_attributes(name: str, effects: str | None) -> dict[str, Any]:
    """A tool span's attributes when it opens: OpenTelemetry GenAI ``execute_tool`` names and the
    declared effects (the link to the model call that asked for it is added when the span is
    completed: :meth:`SpanScope._complete`)."""
    return {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, "auto.tool.effects": effects or "read"}


def tool(name: str | Callable | None = None, *, effects: str = "read", input: dict | None = None) -> Any:
    """Like :func:`task` but records a ``tool`` span (a step inside a task, not compiled alone).

    Args:
        name: the tool name (default: the function's ``__name__``).
        effects: ``"read"`` or ``"effect"`` (:data:`TOOL_EFFECTS`); recorded as
            ``auto.tool.effects`` and declared by a compiled artifact that calls the tool.
        input: the arguments, for the context-manager form.

    A decorated tool consults the runtime's effect journal first
    (:func:`auto_runtime.tools.journaled_result`): when the same call already ran as an effect at
    tier-1 and the call deopted afterwards, the journaled result is returned instead of acting
    twice (no span is recorded for the repeat).

    Raises:
        ArgumentError: ``effects`` is not one of :data:`TOOL_EFFECTS`.
    """
    if effects not in TOOL_EFFECTS:
        raise ArgumentError(f"auto.tool effects must be one of {', '.join(TOOL_EFFECTS)}, got {effects!r}")
    if callable(name):
        return TaskSpec(None, "tool", effects=effects)(name)
    return TaskSpec(name, "tool", input, effects=effects)


def getenv(name: str, default: str | None = None) -> str | None:
    """``os.environ.get(name, default)`` that records the read *as a digest only*.

    The innermost open scope gets attribute ``auto.env_reads[name] = digest(value)`` (value never
    stored), so a change of environment is visible in the trace without leaking it.
    """
    value = os.environ.get(name, default)
    scope = CURRENT.get()
    if scope is not None and active_recorder() is not None:
        if scope.attributes is _NO_ATTRIBUTES:
            scope.attributes = {}
        reads = scope.attributes.setdefault("auto.env_reads", {})
        reads[name] = digest(value)
    return value
