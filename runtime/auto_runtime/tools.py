"""Tool capabilities: the declarations a manifest makes, and the host side of one call's tool use.

A *capability artifact* calls tools through three host imports of module ``auto`` (the ABI is in
docs/architecture.md, "Tool capabilities"):

* ``tool_call(ptr, len) -> i32`` — the request, canonical JSON ``{"arguments":{...},"tool":"name"}``;
  the host checks it, runs the tool and answers the byte length of the result;
* ``tool_result(ptr) -> i32`` — copies that result (canonical JSON) to ``ptr``;
* ``commit(ptr, len) -> i32`` — the artifact's decisions so far (canonical JSON
  ``{"answer":{...},"deopt":false}``); the host's guard decides, ``1`` admits the call, ``0``
  declines it (the artifact then returns its deopt output).

Declarations (manifest ``tools``, one object per tool; :func:`tool_decls`)::

    {"name": "lookup_team", "kind": "tool" | "model", "effects": "read" | "effect",
     "arguments": <JSON schema>, "result": <JSON schema>, ...}

``kind: "model"`` is a model call kept as a declared capability (a generative step); extra keys
(``site``, ``request``) tell the host which prompt it stands for. Manifest ``tool_budget``:
``{"calls": int >= 1, "wall_ms": number > 0}``, per call of the artifact.

What the host enforces (:class:`ToolSession`), each a refusal that stops the call (the host
function raises, the artifact traps, the call deopts with the session's reason):

1. the request is canonical JSON of the shape above, naming a declared tool;
2. the call fits the budget: at most ``calls`` capability calls, and at most ``wall_ms`` of
   wall time spent in tools, in total, per artifact call;
3. the arguments satisfy the tool's ``arguments`` schema *before* the tool runs;
4. a tool that ``effects: "effect"`` or ``kind: "model"`` (paid) runs only after ``commit``
   admitted the call (decide first, then act): no effect, and no paid call, ever precedes the
   guard's decision on the whole call; after a declined commit no tool runs at all;
5. the tool returns within the remaining wall budget (it runs on a worker thread; one that hangs
   is abandoned, and the call refused), does not raise, and returns JSON satisfying its
   ``result`` schema, at most :data:`MAX_RESULT_BYTES` as canonical JSON, *before* the result
   enters the artifact;
6. in replay (the hermetic gate: :class:`Replay`), no live tool exists: a call is answered from
   the recordings matched by tool name and canonical arguments, and an unmatched call is a
   refusal.

Every effect that ran is journaled (:attr:`ToolSession.effects`). When a call deopts after an
effect ran (a failure after the commit), the runtime runs the reference inside
:func:`effect_journal`, so a tool wrapper that consults :func:`journaled_result` (``@auto.tool``
does) answers the repeated effect from the journal instead of acting twice. An effect cut off by
the wall budget may still be running: it is journaled as pending, and the reference's repeat of
it waits for its outcome instead of acting again.

Standard library only (plus :mod:`auto_runtime.schema` and :mod:`auto_runtime.jsonio`).
"""

from __future__ import annotations

import contextlib
import contextvars
import difflib
import math
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from auto_runtime.errors import CapabilityError, InputSchemaError, ManifestError
from auto_runtime.jsonio import canonical_bytes, canonical_text, strict_loads
from auto_runtime.schema import SchemaDefinitionError, compile_schema

TOOL_MODULE = "auto"
"""Module name of the tool imports."""
TOOL_CALL = "tool_call"
TOOL_RESULT = "tool_result"
COMMIT = "commit"
TOOL_IMPORTS = (COMMIT, TOOL_CALL, TOOL_RESULT)
"""The names of the tool imports, sorted (a capability artifact declares the ones it imports)."""

EFFECTS = ("read", "effect")
KINDS = ("tool", "model")

MAX_RESULT_BYTES = 1 << 20
"""Largest tool result accepted, as canonical JSON bytes (1 MiB, the ABI's input limit)."""

MAX_REQUEST_BYTES = 1 << 20
"""Largest tool request or commit record read from the artifact, in bytes."""

