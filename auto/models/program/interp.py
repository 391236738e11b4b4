"""The reference interpreter of the program DSL (:mod:`auto.models.program.ast`).

The WebAssembly backend must compute exactly what :func:`run_program` computes; the parity
tests compare the two on generated inputs. Internally a ``float`` value is a
:class:`~auto.models.program.values.Fixed` (an ``int`` of ten-thousandths, :mod:`auto.models.program.values`),
so parsing, comparison and output are exact; it becomes a Python ``float`` (``units / 10000``,
correctly rounded) only in the answer.

Evaluation order: :class:`~auto.models.program.ast.And` / :class:`~auto.models.program.ast.Or` evaluate their
items left to right and stop at the first false / true item; :class:`~auto.models.program.ast.If` and
:class:`~auto.models.program.ast.Lookup` evaluate only the chosen value; :class:`~auto.models.program.ast.Record`
evaluates every field. A :class:`~auto.models.program.ast.Deopt` that is evaluated makes the whole
answer a deopt; one that is skipped has no effect.

Values inside the interpreter: ``str`` (text), ``int`` (i64), :class:`Fixed` (float),
``bool``, ``list[str]``, ``dict[str, value]`` (record) and ``None`` (null).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable

from auto.errors import ArgumentError
from auto.models.program import ast as A
from auto.models.program.regex import compile_regex, pike_search
from auto.models.program.types import check, input_fields
from auto.models.program.values import FLOAT_LIMIT_UNITS, FLOAT_SCALE, I64_MAX, I64_MIN, Fixed, float_units

ASCII_WHITESPACE = " \t\n\r\f\v"
_LOWER = {c: c + 32 for c in range(0x41, 0x5B)}
_UPPER = {c: c - 32 for c in range(0x61, 0x7B)}


class DeoptSignal(Exception):
    """A :class:`~auto.models.program.ast.Deopt` node was reached: the program declines to answer."""


def ascii_lower(s: str) -> str:
    """``A``-``Z`` to ``a``-``z``; every other character unchanged."""
    return s.translate(_LOWER)


def ascii_upper(s: str) -> str:
    """``a``-``z`` to ``A``-``Z``; every other character unchanged."""
    return s.translate(_UPPER)


def ascii_strip(s: str) -> str:
    """``s`` without `` \\t\\n\\r\\f\\v`` at either end (other Unicode spaces are kept)."""
    return s.strip(ASCII_WHITESPACE)


def _digits(s: str) -> bool:
    return bool(s) and all("0" <= c <= "9" for c in s)


def _grouped_digits(s: str) -> str | None:
    """``s`` without commas if it is ASCII digits with commas only between digits, else None."""
    parts = s.split(",")
    if all(_digits(p) for p in parts):
        return "".join(parts)
    return None


def parse_int(s: str) -> int | None:
    """:class:`~auto.models.program.ast.ParseInt`: ``-?D(,D)*`` after :func:`ascii_strip` (``D`` = ASCII
    digits), value within i64; else None."""
    t = ascii_strip(s)
    neg = t.startswith("-")
    body = _grouped_digits(t[1:] if neg else t)
    if body is None:
        return None
    v = -int(body) if neg else int(body)
    return v if I64_MIN <= v <= I64_MAX else None


def parse_float(s: str, money: bool = False) -> Fixed | None:
    """:class:`~auto.models.program.ast.ParseFloat` (``money=False``) / :class:`ParseMoney`: after
    :func:`ascii_strip`, ``-?`` then (money only) ``\\$?``, then ``D(,D)*`` and an optional
    ``.`` with 1-4 ASCII digits; ``|v| < 10**14``. Returns ten-thousandths or None."""
    t = ascii_strip(s)
    neg = t.startswith("-")
    if neg:
        t = t[1:]
    if money and t.startswith("$"):
        t = t[1:]
    whole, dot, frac = t.partition(".")
    body = _grouped_digits(whole)
    if body is None:
        return None
    if dot and not (_digits(frac) and len(frac) <= 4):
        return None
    units = int(body) * FLOAT_SCALE + (int(frac.ljust(4, "0")) if dot else 0)
    if units >= FLOAT_LIMIT_UNITS:
        return None
    return Fixed(-units if neg else units)


def const_value(value: A.Scalar) -> Any:
    """The interpreter value of a :class:`~auto.models.program.ast.Const` value (floats -> :class:`Fixed`).

    Raises:
        ArgumentError: a float constant with more than 4 decimals or ``|v| >= 1e14`` (the type
            checker rejects those first), or a value that is not a scalar.
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        units = float_units(value)
        if units is None:
            raise ArgumentError(f"float constant {value!r} needs at most 4 decimals and |v| < 1e14")
        return Fixed(units)
    raise ArgumentError(f"constant {value!r} is not a text, int, float, bool or null")


