"""The region: a task compiled across its steps, as a straight-line program per path.

A region reads one text field of the task input and runs a list of steps over named values (the
*environment*); the last step of a list is an :class:`Output` or a :class:`Branch` whose cases
carry the rest of each path. Steps:

- :class:`Bind` ``name := program(var)`` — a DSL program (:mod:`auto.models.program.ast`) whose one
  :class:`~auto.models.program.ast.Field` is ``var``; it may deopt (the whole call deopts); ``var`` not
  a text deopts too;
- :class:`Const` ``name := value`` (a JSON scalar);
- :class:`Get` ``name := var[key]`` — a field of a JSON object (a tool result); a JSON string
  becomes a text, anything else stays its JSON value; a missing key or a non-object is null;
- :class:`Call` ``name := tool(arguments)`` — a declared tool (or kept model call) through the
  host; ``arguments`` is one value holding the whole object, or ``{key: var}``;
- :class:`Concat` ``name := "".join(parts)`` — a template: constant texts and values; a ``var``
  part writes a text value as it is (a tool result that is a JSON string too: its text) and any
  other value as its canonical JSON; a ``json`` part writes the value's canonical JSON even for a
  text (``"processing"`` with its quotes: what an agent that sends ``json.dumps(result)`` back as
  the tool message showed the model, for a text without non-ASCII or escaped characters);
- :class:`Commit` — the guard decides on the values named in ``names`` (the record
  ``{"answer": {name: value}, "deopt": false}``); declined, the call deopts. Every effectful or
  paid call of a path comes after its commit, and no step after it can deopt;
- :class:`Branch` ``switch var`` — the case whose text equals the value, else deopt;
- :class:`Output` — the answer: one value, or a record ``{key: var}``.

:func:`run_region` is the reference semantics (the interpreter); the WebAssembly lowering
(:mod:`auto.codegen.region_lower`) must agree with it byte for byte, which the region gate checks
on every input. :func:`to_json` / :func:`from_json` give the manifest's ``auto.region/1`` form;
:func:`render` the readable text ``auto inspect`` prints.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Union

from auto.canonical import canonical_json
from auto.errors import CompileError
from auto.models.program import ast as A
from auto.models.program.interp import DeoptSignal, evaluate
from auto.models.program.pretty import render as render_program
from auto.models.program.serial import from_json as program_from_json
from auto.models.program.serial import to_json as program_to_json

FORMAT = "auto.region/1"


@dataclass(frozen=True)
class Bind:
    name: str
    var: str
    program: A.Node
    note: str = ""


@dataclass(frozen=True)
class Const:
    name: str
    value: Any


@dataclass(frozen=True)
class Get:
    name: str
    var: str
    key: str


@dataclass(frozen=True)
class Call:
    name: str
    tool: str
    args: Union[str, tuple[tuple[str, str], ...]]


@dataclass(frozen=True)
class Concat:
    name: str
    parts: tuple[tuple[str, str], ...]
    """``("text", constant)``, ``("var", name)`` or ``("json", name)`` pairs, in order (see
    :func:`render_part`)."""


@dataclass(frozen=True)
class Commit:
    names: tuple[str, ...]


@dataclass(frozen=True)
class Branch:
    var: str
    cases: tuple[tuple[str, tuple["Step", ...]], ...]


@dataclass(frozen=True)
class Output:
    value: Union[str, tuple[tuple[str, str], ...]]


Step = Union[Bind, Const, Get, Call, Concat, Commit, Branch, Output]


@dataclass(frozen=True)
class Region:
    """A compiled region: the input ``field`` and the steps (see the module docstring)."""

    field: str
    steps: tuple[Step, ...]

    def paths(self) -> list[tuple[Step, ...]]:
        """Every straight-line path (a Branch expanded into each case)."""
        def walk(steps: tuple[Step, ...], prefix: tuple[Step, ...]) -> list[tuple[Step, ...]]:
            out: list[tuple[Step, ...]] = []
            for i, s in enumerate(steps):
                if isinstance(s, Branch):
                    for _v, sub in s.cases:
                        out.extend(walk(sub, prefix + steps[:i] + (s,)))
                    return out
            return [prefix + steps]
        return walk(self.steps, ())

    def tool_names(self) -> list[str]:
        """Every tool a path may call, in first-use order."""
        seen: list[str] = []
        for path in self.paths():
            for s in path:
                if isinstance(s, Call) and s.tool not in seen:
                    seen.append(s.tool)
        return seen

    def max_calls(self) -> int:
        """The most tool calls any path makes (a region is straight-line per path: exact)."""
        return max((sum(isinstance(s, Call) for s in p) for p in self.paths()), default=0)


# --------------------------------------------------------------------------- semantics


class RegionDeopt(Exception):
    """The region declines the input (a Bind deopted, a Branch matched no case, a commit was
    declined); ``step`` names where."""

    def __init__(self, step: str) -> None:
        super().__init__(step)
        self.step = step


def render_value(v: Any) -> str:
    """A value inside a template: a text as it is, anything else as canonical JSON."""
    return v if isinstance(v, str) else canonical_json(v)


CONCAT_PARTS = ("text", "var", "json")
"""The kinds of a :class:`Concat` part."""


def render_part(kind: str, v: Any) -> str:
    """A ``var`` (:func:`render_value`) or ``json`` (the canonical JSON of any value, a text
    quoted and escaped) part of a :class:`Concat` for the value ``v``.

    Raises:
        CompileError: another kind.
    """
    if kind == "var":
        return render_value(v)
    if kind == "json":
        return canonical_json(v)
    raise CompileError(f"not a template part kind: {kind!r} (the kinds are {', '.join(CONCAT_PARTS)})")


def run_region(region: Region, inp: dict[str, Any], call_tool: Callable[[str, dict[str, Any]], Any],
               commit: Callable[[dict[str, Any]], bool] | None = None) -> dict[str, Any]:
    """The region's output object for ``inp`` (the reference semantics).

    Args:
        region: the region.
        inp: the task input; ``inp[region.field]`` must be a text.
        call_tool: ``call_tool(tool, arguments) -> result`` (a live tool or a replay); it may
            raise to stop the call (the exception propagates).
        commit: ``commit(record) -> admitted`` (None: admitted).

    Returns:
        ``{"answer": <JSON>, "deopt": False}`` or ``{"answer": None, "deopt": True}``.

    Raises:
        CompileError: ``inp`` lacks the text field, or a step reads a value never bound.
        Whatever ``call_tool`` raises.
    """
    x = inp.get(region.field) if isinstance(inp, dict) else None
    if not isinstance(x, str):
        raise CompileError(f"the region input needs a text field {region.field!r}")
    env: dict[str, Any] = {region.field: x}
    try:
        return {"answer": _run(region.steps, env, call_tool, commit), "deopt": False}
    except RegionDeopt:
        return {"answer": None, "deopt": True}


def _get(env: dict[str, Any], name: str) -> Any:
    if name not in env:
        raise CompileError(f"region step reads {name!r}, which no earlier step binds")
    return env[name]


def _args(env: dict[str, Any], args: Any) -> Any:
    if isinstance(args, str):
        return _get(env, args)
    return {k: _get(env, v) for k, v in sorted(args)}


def _run(steps: tuple[Step, ...], env: dict[str, Any], call_tool: Callable[..., Any],
         commit: Callable[[dict[str, Any]], bool] | None) -> Any:  # noqa: C901 - one dispatch
    for s in steps:
        t = type(s)
        if t is Bind:
            x = _get(env, s.var)
            if not isinstance(x, str):
                raise RegionDeopt(s.name)
            try:
                env[s.name] = evaluate(s.program, {s.var: x})
            except DeoptSignal:
                raise RegionDeopt(s.name) from None
        elif t is Const:
            env[s.name] = s.value
        elif t is Get:
            obj = _get(env, s.var)
            env[s.name] = obj.get(s.key) if isinstance(obj, dict) else None
        elif t is Call:
            args = _args(env, s.args)
            if not isinstance(args, dict):
                raise RegionDeopt(s.name)
            env[s.name] = call_tool(s.tool, args)
        elif t is Concat:
            env[s.name] = "".join(p if kind == "text" else render_part(kind, _get(env, p)) for kind, p in s.parts)
        elif t is Commit:
            rec = {"answer": {n: _get(env, n) for n in sorted(s.names)}, "deopt": False}
            if commit is not None and not commit(rec):
                raise RegionDeopt("commit")
        elif t is Branch:
            x = _get(env, s.var)
            for value, sub in s.cases:
                if isinstance(x, str) and x == value:
                    return _run(sub, env, call_tool, commit)
            raise RegionDeopt(s.var)
        elif t is Output:
            if isinstance(s.value, str):
                return _get(env, s.value)
            return {k: _get(env, v) for k, v in s.value}
        else:  # pragma: no cover
            raise CompileError(f"not a region step: {s!r}")
    raise CompileError("a region path must end with an Output or a Branch")


# --------------------------------------------------------------------------- forms


def _step_json(s: Step) -> dict[str, Any]:  # noqa: C901
    if isinstance(s, Bind):
        return {"op": "bind", "name": s.name, "var": s.var, "program": program_to_json(s.program), "note": s.note}
    if isinstance(s, Const):
        return {"op": "const", "name": s.name, "value": s.value}
    if isinstance(s, Get):
        return {"op": "get", "name": s.name, "var": s.var, "key": s.key}
    if isinstance(s, Call):
        return {"op": "call", "name": s.name, "tool": s.tool,
                "args": s.args if isinstance(s.args, str) else [[k, v] for k, v in s.args]}
    if isinstance(s, Concat):
        return {"op": "concat", "name": s.name, "parts": [[k, v] for k, v in s.parts]}
    if isinstance(s, Commit):
        return {"op": "commit", "names": list(s.names)}
    if isinstance(s, Branch):
        return {"op": "branch", "var": s.var, "cases": [[v, [_step_json(x) for x in sub]] for v, sub in s.cases]}
    if isinstance(s, Output):
        return {"op": "output", "value": s.value if isinstance(s.value, str) else [[k, v] for k, v in s.value]}
    raise CompileError(f"not a region step: {s!r}")  # pragma: no cover


def to_json(region: Region) -> dict[str, Any]:
    """The region's ``auto.region/1`` JSON form (programs in their ``auto.program/1`` form)."""
    return {"format": FORMAT, "field": region.field, "steps": [_step_json(s) for s in region.steps]}