DEFAULT_BUDGET_CALLS = 16
"""Tool calls per artifact call when the manifest declares no budget."""
DEFAULT_BUDGET_WALL_MS = 10_000.0
"""Wall time in tools per artifact call (ms) when the manifest declares no budget."""


class ToolRefused(Exception):
    """Raised by a tool host function to stop the artifact; the session keeps the reason.

    Internal to the runtime: it becomes a trap of the call, and the tiered runtime deopts with
    ``"tool: <reason>"``. ``reason`` is one line.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class ToolDecl:
    """One declared tool (manifest ``tools[i]``).

    Attributes:
        name: the tool name the artifact asks for.
        kind: ``"tool"`` or ``"model"`` (a model call kept as a capability).
        effects: ``"read"`` (may run before the commit) or ``"effect"`` (only after it).
        arguments, result: the JSON schemas checked before the tool runs / before its result
            enters the artifact.
        entry: the whole manifest entry (``site``, ``request``, ... for model calls).
    """

    name: str
    kind: str
    effects: str
    arguments: Any
    result: Any
    entry: dict[str, Any]
    check_arguments: Callable[[Any], None] = field(repr=False, compare=False, default=None)  # type: ignore[assignment]
    check_result: Callable[[Any], None] = field(repr=False, compare=False, default=None)  # type: ignore[assignment]

    @property
    def after_commit(self) -> bool:
        """Whether the tool may run only after the commit admitted the call (an effect, or a paid
        model call)."""
        return self.effects == "effect" or self.kind == "model"


@dataclass(frozen=True)
class ToolBudget:
    """The per-call tool budget: at most ``calls`` capability calls and ``wall_ms`` ms of wall
    time spent in tools, per artifact call.

    Raises:
        ValueError: ``calls`` is not an int >= 1 or ``wall_ms`` not a finite number > 0.
    """

    calls: int = DEFAULT_BUDGET_CALLS
    wall_ms: float = DEFAULT_BUDGET_WALL_MS

    def __post_init__(self) -> None:
        if isinstance(self.calls, bool) or not isinstance(self.calls, int) or self.calls < 1:
            raise ValueError(f"tool budget calls must be an int >= 1, got {self.calls!r}")
        if isinstance(self.wall_ms, bool) or not isinstance(self.wall_ms, (int, float)) or not (
                0 < self.wall_ms < math.inf):
            raise ValueError(f"tool budget wall_ms must be a finite number > 0, got {self.wall_ms!r}")

    def tightened(self, other: "ToolBudget | None") -> "ToolBudget":
        """The smaller of both budgets, per field (``other`` None: this one)."""
        if other is None:
            return self
        return ToolBudget(min(self.calls, other.calls), min(self.wall_ms, other.wall_ms))


def tool_decls(manifest: dict[str, Any], where: str = "artifact") -> dict[str, ToolDecl]:
    """The manifest's tool declarations by name (empty for a pure artifact).

    Raises:
        ManifestError: ``tools`` is not a list of well-formed entries (name, kind, effects, two
            supported schemas), a name repeats, or ``tool_budget`` is malformed.
    """
    raw = manifest.get("tools", [])
    if not isinstance(raw, list):
        raise ManifestError(f"{where}: manifest 'tools' must be a list")
    out: dict[str, ToolDecl] = {}
    for i, e in enumerate(raw):
        at = f"{where}: tools[{i}]"
        if not isinstance(e, dict):
            raise ManifestError(f"{at} must be an object")
        name = e.get("name")
        if not isinstance(name, str) or not name:
            raise ManifestError(f"{at}: 'name' must be a non-empty string")
        if name in out:
            raise ManifestError(f"{at}: tool {name!r} is declared twice")
        kind = e.get("kind", "tool")
        if kind not in KINDS:
            raise ManifestError(f"{at}: 'kind' must be one of {', '.join(KINDS)}, got {kind!r}")
        effects = e.get("effects")
        if effects not in EFFECTS:
            raise ManifestError(f"{at}: 'effects' must be one of {', '.join(EFFECTS)}, got {effects!r}")
        checks = []
        for key in ("arguments", "result"):
            if key not in e:
                raise ManifestError(f"{at}: lacks the {key!r} schema")
            try:
                checks.append(compile_schema(e[key]))
            except SchemaDefinitionError as err:
                raise ManifestError(f"{at}: {key!r} is not a supported schema: {err}") from None
        out[name] = ToolDecl(name, kind, effects, e["arguments"], e["result"], dict(e), checks[0], checks[1])
    manifest_budget(manifest, where)
    return out


def manifest_budget(manifest: dict[str, Any], where: str = "artifact") -> ToolBudget:
    """The manifest's ``tool_budget`` (defaults :data:`DEFAULT_BUDGET_CALLS`,
    :data:`DEFAULT_BUDGET_WALL_MS` for missing fields).

    Raises:
        ManifestError: not an object, or a field out of range.
    """
    b = manifest.get("tool_budget")
    if b is None:
        return ToolBudget()
    if not isinstance(b, dict):
        raise ManifestError(f"{where}: manifest 'tool_budget' must be an object")
    try:
        return ToolBudget(b.get("calls", DEFAULT_BUDGET_CALLS), b.get("wall_ms", DEFAULT_BUDGET_WALL_MS))
    except ValueError as e:
        raise ManifestError(f"{where}: tool_budget: {e}") from None


def missing_tools_line(missing: Sequence[str], provided: Any) -> str:
    """One line naming the declared tools the host lacks, with the host's closest name for each
    (``difflib`` similarity ≥ 0.6) as a likely typo: ``"declares tool(s) get_weather, which the
    host does not provide (it provides get_wether: a typo?)"``."""
    names = sorted(str(k) for k in provided) if provided else []
    hints = []
    for m in missing:
        close = difflib.get_close_matches(m, names, n=1)
        if close:
            hints.append(f"{close[0]!r} for {m!r}")
    line = f"declares tool(s) {', '.join(missing)}, which the host does not provide"
    if hints:
        line += f" (it provides {', '.join(hints)}: a typo?)"
    elif not names:
        line += " (no tools were given)"
    return line


