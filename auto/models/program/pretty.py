"""A readable form of programs (for ``auto inspect``) and the program size used by synthesis.

Example output::

    record {
      intent: if contains(lower(email), "refund") -> "refund"
              elif contains(lower(email), "invoice") -> "billing"
              else -> deopt
      order_id: search(email, /ORD-(\\d+)/, 1)
    }

Texts are JSON string literals; patterns are written between slashes (a ``/`` inside is shown
as ``\\/``, which the regex subset reads as the same character); comparisons use ``== != < <=
> >=``; the input field is shown by its name (``input["..."]`` when it is not an identifier).
The form is for people: :mod:`auto.models.program.serial` is the machine form.
"""

from __future__ import annotations

import json
from typing import Any

from auto.errors import ArgumentError
from auto.models.program import ast as A

_CMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_CALL = {A.Lower: "lower", A.Upper: "upper", A.Strip: "strip", A.ParseInt: "parse_int",
         A.ParseFloat: "parse_float", A.ParseMoney: "parse_money", A.IsNull: "is_null",
         A.Not: "not"}
_TEXT_PRED = {A.Contains: "contains", A.StartsWith: "starts_with", A.EndsWith: "ends_with"}


def _lit(v: Any) -> str:
    if isinstance(v, float):
        return repr(v)
    return json.dumps(v, ensure_ascii=False)


def _pattern(p: str) -> str:
    out = []
    i = 0
    while i < len(p):
        c = p[i]
        if c == "\\" and i + 1 < len(p):
            out.append(p[i:i + 2])
            i += 2
            continue
        out.append("\\/" if c == "/" else c)
        i += 1
    return "/" + "".join(out) + "/"


def _join(parts: list[Any], sep: str = ", ") -> list[str]:
    """Concatenate fragments (str or line lists) left to right; continuation lines of a
    multi-line fragment are indented to the column where the fragment started."""
    lines = [""]
    for k, part in enumerate(parts):
        if k and sep:
            lines[-1] += sep
        frag = [part] if isinstance(part, str) else part
        col = len(lines[-1])
        lines[-1] += frag[0]
        lines.extend(" " * col + f for f in frag[1:])
    return lines


def _call(name: str, args: list[Any]) -> list[str]:
    inner = _join(args)
    return _join([name + "(", inner, ")"], sep="")


def _r(node: Any) -> list[str]:  # noqa: C901 - one dispatch over node types
    t = type(node)
    if t is A.Field:
        return [node.name if node.name.isidentifier() else f"input[{_lit(node.name)}]"]
    if t is A.Const:
        return [_lit(node.value)]
    if t is A.Deopt:
        return ["deopt"]
    if t in _CALL:
        return _call(_CALL[t], [_r(node.x)])
    if t in _TEXT_PRED:
        return _call(_TEXT_PRED[t], [_r(node.x), _lit(node.s)])
    if t is A.Split:
        return _call("split", [_r(node.x), _lit(node.sep)])
    if t is A.Join:
        return _call("join", [_r(node.xs), _lit(node.sep)])
    if t is A.Index:
        return _join([_r(node.xs), f"[{node.i}]"], sep="")
    if t is A.Slice:
        a = "" if node.start is None else str(node.start)
        b = "" if node.stop is None else str(node.stop)
        return _join([_r(node.x), f"[{a}:{b}]"], sep="")
    if t is A.Search:
        args = [_r(node.x), _pattern(node.pattern)]
        if node.group:
            args.append(str(node.group))
        return _call("search", args)
    if t is A.Compare:
        return _join([_r(node.x), f" {_CMP.get(node.op, node.op)} {_lit(node.value)}"], sep="")
    if t is A.Same:
        return _call("same", [_r(node.a), _r(node.b)])
    if t in (A.And, A.Or):
        word = " and " if t is A.And else " or "
        return _join(["(", _join([_r(i) for i in node.items], sep=word), ")"], sep="")
    if t is A.If:
        lines: list[str] = []
        for k, (cond, value) in enumerate(node.cases):
            lines += _join(["if " if k == 0 else "elif ", _r(cond), " -> ", _r(value)], sep="")
        if not node.cases:
            return _r(node.default)
        lines += _join(["else -> ", _r(node.default)], sep="")
        return lines
    if t is A.Record:
        lines = ["record {"]
        for key, value in node.fields:
            name = key if key.isidentifier() else _lit(key)
            lines += ["  " + ln for ln in _join([f"{name}: ", _r(value)], sep="")]
        return lines + ["}"]
    if t is A.Lookup:
        lines = _join(["lookup(", _r(node.x), ") {"], sep="")
        for key, value in node.table:
            lines += ["  " + ln for ln in _join([_lit(key), " -> ", _r(value)], sep="")]
        lines += ["  " + ln for ln in _join(["else -> ", _r(node.default)], sep="")]
        return lines + ["}"]
    raise ArgumentError(f"not a program node: {node!r}")


def render(program: A.Node) -> str:
    """The readable multi-line form of ``program`` (no trailing newline).

    Raises:
        ArgumentError: ``program`` holds something that is not a node.
    """
    return "\n".join(_r(program))


def size(program: A.Node) -> int:
    """The number of nodes in ``program`` (each node counts 1; keys, patterns, separators and
    constant values count 0): the description length that synthesis minimizes.

    Raises:
        ArgumentError: ``program`` holds something that is not a node.
    """
    n = 0
    stack: list[Any] = [program]
    while stack:
        node = stack.pop()
        if isinstance(node, tuple):
            stack.extend(node)
            continue
        if type(node) not in A.NODE_TYPES:
            if isinstance(node, (str, int, float, bool)) or node is None:
                continue  # keys and attributes
            raise ArgumentError(f"not a program node: {node!r}")
        n += 1
        stack.extend(getattr(node, f) for f in node.__dataclass_fields__ if f not in ("value",))
    return n
