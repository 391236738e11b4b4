"""Canonical, versioned JSON form of programs, and their digests.

Form: ``{"format": "auto.program/1", "program": <node>}`` where a node is an object with an
``"op"`` and the node's fields, for example::

    {"op": "search", "x": {"op": "field", "name": "email"}, "pattern": "ORD-(\\\\d+)", "group": 1}

Op names are the node class names in snake case (``starts_with``, ``parse_money``, ``is_null``).
Scalars carry their type so ``1`` and ``1.0`` stay distinct: ``{"op": "const", "type": "int",
"value": 1}``; :class:`~auto.models.program.ast.Compare` is ``{"op": "compare", "cmp": "lt", "x": ...,
"type": "float", "value": 2.5}``. Pair lists keep their order: ``"cases": [[when, then], ...]``,
``"fields": [[key, node], ...]``, ``"table": [[key, node], ...]``; If's default is ``"else"``.
The canonical text is :func:`auto.canonical.canonical_json` of this object.
"""

from __future__ import annotations

import math
from typing import Any

from auto.canonical import digest
from auto.errors import CompileError
from auto.models.program import ast as A

FORMAT = "auto.program/1"


class SerialError(CompileError):
    """A program's JSON form is malformed (unknown op, missing or extra keys, wrong types)."""


# op -> (node class, ((json key, attribute, kind), ...)); kinds: node, str, int, opt_int,
# nodes, pairs (str key, node), cases (node, node), scalar (the "type"/"value" keys), cmp.
_SPEC: dict[str, tuple[type, tuple[tuple[str, str, str], ...]]] = {
    "field": (A.Field, (("name", "name", "str"),)),
    "const": (A.Const, (("value", "value", "scalar"),)),
    "deopt": (A.Deopt, ()),
    "lower": (A.Lower, (("x", "x", "node"),)),
    "upper": (A.Upper, (("x", "x", "node"),)),
    "strip": (A.Strip, (("x", "x", "node"),)),
    "split": (A.Split, (("x", "x", "node"), ("sep", "sep", "str"))),
    "join": (A.Join, (("xs", "xs", "node"), ("sep", "sep", "str"))),
    "index": (A.Index, (("xs", "xs", "node"), ("i", "i", "int"))),
    "slice": (A.Slice, (("x", "x", "node"), ("start", "start", "opt_int"), ("stop", "stop", "opt_int"))),
    "search": (A.Search, (("x", "x", "node"), ("pattern", "pattern", "str"), ("group", "group", "int"))),
    "contains": (A.Contains, (("x", "x", "node"), ("s", "s", "str"))),
    "starts_with": (A.StartsWith, (("x", "x", "node"), ("s", "s", "str"))),
    "ends_with": (A.EndsWith, (("x", "x", "node"), ("s", "s", "str"))),
    "parse_int": (A.ParseInt, (("x", "x", "node"),)),
    "parse_float": (A.ParseFloat, (("x", "x", "node"),)),
    "parse_money": (A.ParseMoney, (("x", "x", "node"),)),
    "compare": (A.Compare, (("cmp", "op", "cmp"), ("x", "x", "node"), ("value", "value", "scalar"))),
    "is_null": (A.IsNull, (("x", "x", "node"),)),
    "and": (A.And, (("items", "items", "nodes"),)),
    "or": (A.Or, (("items", "items", "nodes"),)),
    "not": (A.Not, (("x", "x", "node"),)),
    "same": (A.Same, (("a", "a", "node"), ("b", "b", "node"))),
    "if": (A.If, (("cases", "cases", "cases"), ("else", "default", "node"))),
    "record": (A.Record, (("fields", "fields", "pairs"),)),
    "lookup": (A.Lookup, (("x", "x", "node"), ("table", "table", "pairs"), ("default", "default", "node"))),
}
_OP_OF = {cls: op for op, (cls, _) in _SPEC.items()}


def _scalar_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, str):
        return "text"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        if not math.isfinite(v):
            raise SerialError(f"constant {v!r} is not finite")
        return "float"
    raise SerialError(f"constant {v!r} is not a text, int, float, bool or null")


def _enc(node: Any, path: str) -> dict:
    op = _OP_OF.get(type(node))
    if op is None:
        raise SerialError(f"{path}: not a program node: {node!r}")
    out: dict[str, Any] = {"op": op}
    for key, attr, kind in _SPEC[op][1]:
        v = getattr(node, attr)
        sub = f"{path}.{key}"
        if kind == "node":
            out[key] = _enc(v, sub)
        elif kind == "nodes":
            out[key] = [_enc(n, f"{sub}[{k}]") for k, n in enumerate(v)]
        elif kind == "pairs":
            out[key] = [[k, _enc(n, f"{sub}[{k!r}]")] for k, n in v]
        elif kind == "cases":
            out[key] = [[_enc(c, f"{sub}[{k}].when"), _enc(n, f"{sub}[{k}].then")]
                        for k, (c, n) in enumerate(v)]
        elif kind == "scalar":
            out["type"] = _scalar_type(v)
            out["value"] = v
        else:
            out[key] = v
    return out