def check_host_tools(decls: Mapping[str, ToolDecl], tools: Mapping[str, Any], source: str) -> dict[str, Callable]:
    """The host's tools checked against the declarations: every declared tool provided and
    callable, no tool the manifest does not declare.

    Raises:
        CapabilityError: a declared tool the host does not provide, a host tool the manifest does
            not declare, or one that is not callable.
    """
    if not isinstance(tools, Mapping):
        raise CapabilityError(f"{source}: tools must be a mapping of tool name -> callable")
    missing = sorted(set(decls) - set(tools))
    if missing:
        raise CapabilityError(f"{source}: {missing_tools_line(missing, tools)}")
    extra = sorted(str(k) for k in set(tools) - set(decls))
    if extra:
        raise CapabilityError(f"{source}: the host provides tool(s) {', '.join(extra)}, which the manifest does not "
                              "declare")
    for name, fn in tools.items():
        if not callable(fn):
            raise CapabilityError(f"{source}: host tool {name!r} is not callable")
    return dict(tools)


# --------------------------------------------------------------------------- replay


class Replay:
    """Recorded tool calls, answered by tool name and canonical arguments (never by order).

    Args:
        recordings: ``{"tool": name, "arguments": {...}, "result": <JSON>}`` each; for one
            ``(tool, arguments)`` the first recording given wins.

    Raises:
        ValueError: a recording is malformed or not JSON-encodable.
    """

    def __init__(self, recordings: Iterable[Mapping[str, Any]]) -> None:
        self._table: dict[tuple[str, str], Any] = {}
        for r in recordings:
            try:
                key = (str(r["tool"]), canonical_text(r["arguments"]))
                canonical_text(r["result"])
            except (KeyError, TypeError, ValueError, RecursionError) as e:
                raise ValueError(f"a tool recording must be {{tool, arguments, result}} of JSON values: {e}") from None
            self._table.setdefault(key, r["result"])

    def __len__(self) -> int:
        return len(self._table)

    def lookup(self, tool: str, arguments_text: str) -> tuple[bool, Any]:
        """``(found, result)`` for the canonical arguments text."""
        key = (tool, arguments_text)
        if key in self._table:
            return True, self._table[key]
        return False, None