def _search(text: str, pattern: str, group: int) -> str | None:
    prog = compile_regex(pattern)
    data = text.encode("utf-8")
    slots = pike_search(prog, data)
    if slots is None or group > prog.ngroups:
        return None
    s, e = slots[2 * group], slots[2 * group + 1]
    if s < 0 or e < 0:
        return None
    return data[s:e].decode("utf-8")


def _compare(op: str, x: Any, value: Any) -> bool:
    if x is None:
        return False
    c = const_value(value)
    if c is None:
        return False
    # An int against a float is widened to ten-thousandths (exact).
    if isinstance(x, Fixed) and type(c) is int:
        c = Fixed(c * FLOAT_SCALE)
    elif isinstance(c, Fixed) and type(x) is int:
        x = Fixed(x * FLOAT_SCALE)
    if op == "eq":
        return x == c and type(x) is type(c)
    if op == "ne":
        return not (x == c and type(x) is type(c))
    if isinstance(x, bool) or isinstance(c, bool) or isinstance(x, str) or isinstance(c, str):
        raise ArgumentError(f"compare {op!r} needs numbers, got {x!r} and {value!r}")
    if op == "lt":
        return int(x) < int(c)
    if op == "le":
        return int(x) <= int(c)
    if op == "gt":
        return int(x) > int(c)
    if op == "ge":
        return int(x) >= int(c)
    raise ArgumentError(f"unknown compare op {op!r}")


def same_value(x: Any, y: Any) -> bool:
    """:class:`~auto.models.program.ast.Same` on two interpreter values: the same type (``Fixed`` is not
    ``int``, ``bool`` is not ``int``) and value, element by element for lists and records."""
    if type(x) is not type(y):
        return False
    if isinstance(x, dict):
        return x.keys() == y.keys() and all(same_value(x[k], y[k]) for k in x)
    if isinstance(x, list):
        return len(x) == len(y) and all(same_value(a, b) for a, b in zip(x, y))
    return x == y


_TEXT_OPS = frozenset({A.Lower, A.Upper, A.Strip, A.Split, A.Slice, A.Search, A.Contains, A.StartsWith,
                       A.EndsWith, A.ParseInt, A.ParseFloat, A.ParseMoney})


def _text_op(t: type, node: A.Node, x: str | None, search: Callable[[str, str, int], str | None]) -> Any:
    """The value of a node of a type in ``_TEXT_OPS`` whose text operand ``node.x`` evaluated to
    ``x``: None on a None operand (False for the three text tests)."""
    if t in (A.Contains, A.StartsWith, A.EndsWith):
        if x is None:
            return False
        if t is A.Contains:
            return node.s in x
        return x.startswith(node.s) if t is A.StartsWith else x.endswith(node.s)
    if x is None:
        return None
    if t in (A.Lower, A.Upper, A.Strip):
        return ascii_lower(x) if t is A.Lower else ascii_upper(x) if t is A.Upper else ascii_strip(x)
    if t is A.Split:
        return x.split(node.sep)
    if t is A.Slice:
        return x[node.start:node.stop]
    if t is A.Search:
        return search(x, node.pattern, node.group)
    if t is A.ParseInt:
        return parse_int(x)
    return parse_float(x, money=t is A.ParseMoney)