def _step_from(o: dict[str, Any]) -> Step:  # noqa: C901
    op = o.get("op") if isinstance(o, dict) else None
    try:
        if op == "bind":
            return Bind(o["name"], o["var"], program_from_json(o["program"]), o.get("note", ""))
        if op == "const":
            return Const(o["name"], o["value"])
        if op == "get":
            return Get(o["name"], o["var"], o["key"])
        if op == "call":
            a = o["args"]
            return Call(o["name"], o["tool"], a if isinstance(a, str) else tuple((k, v) for k, v in a))
        if op == "concat":
            parts = tuple((k, v) for k, v in o["parts"])
            bad = [k for k, _v in parts if k not in CONCAT_PARTS]
            if bad:
                raise ValueError(f"unknown template part kind {bad[0]!r}")
            return Concat(o["name"], parts)
        if op == "commit":
            return Commit(tuple(o["names"]))
        if op == "branch":
            return Branch(o["var"], tuple((v, tuple(_step_from(x) for x in sub)) for v, sub in o["cases"]))
        if op == "output":
            v = o["value"]
            return Output(v if isinstance(v, str) else tuple((k, x) for k, x in v))
    except (KeyError, TypeError, ValueError) as e:
        raise CompileError(f"malformed region step {op!r}: {e}") from None
    raise CompileError(f"unknown region step {op!r}")