def to_json(program: A.Node) -> dict:
    """The canonical JSON object of ``program`` (``{"format": "auto.program/1", "program": ...}``).

    Raises:
        SerialError: ``program`` holds something that is not a node or a JSON scalar.
    """
    return {"format": FORMAT, "program": _enc(program, "program")}


def _fail(path: str, msg: str) -> SerialError:
    return SerialError(f"program JSON {path}: {msg}")


def _dec_scalar(t: Any, v: Any, path: str) -> A.Scalar:
    ok = {
        "null": v is None,
        "bool": isinstance(v, bool),
        "text": isinstance(v, str),
        "int": isinstance(v, int) and not isinstance(v, bool),
        "float": isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v),
    }
    if t not in ok:
        raise _fail(path, f"unknown scalar type {t!r}")
    if not ok[t]:
        raise _fail(path, f"value {v!r} is not a {t}")
    return float(v) if t == "float" else v


def _dec(obj: Any, path: str) -> A.Node:  # noqa: C901 - one dispatch over field kinds
    if not isinstance(obj, dict):
        raise _fail(path, f"a node must be an object, not {type(obj).__name__}")
    op = obj.get("op")
    if op not in _SPEC:
        raise _fail(path, f"unknown op {op!r}")
    cls, spec = _SPEC[op]
    expected = {"op"}
    for key, _, kind in spec:
        expected |= {"type", "value"} if kind == "scalar" else {key}
    if set(obj) != expected:
        missing = sorted(expected - set(obj))
        extra = sorted(set(obj) - expected)
        raise _fail(path, f"{op}: missing keys {missing}, unexpected keys {extra}")
    kwargs: dict[str, Any] = {}
    for key, attr, kind in spec:
        sub = f"{path}.{key}"
        v = obj.get(key)
        if kind == "node":
            kwargs[attr] = _dec(v, sub)
        elif kind == "nodes":
            if not isinstance(v, list):
                raise _fail(sub, "must be a list of nodes")
            kwargs[attr] = tuple(_dec(n, f"{sub}[{k}]") for k, n in enumerate(v))
        elif kind in ("pairs", "cases"):
            if not isinstance(v, list):
                raise _fail(sub, "must be a list of pairs")
            items = []
            for k, pair in enumerate(v):
                if not (isinstance(pair, list) and len(pair) == 2):
                    raise _fail(f"{sub}[{k}]", "must be a pair [a, b]")
                if kind == "pairs":
                    if not isinstance(pair[0], str):
                        raise _fail(f"{sub}[{k}]", "a key must be a string")
                    items.append((pair[0], _dec(pair[1], f"{sub}[{k}][1]")))
                else:
                    items.append((_dec(pair[0], f"{sub}[{k}][0]"), _dec(pair[1], f"{sub}[{k}][1]")))
            kwargs[attr] = tuple(items)
        elif kind == "scalar":
            kwargs[attr] = _dec_scalar(obj["type"], obj["value"], path)
        elif kind in ("str", "cmp"):
            if not isinstance(v, str):
                raise _fail(sub, f"must be a string, not {type(v).__name__}")
            if kind == "cmp" and v not in A.COMPARE_OPS:
                raise _fail(sub, f"{v!r} is not one of {', '.join(A.COMPARE_OPS)}")
            kwargs[attr] = v
        elif kind in ("int", "opt_int"):
            if v is None and kind == "opt_int":
                kwargs[attr] = None
            elif isinstance(v, bool) or not isinstance(v, int):
                raise _fail(sub, f"must be an integer{' or null' if kind == 'opt_int' else ''}")
            else:
                kwargs[attr] = v
    return cls(**kwargs)


def from_json(obj: Any) -> A.Node:
    """Rebuild a program from :func:`to_json`'s form (validating its shape, not its types).

    Raises:
        SerialError: (a :class:`~auto.errors.CompileError`) wrong format tag, unknown op,
            missing or extra keys, wrong value types, or nesting too deep to decode.
    """
    if not isinstance(obj, dict) or set(obj) != {"format", "program"}:
        raise SerialError('program JSON must be {"format": ..., "program": ...}')
    if obj["format"] != FORMAT:
        raise SerialError(f"program JSON format {obj['format']!r} is not {FORMAT!r}")
    try:
        return _dec(obj["program"], "program")
    except RecursionError:
        raise SerialError("program JSON is nested too deeply") from None


def program_digest(program: A.Node) -> str:
    """``sha256:<hex>`` of the canonical JSON of :func:`to_json` (:func:`auto.canonical.digest`)."""
    return digest(to_json(program))