# --------------------------------------------------------------------------- worker threads


class _Worker:
    """A daemon thread running one tool call at a time; abandoned (never reused) after a timeout."""

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._loop, name="auto-runtime-tool", daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while True:
            job = self.jobs.get()
            if job is None:
                return
            fn, kwargs, box, done, ctx = job
            try:
                box.append((True, ctx.run(fn, **kwargs)))
            except BaseException as e:  # noqa: BLE001 - reported to the caller as a refusal
                box.append((False, e))
            done.set()


_idle: list[_Worker] = []
_idle_lock = threading.Lock()


def run_with_timeout(fn: Callable[..., Any], kwargs: dict[str, Any], timeout_s: float) -> tuple[str, Any]:
    """Run ``fn(**kwargs)`` on a worker thread (in a copy of the caller's context), waiting at
    most ``timeout_s`` seconds.

    Returns:
        ``("ok", value)``, ``("raised", exception)`` or ``("timeout", pending)``: the worker is then
        abandoned (Python cannot stop a thread, so the tool keeps running in the background), and
        ``pending()`` waits for it and returns ``(True, value)`` or ``(False, exception)``.
    """
    with _idle_lock:
        w = _idle.pop() if _idle else None
    if w is None:
        w = _Worker()
    box: list[tuple[bool, Any]] = []
    done = threading.Event()
    w.jobs.put((fn, kwargs, box, done, contextvars.copy_context()))
    if not done.wait(max(0.0, timeout_s)):
        w.jobs.put(None)  # it exits once the hung tool returns

        def pending() -> tuple[bool, Any]:
            done.wait()
            return box[0]

        return "timeout", pending
    with _idle_lock:
        if len(_idle) < 8:
            _idle.append(w)
        else:
            w.jobs.put(None)
    ok, value = box[0]
    return ("ok", value) if ok else ("raised", value)


# --------------------------------------------------------------------------- the session


@dataclass
class ToolCallRecord:
    """One capability call of an artifact call: ``tool``, canonical ``arguments``, ``effects``,
    whether it ran live (or was replayed), its wall time in ms, and ``error`` (None when it
    returned a checked result)."""

    tool: str
    arguments: Any
    effects: str
    kind: str
    live: bool
    ms: float
    error: str | None = None
    result: Any = None


