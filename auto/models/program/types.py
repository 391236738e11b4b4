"""The type checker of the program DSL (:mod:`auto.models.program.ast`).

:func:`check` infers a program's result type and rejects every program the interpreter
(:mod:`auto.models.program.interp`) or the WebAssembly backend could not run exactly: wrong operand
types, unsupported comparisons, malformed constants and patterns, ill-formed nodes.

Typing rules (``null`` and the type of :class:`~auto.models.program.ast.Deopt` unify with anything):

- text operations (Lower, Upper, Strip, Split, Slice, Search, Contains, StartsWith, EndsWith,
  ParseInt/Float/Money, the key of Lookup) take ``text``; Join and Index take ``list``;
- predicates (And, Or, Not, the conditions of If) take ``bool``; And/Or need at least one item;
- Same takes two operands whose types unify (as the branches of If);
- Compare: ``int`` operand with an int constant (all ops); ``float`` operand with an int or
  float constant (all ops); ``text`` with a text constant and ``bool`` with a bool constant
  (``eq``/``ne`` only); a null constant is refused (use IsNull);
- the branches of If and the values of Lookup unify: equal types, or records with the same keys
  whose field types unify;
- constants: ints within i64, floats with at most 4 decimals and ``|v| < 1e14``, finite;
- a program reads at most one distinct input field.
"""

from __future__ import annotations

from typing import Any, Iterator

from auto.errors import CompileError
from auto.models.program import ast as A
from auto.models.program.regex import compile_regex
from auto.models.program.values import I64_MAX, I64_MIN, float_units

# Internal types: a name from A.TYPES, "deopt" (bottom), or ("record", ((key, type), ...)).
_BOTTOM = "deopt"


class ProgramTypeError(CompileError):
    """A program is ill-typed or ill-formed; the message names the offending node and its path."""


def _name(t: Any) -> str:
    return "record" if isinstance(t, tuple) else t


def _unify(a: Any, b: Any, where: str) -> Any:
    if a == _BOTTOM:
        return b
    if b == _BOTTOM:
        return a
    if a == "null":
        return b
    if b == "null":
        return a
    if isinstance(a, tuple) and isinstance(b, tuple):
        ka = [k for k, _ in a[1]]
        kb = [k for k, _ in b[1]]
        if sorted(ka) != sorted(kb):
            raise ProgramTypeError(f"{where}: records with different keys {sorted(ka)} and {sorted(kb)}")
        fb = dict(b[1])
        return ("record", tuple((k, _unify(t, fb[k], f"{where}.{k}")) for k, t in a[1]))
    if a == b:
        return a
    raise ProgramTypeError(f"{where}: branches of different types {_name(a)} and {_name(b)}")