def make_evaluator(search: Callable[[str, str, int], str | None], memo: bool = False) -> Callable[[A.Node, dict], Any]:
    """The interpreter's node dispatch with ``search(text, pattern, group)`` for :class:`Search`
    (the reference uses the Pike VM; synthesis passes Python ``re``, which agrees on the subset).
    The returned ``ev(node, inp)`` expects a type-checked program and a checked input.

    With ``memo``, every node *object* is evaluated at most once per call (a cache keyed by
    ``id(node)``, cleared at each call), so a tree that reuses one object in many places (an
    evidence expression built around its program) costs one evaluation per distinct object. The
    memoizing evaluator is not reentrant: use one per thread."""

    def ev(node: A.Node, inp: dict) -> Any:  # noqa: C901 - one dispatch over the node types
        t = type(node)
        if t is A.Field:
            return inp[node.name]
        if t is A.Const:
            return const_value(node.value)
        if t is A.Deopt:
            raise DeoptSignal()
        if t in _TEXT_OPS:
            return _text_op(t, node, sub(node.x, inp), search)
        if t is A.Join:
            xs = sub(node.xs, inp)
            return None if xs is None else node.sep.join(xs)
        if t is A.Index:
            xs = sub(node.xs, inp)
            if xs is None or not -len(xs) <= node.i < len(xs):
                return None
            return xs[node.i]
        if t is A.Compare:
            return _compare(node.op, sub(node.x, inp), node.value)
        if t is A.IsNull:
            return sub(node.x, inp) is None
        if t is A.And:
            return all(sub(i, inp) for i in node.items)
        if t is A.Or:
            return any(sub(i, inp) for i in node.items)
        if t is A.Not:
            return not sub(node.x, inp)
        if t is A.Same:
            return same_value(sub(node.a, inp), sub(node.b, inp))
        if t is A.If:
            for cond, value in node.cases:
                if sub(cond, inp):
                    return sub(value, inp)
            return sub(node.default, inp)
        if t is A.Record:
            return {k: sub(v, inp) for k, v in node.fields}
        if t is A.Lookup:
            x = sub(node.x, inp)
            if x is not None:
                for key, value in node.table:
                    if key == x:
                        return sub(value, inp)
            return sub(node.default, inp)
        raise ArgumentError(f"not a program node: {node!r}")

    if not memo:
        sub = ev
        return ev
    cache: dict[int, Any] = {}

    def sub(node: A.Node, inp: dict) -> Any:  # noqa: F811 - the memoizing recursion
        k = id(node)
        if k in cache:
            return cache[k]
        v = cache[k] = ev(node, inp)
        return v

    def top(node: A.Node, inp: dict) -> Any:
        cache.clear()
        try:
            return sub(node, inp)
        finally:
            cache.clear()

    return top


_ev = make_evaluator(_search)


def to_answer(value: Any) -> Any:
    """An interpreter value as a JSON value (:class:`Fixed` -> ``float``, recursively)."""
    if isinstance(value, Fixed):
        return value.to_float()
    if isinstance(value, dict):
        return {k: to_answer(v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_answer(v) for v in value]
    return value


@lru_cache(maxsize=4096)
def _checked_fields(program: A.Node) -> tuple[str, ...]:
    return _check_program(program)


def _check_program(program: A.Node) -> tuple[str, ...]:
    check(program)
    return tuple(sorted(input_fields(program)))


def _check_input(program: A.Node, inp: dict) -> None:
    try:
        fields = _checked_fields(program)
    except TypeError:  # an unhashable attribute: check without the cache (it will refuse it)
        fields = _check_program(program)
    if not isinstance(inp, dict):
        raise ArgumentError(f"a program input must be a JSON object, not {type(inp).__name__}")
    for name in fields:
        if name not in inp:
            raise ArgumentError(f"the input has no field {name!r}")
        if not isinstance(inp[name], str):
            raise ArgumentError(f"the input field {name!r} must be a string, not {type(inp[name]).__name__}")


def evaluate(program: A.Node, inp: dict) -> Any:
    """Evaluate ``program`` on the input object ``inp`` and return its answer as a JSON value.

    Args:
        program: a program (a node of :mod:`auto.models.program.ast`); it is type-checked first
            (:func:`auto.models.program.types.check`, cached per program).
        inp: the task's input object; every field the program reads must be a ``str``.

    Returns:
        the answer: ``str``, ``int``, ``float`` (from exact ten-thousandths), ``bool``,
        ``list[str]``, ``dict`` (record) or ``None``.

    Raises:
        DeoptSignal: a :class:`~auto.models.program.ast.Deopt` node was reached.
        ProgramTypeError: (a :class:`~auto.errors.CompileError`) the program is ill-typed.
        ArgumentError: ``inp`` is not a dict, lacks a field the program reads, or that field is not
            a string.
    """
    _check_input(program, inp)
    return to_answer(_ev(program, inp))


def run_program(program: A.Node, inp: dict, evidence: A.Node | None = None) -> dict:
    """The artifact's output object for ``inp``.

    Args:
        program: the program.
        inp: the task's input object.
        evidence: an optional evidence expression (what the program's guard decides from),
            evaluated after the program when the program produced a value.

    Returns:
        ``{"answer": <json value>, "deopt": False}`` (plus ``"evidence": <json value>`` with an
        evidence expression), or ``{"answer": None, "deopt": True}`` when a
        :class:`~auto.models.program.ast.Deopt` node is reached in either.

    Raises:
        ProgramTypeError: the program or the evidence is ill-typed (as :func:`evaluate`).
        ArgumentError: bad input object (as :func:`evaluate`).
    """
    try:
        out = {"answer": evaluate(program, inp), "deopt": False}
        if evidence is not None:
            out["evidence"] = evaluate(evidence, inp)
        return out
    except DeoptSignal:
        return {"answer": None, "deopt": True}