def from_json(obj: Any) -> Region:
    """The region of an ``auto.region/1`` JSON form.

    Raises:
        CompileError: wrong format or a malformed step.
    """
    if not isinstance(obj, dict) or obj.get("format") != FORMAT or not isinstance(obj.get("field"), str):
        raise CompileError(f"not an {FORMAT} region")
    return Region(obj["field"], tuple(_step_from(s) for s in obj.get("steps") or []))


def render(region: Region, indent: str = "") -> str:
    """Readable text of the region (one step per line, programs inline)."""
    return "\n".join(_render_steps(region.steps, indent))


def _render_steps(steps: tuple[Step, ...], ind: str) -> list[str]:  # noqa: C901
    out: list[str] = []
    for s in steps:
        if isinstance(s, Bind):
            prog = " ".join(render_program(s.program).split())
            out.append(f"{ind}{s.name} = {prog if len(prog) <= 300 else prog[:297] + '...'}"
                       + (f"   # {s.note}" if s.note else ""))
        elif isinstance(s, Const):
            out.append(f"{ind}{s.name} = {canonical_json(s.value)}")
        elif isinstance(s, Get):
            out.append(f"{ind}{s.name} = {s.var}[{canonical_json(s.key)}]")
        elif isinstance(s, Call):
            args = s.args if isinstance(s.args, str) else "{" + ", ".join(f"{k}: {v}" for k, v in s.args) + "}"
            out.append(f"{ind}{s.name} = call {s.tool}({args})")
        elif isinstance(s, Concat):
            out.append(f"{ind}{s.name} = " + " + ".join(canonical_json(p) if k == "text" else p if k == "var" else f"json({p})"
                                                      for k, p in s.parts))
        elif isinstance(s, Commit):
            out.append(f"{ind}commit({', '.join(s.names)})   # the guard decides here; effects and paid calls follow")
        elif isinstance(s, Branch):
            for i, (v, sub) in enumerate(s.cases):
                out.append(f"{ind}{'if' if i == 0 else 'elif'} {s.var} == {canonical_json(v)}:")
                out.extend(_render_steps(sub, ind + "    "))
            out.append(f"{ind}else: deopt")
        elif isinstance(s, Output):
            v = s.value if isinstance(s.value, str) else "{" + ", ".join(f"{k}: {x}" for k, x in s.value) + "}"
            out.append(f"{ind}return {v}")
    return out


__all__ = ["Bind", "Branch", "CONCAT_PARTS", "Call", "Commit", "Concat", "Const", "FORMAT", "Get", "Output", "Region", "RegionDeopt",
           "Step", "from_json", "render", "render_part", "render_value", "run_region", "to_json"]