class ToolSession:
    """The host side of one artifact call's tool use (see the module docstring for the rules).

    Args:
        decls: the artifact's tool declarations (:func:`tool_decls`).
        tools: the host's tool callables, called as ``tool(**arguments)``; ``None`` in replay.
        budget: the per-call budget.
        admit: ``admit(record) -> (admitted, reason)`` for the commit (the tiered runtime's guard);
            ``None`` admits every commit.
        replay: answer every call from these recordings instead of running tools (the hermetic
            gate); an unmatched call is refused.

    Attributes:
        calls: every :class:`ToolCallRecord`, in order.
        failure: the first refusal's reason (None while none happened).
        committed: ``None`` before a commit, else whether it was admitted.
        commit_reason: the guard's reason for a declined commit.
        effects: the effectful (or paid) calls that ran, ``{"tool", "arguments", "result"}``.
        tool_ms: wall time spent in tools so far, in ms.
    """

    def __init__(self, decls: Mapping[str, ToolDecl], tools: Mapping[str, Callable[..., Any]] | None,
                 budget: ToolBudget, *, admit: Callable[[Any], tuple[bool, str]] | None = None,
                 replay: Replay | None = None) -> None:
        self.decls = decls
        self.tools = tools or {}
        self.budget = budget
        self.admit = admit
        self.replay = replay
        self.calls: list[ToolCallRecord] = []
        self.failure: str | None = None
        self.committed: bool | None = None
        self.commit_record: Any = None
        self.commit_reason: str | None = None
        self.effects: list[dict[str, Any]] = []
        self.tool_ms = 0.0
        self.pending: bytes | None = None

    # ------------------------------------------------------------------ refusals

    def refuse(self, reason: str) -> ToolRefused:
        """Record ``reason`` (the first one is kept) and return the exception to raise."""
        if self.failure is None:
            self.failure = reason
        return ToolRefused(self.failure)

    # ------------------------------------------------------------------ host functions

    def request(self, raw: bytes) -> bytes:
        """Handle one ``tool_call``: check, run (or replay), check the result.

        Returns:
            The result's canonical JSON bytes (also kept for ``tool_result``).

        Raises:
            ToolRefused: any rule of the module docstring was broken (the reason is recorded).
        """
        if self.failure is not None:
            raise ToolRefused(self.failure)
        if self.committed is False:
            raise self.refuse("a tool call after the commit was declined")
        if len(self.calls) >= self.budget.calls:
            raise self.refuse(f"tool budget exceeded: more than {self.budget.calls} tool call(s) in one call")
        try:
            req = strict_loads(raw)
        except ValueError as e:
            raise self.refuse(f"tool request is not JSON: {e}") from None
        if (not isinstance(req, dict) or set(req) != {"arguments", "tool"} or not isinstance(req["tool"], str)
                or not isinstance(req["arguments"], dict)):
            raise self.refuse("tool request must be {\"arguments\": {...}, \"tool\": name}")
        if canonical_bytes(req) != raw:
            raise self.refuse("tool request is not canonical JSON")
        name, args = req["tool"], req["arguments"]
        decl = self.decls.get(name)
        if decl is None:
            raise self.refuse(f"tool {name!r} is not declared in the manifest")
        rec = ToolCallRecord(name, args, decl.effects, decl.kind, live=self.replay is None, ms=0.0)
        self.calls.append(rec)
        try:
            decl.check_arguments(args)
        except InputSchemaError as e:
            rec.error = f"arguments violate the schema: {e}"
            raise self.refuse(f"tool {name}: arguments violate its schema: {e}") from None
        if decl.after_commit and self.committed is not True:
            what = "effectful" if decl.effects == "effect" else "model-call"
            rec.error = "called before the commit"
            raise self.refuse(f"{what} tool {name} called before the guard admitted the call")
        left_ms = self.budget.wall_ms - self.tool_ms
        if left_ms <= 0:
            rec.error = "no wall time left"
            raise self.refuse(f"tool budget exceeded: {self.budget.wall_ms:g} ms of tool wall time used")
        t0 = time.perf_counter()
        if self.replay is not None:
            found, result = self.replay.lookup(name, canonical_text(args))
            status = "ok" if found else "unmatched"
        else:
            status, result = run_with_timeout(self.tools[name], dict(args), left_ms / 1000.0)
        rec.ms = (time.perf_counter() - t0) * 1000.0
        self.tool_ms += rec.ms
        if status == "unmatched":
            rec.error = "no recording"
            raise self.refuse(f"replay: no recording of tool {name} with arguments {canonical_text(args)[:200]}")
        if status == "timeout":
            rec.error = "timeout"
            if rec.live and decl.after_commit:  # it may still act: journaled as pending, never run twice
                self.effects.append({"tool": name, "arguments": args, "pending": result})
            raise self.refuse(f"tool {name} ran past the tool wall budget (it had {left_ms:.0f} ms of the call's "
                              f"{self.budget.wall_ms:g} ms of tool wall time)")
        if status == "raised":
            rec.error = f"raised {type(result).__name__}"
            msg = " ".join(str(result).split())[:200]
            raise self.refuse(f"tool {name} raised {type(result).__name__}: {msg}")
        if rec.live and decl.after_commit:
            self.effects.append({"tool": name, "arguments": args, "result": result})
        try:
            data = canonical_bytes(result)
        except (TypeError, ValueError, RecursionError) as e:
            rec.error = "result is not JSON"
            raise self.refuse(f"tool {name} returned a value that is not JSON ({type(result).__name__}): {e}") from None
        if len(data) > MAX_RESULT_BYTES:
            rec.error = "result too large"
            raise self.refuse(f"tool {name} returned {len(data)} bytes, above {MAX_RESULT_BYTES}")
        try:
            decl.check_result(result)
        except InputSchemaError as e:
            rec.error = "result violates the schema"
            raise self.refuse(f"tool {name}: result violates its schema: {e}") from None
        rec.result = result
        self.pending = data
        return data

    def take_result(self) -> bytes:
        """The pending result for ``tool_result`` (consumed).

        Raises:
            ToolRefused: no result is pending.
        """
        data = self.pending
        if data is None:
            raise self.refuse("tool_result without a pending tool result")
        self.pending = None
        return data

    def commit(self, raw: bytes) -> bool:
        """Handle ``commit``: the guard decides on the artifact's decisions so far.

        Returns:
            Whether the call is admitted (only one commit per call).

        Raises:
            ToolRefused: a second commit, or a record that is not a canonical JSON object.
        """
        if self.failure is not None:
            raise ToolRefused(self.failure)
        if self.committed is not None:
            raise self.refuse("commit called twice in one call")
        try:
            rec = strict_loads(raw)
        except ValueError as e:
            raise self.refuse(f"commit record is not JSON: {e}") from None
        if not isinstance(rec, dict):
            raise self.refuse("commit record must be a JSON object")
        self.commit_record = rec
        if self.admit is None:
            self.committed = True
            return True
        ok, reason = self.admit(rec)
        self.committed = bool(ok)
        if not ok:
            self.commit_reason = reason
        return self.committed

    # ------------------------------------------------------------------ summaries

    def summary(self) -> list[dict[str, Any]]:
        """The calls as JSON-able dicts (``tool``, ``arguments``, ``effects``, ``kind``, ``live``,
        ``ms``, ``error``)."""
        return [{"tool": c.tool, "arguments": c.arguments, "effects": c.effects, "kind": c.kind, "live": c.live,
                 "ms": round(c.ms, 3), "error": c.error} for c in self.calls]