class _Checker:
    def __init__(self, input_field: str | None):
        self.input_field = input_field
        self.fields: set[str] = set()

    def fail(self, path: str, node: Any, msg: str) -> ProgramTypeError:
        return ProgramTypeError(f"{path}: {type(node).__name__}: {msg}")

    def want(self, node: Any, path: str, allowed: tuple[str, ...], role: str) -> Any:
        t = self.infer(node, path)
        if t == _BOTTOM or _name(t) in allowed:
            return t
        raise ProgramTypeError(f"{path}: {type(node).__name__} is {_name(t)}, but {role} needs "
                               f"{' or '.join(a for a in allowed if a != 'null')}")

    def text_arg(self, node: Any, path: str, parent: str) -> None:
        self.want(node.x, path + ".x", ("text", "null"), f"{parent}'s operand")

    def str_attr(self, node: Any, path: str, attr: str, nonempty: bool = False) -> str:
        v = getattr(node, attr)
        if not isinstance(v, str):
            raise self.fail(path, node, f"{attr} must be a str, not {type(v).__name__}")
        if nonempty and not v:
            raise self.fail(path, node, f"{attr} must not be empty")
        return v

    def int_attr(self, node: Any, path: str, attr: str, optional: bool = False) -> None:
        v = getattr(node, attr)
        if v is None and optional:
            return
        if isinstance(v, bool) or not isinstance(v, int):
            raise self.fail(path, node, f"{attr} must be an int, not {type(v).__name__}")
        if not I64_MIN <= v <= I64_MAX:
            raise self.fail(path, node, f"{attr} {v} is outside i64")

    def keyed(self, node: Any, path: str, attr: str, what: str) -> Iterator[tuple[str, Any]]:
        """The ``(key, value)`` pairs of ``node.<attr>``, each checked as it is reached: a tuple
        of pairs with distinct ``str`` keys."""
        items = getattr(node, attr)
        if not isinstance(items, tuple):
            raise self.fail(path, node, f"{attr} must be a tuple of (key, value) pairs")
        seen: set[str] = set()
        for k, item in enumerate(items):
            if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)):
                raise self.fail(path, node, f"{what} {k} is not a (str key, value) pair")
            key, value = item
            if key in seen:
                raise self.fail(path, node, f"duplicate key {key!r}")
            seen.add(key)
            yield key, value

    def const_type(self, value: Any, path: str, node: Any) -> str:
        if value is None:
            return "null"
        if isinstance(value, bool):
            return "bool"
        if isinstance(value, str):
            return "text"
        if isinstance(value, int):
            if not I64_MIN <= value <= I64_MAX:
                raise self.fail(path, node, f"int constant {value} is outside i64")
            return "int"
        if isinstance(value, float):
            if float_units(value) is None:
                raise self.fail(path, node, f"float constant {value!r} needs at most 4 decimals, "
                                            "a finite value and |v| < 1e14")
            return "float"
        raise self.fail(path, node, f"constant of unsupported type {type(value).__name__}")

    def infer(self, node: Any, path: str) -> Any:  # noqa: C901 - one dispatch over node types
        t = type(node)
        if t not in A.NODE_TYPES:
            raise ProgramTypeError(f"{path}: not a program node: {node!r}")
        if t is A.Field:
            name = self.str_attr(node, path, "name", nonempty=True)
            if self.input_field is not None and name != self.input_field:
                raise self.fail(path, node, f"reads {name!r}, but the input field is {self.input_field!r}")
            self.fields.add(name)
            if len(self.fields) > 1:
                raise self.fail(path, node, f"the program reads more than one field: {sorted(self.fields)}")
            return "text"
        if t is A.Const:
            return self.const_type(node.value, path, node)
        if t is A.Deopt:
            return _BOTTOM
        if t in (A.Lower, A.Upper, A.Strip):
            self.text_arg(node, path, t.__name__)
            return "text"
        if t is A.Split:
            self.text_arg(node, path, "Split")
            self.str_attr(node, path, "sep", nonempty=True)
            return "list"
        if t is A.Join:
            self.want(node.xs, path + ".xs", ("list", "null"), "Join's operand")
            self.str_attr(node, path, "sep")
            return "text"
        if t is A.Index:
            self.want(node.xs, path + ".xs", ("list", "null"), "Index's operand")
            self.int_attr(node, path, "i")
            return "text"
        if t is A.Slice:
            self.text_arg(node, path, "Slice")
            self.int_attr(node, path, "start", optional=True)
            self.int_attr(node, path, "stop", optional=True)
            return "text"
        if t is A.Search:
            self.text_arg(node, path, "Search")
            pattern = self.str_attr(node, path, "pattern")
            try:
                prog = compile_regex(pattern)
            except CompileError as e:
                raise self.fail(path, node, str(e)) from None
            g = node.group
            if isinstance(g, bool) or not isinstance(g, int) or not 0 <= g <= prog.ngroups:
                raise self.fail(path, node, f"group {g!r} is not in 0..{prog.ngroups} for pattern {pattern!r}")
            return "text"
        if t in (A.Contains, A.StartsWith, A.EndsWith):
            self.text_arg(node, path, t.__name__)
            self.str_attr(node, path, "s")
            return "bool"
        if t is A.ParseInt:
            self.text_arg(node, path, "ParseInt")
            return "int"
        if t in (A.ParseFloat, A.ParseMoney):
            self.text_arg(node, path, t.__name__)
            return "float"
        if t is A.Compare:
            return self.compare(node, path)
        if t is A.IsNull:
            self.infer(node.x, path + ".x")
            return "bool"
        if t in (A.And, A.Or):
            items = node.items
            if not isinstance(items, tuple) or not items:
                raise self.fail(path, node, "items must be a non-empty tuple")
            for k, item in enumerate(items):
                self.want(item, f"{path}.items[{k}]", ("bool",), f"{t.__name__}'s item")
            return "bool"
        if t is A.Not:
            self.want(node.x, path + ".x", ("bool",), "Not's operand")
            return "bool"
        if t is A.Same:
            ta = self.infer(node.a, path + ".a")
            tb = self.infer(node.b, path + ".b")
            _unify(ta, tb, f"{path}: Same")
            return "bool"
        if t is A.If:
            if not isinstance(node.cases, tuple):
                raise self.fail(path, node, "cases must be a tuple of (condition, value) pairs")
            result: Any = _BOTTOM
            for k, case in enumerate(node.cases):
                if not (isinstance(case, tuple) and len(case) == 2):
                    raise self.fail(path, node, f"case {k} is not a (condition, value) pair")
                self.want(case[0], f"{path}.cases[{k}].when", ("bool",), "an If condition")
                vt = self.infer(case[1], f"{path}.cases[{k}].then")
                result = _unify(result, vt, f"{path}: If")
            dt = self.infer(node.default, f"{path}.default")
            return _unify(result, dt, f"{path}: If")
        if t is A.Record:
            out = [(key, self.infer(value, f"{path}.{key}"))
                   for key, value in self.keyed(node, path, "fields", "field")]
            return ("record", tuple(out))
        if t is A.Lookup:
            self.text_arg(node, path, "Lookup")
            result = _BOTTOM
            for key, value in self.keyed(node, path, "table", "entry"):
                result = _unify(result, self.infer(value, f"{path}.table[{key!r}]"), f"{path}: Lookup")
            return _unify(result, self.infer(node.default, f"{path}.default"), f"{path}: Lookup")
        raise ProgramTypeError(f"{path}: unhandled node {t.__name__}")  # pragma: no cover

    def compare(self, node: A.Compare, path: str) -> str:
        if node.op not in A.COMPARE_OPS:
            raise self.fail(path, node, f"op {node.op!r} is not one of {', '.join(A.COMPARE_OPS)}")
        vt = self.const_type(node.value, path, node)
        if vt == "null":
            raise self.fail(path, node, "comparing with null is not supported (use IsNull)")
        xt = _name(self.infer(node.x, path + ".x"))
        if xt in (_BOTTOM, "null"):
            return "bool"
        ordered = node.op not in ("eq", "ne")
        if xt == "int" and vt == "int":
            return "bool"
        if xt == "float" and vt in ("int", "float"):
            return "bool"
        if xt in ("text", "bool") and vt == xt:
            if ordered:
                raise self.fail(path, node, f"Compare {node.op} on {xt} (only eq/ne are supported)")
            return "bool"
        raise self.fail(path, node, f"Compare {node.op} of a {xt} operand with a {vt} constant")


def check(program: A.Node, input_field: str | None = None) -> str:
    """Type-check ``program`` and return its result type.

    Args:
        program: a node of :mod:`auto.models.program.ast`.
        input_field: when given, the only field the program may read.

    Returns:
        one of :data:`auto.models.program.ast.TYPES` (``"null"`` for a program that is only null or
        Deopt).

    Raises:
        ProgramTypeError: (a :class:`~auto.errors.CompileError`) the program is ill-typed or
            ill-formed; the message starts with the node's path (e.g. ``program.intent.x``) and
            names the node and the problem.
    """
    t = _Checker(input_field).infer(program, "program")
    return "null" if t == _BOTTOM else _name(t)


def input_fields(program: A.Node) -> set[str]:
    """The names of every :class:`~auto.models.program.ast.Field` in ``program`` (no type checking)."""
    return {n.name for n in A.walk(program) if type(n) is A.Field}