# --------------------------------------------------------------------------- the effect journal

_JOURNAL: contextvars.ContextVar[list[dict[str, Any]] | None] = contextvars.ContextVar("auto_effect_journal",
                                                                                       default=None)


@contextlib.contextmanager
def effect_journal(effects: list[dict[str, Any]]) -> Iterator[None]:
    """Inside the block, :func:`journaled_result` answers the effects that already ran (each at
    most once), so a reference re-running the call does not act twice."""
    token = _JOURNAL.set([dict(e) for e in effects])
    try:
        yield
    finally:
        _JOURNAL.reset(token)


def journal_active() -> bool:
    """Whether an effect journal with entries left is active in this context (cheap)."""
    return bool(_JOURNAL.get())


def journaled_result(tool: str, arguments: Any) -> tuple[bool, Any]:
    """``(True, result)`` when ``tool(arguments)`` already ran as an effect of this call (the entry
    is consumed), else ``(False, None)``. Arguments compare as canonical JSON. An effect the wall
    budget cut off is still running: this waits for it and answers its result (``(False, None)``
    when it raised), so the effect happens once."""
    journal = _JOURNAL.get()
    if not journal:
        return False, None
    try:
        key = canonical_text(arguments)
    except (TypeError, ValueError, RecursionError):
        return False, None
    for i, e in enumerate(journal):
        if e["tool"] == tool and canonical_text(e["arguments"]) == key:
            del journal[i]
            if "pending" in e:  # cut off by the wall budget, still running: its outcome is the answer
                ok, value = e["pending"]()
                return (True, value) if ok else (False, None)  # it raised: the reference may try again
            return True, e["result"]
    return False, None


__all__ = [
    "COMMIT", "DEFAULT_BUDGET_CALLS", "DEFAULT_BUDGET_WALL_MS", "EFFECTS", "KINDS", "MAX_RESULT_BYTES", "Replay",
    "TOOL_CALL", "TOOL_IMPORTS", "TOOL_MODULE", "TOOL_RESULT", "ToolBudget", "ToolCallRecord", "ToolDecl",
    "ToolRefused", "ToolSession", "check_host_tools", "effect_journal", "journal_active", "journaled_result", "manifest_budget",
    "run_with_timeout", "tool_decls",
]
