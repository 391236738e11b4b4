"""The program DSL's syntax tree: typed, side-effect-free expressions over one input field.

A program is one expression tree. It reads one string field of the task's input object
(:class:`Field`), computes with the operations below and returns one value, which becomes the
artifact's ``answer``. Every node is an immutable dataclass, hashable, so synthesis can
deduplicate candidates and programs can be stored as canonical JSON (:func:`to_json` /
:func:`from_json` in :mod:`auto.models.program.serial`).

Types (static; every value may also be ``null`` unless stated):

``text``   a Unicode string (UTF-8 bytes in WebAssembly).
``int``    a signed 64-bit integer.
``float``  an exact decimal with at most 4 fractional digits and ``|v| < 10**14`` (an i64 of
           ten-thousandths in WebAssembly, an ``int`` of ten-thousandths in the interpreter).
           Computation and comparison are exact; in the answer it becomes the IEEE-754 double
           nearest to it, written as Python's ``repr(float(v))`` (the shortest decimal that
           reads back as that double). Below ``10**11`` (at most 15 significant digits) that is
           the exact decimal; above, the nearest double's shortest form (e.g.
           ``12345678901234.5678`` prints as ``12345678901234.568``). The WebAssembly backend
           prints the same bytes with exact integer arithmetic.
``bool``   never null: predicates of a null operand are ``false``.
``list``   a list of ``text`` (from :class:`Split`).
``record`` a JSON object with fixed keys (from :class:`Record`).

Semantics shared by the interpreter and the WebAssembly backend (the parity tests check them):

- Case mapping (:class:`Lower`, :class:`Upper`) and :class:`Strip` are ASCII-only: non-ASCII
  characters are left as they are. Strip removes `` \\t\\n\\r\\f\\v`` at both ends.
- :class:`Slice` counts code points with Python's slice rules (negative indices, clamping).
- :class:`Search` runs a pattern of the safe regex subset (:mod:`auto.models.program.regex`) with
  leftmost-first semantics (as Python's ``re.search(pattern, s, re.ASCII)``) in time linear in
  the text; it returns the capture ``group`` (0 = the whole match) or null on no match or when
  the group did not participate.
- Operations on a null operand return null (text/number results) or false (predicates).
- :class:`Deopt` evaluates to "decline": if it is reached, the whole program's answer is
  withheld and the artifact reports ``"deopt": true`` so the call goes to the reference.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Union

Scalar = Union[str, int, float, bool, None]

TYPES = ("text", "int", "float", "bool", "list", "record", "null")
COMPARE_OPS = ("eq", "ne", "lt", "le", "gt", "ge")


@dataclass(frozen=True)
class Field:
    """The input object's string field ``name`` (a text; the artifact's input schema requires it)."""
    name: str


@dataclass(frozen=True)
class Const:
    """A constant: text, int, float (see the module's float rules), bool or null. Enum labels are
    text constants."""
    value: Scalar


@dataclass(frozen=True)
class Deopt:
    """Decline to answer (any type): the call deoptimizes to the reference."""


@dataclass(frozen=True)
class Lower:
    """ASCII lower-case of a text."""
    x: "Node"


@dataclass(frozen=True)
class Upper:
    """ASCII upper-case of a text."""
    x: "Node"


@dataclass(frozen=True)
class Strip:
    """A text without ASCII whitespace at either end."""
    x: "Node"


@dataclass(frozen=True)
class Split:
    """``text.split(sep)`` (``sep`` non-empty) -> list."""
    x: "Node"
    sep: str


@dataclass(frozen=True)
class Join:
    """``sep.join(list)`` -> text."""
    xs: "Node"
    sep: str


@dataclass(frozen=True)
class Index:
    """``list[i]`` (negative from the end) -> text, null when out of range."""
    xs: "Node"
    i: int


@dataclass(frozen=True)
class Slice:
    """``text[start:stop]`` in code points (Python rules; ``None`` = open end)."""
    x: "Node"
    start: int | None
    stop: int | None


@dataclass(frozen=True)
class Search:
    """First match of ``pattern`` (safe regex subset) in a text -> capture ``group`` or null."""
    x: "Node"
    pattern: str
    group: int = 0


@dataclass(frozen=True)
class Contains:
    """``s in text`` (case-sensitive; compose with :class:`Lower` for case-insensitive)."""
    x: "Node"
    s: str


@dataclass(frozen=True)
class StartsWith:
    """``text.startswith(s)`` -> bool (false for a null operand)."""
    x: "Node"
    s: str


@dataclass(frozen=True)
class EndsWith:
    """``text.endswith(s)`` -> bool (false for a null operand)."""
    x: "Node"
    s: str


@dataclass(frozen=True)
class ParseInt:
    """The whole (stripped) text as an integer: optional ``-``, digits, commas between digits
    ignored; anything else, or a value outside i64, gives null."""
    x: "Node"


@dataclass(frozen=True)
class ParseFloat:
    """The whole (stripped) text as a float: optional ``-``, digits (commas between digits
    ignored), optional ``.`` and 1–4 digits; otherwise (or ``|v| >= 10**14``) null."""
    x: "Node"


@dataclass(frozen=True)
class ParseMoney:
    """As :class:`ParseFloat`, with one optional ``$`` after the sign (``-$5``, ``$1,200.50``)."""
    x: "Node"


@dataclass(frozen=True)
class Compare:
    """``x <op> value`` for op in :data:`COMPARE_OPS`; numbers compare exactly (an int constant
    against a float operand is widened), text and bool support ``eq``/``ne``; null -> false."""
    op: str
    x: "Node"
    value: Scalar


@dataclass(frozen=True)
class IsNull:
    """True when ``x`` (of any type) is null -> bool."""
    x: "Node"


@dataclass(frozen=True)
class And:
    """Conjunction of one or more bools, evaluated left to right, stopping at the first false."""
    items: tuple["Node", ...]


@dataclass(frozen=True)
class Or:
    """Disjunction of one or more bools, evaluated left to right, stopping at the first true."""
    items: tuple["Node", ...]


@dataclass(frozen=True)
class Not:
    """Negation of a bool."""
    x: "Node"


@dataclass(frozen=True)
class Same:
    """``a`` and ``b`` are the same JSON value (same type and value, element by element for lists
    and records; ``null`` equals ``null``) -> bool. The operands' types must unify (an int is never
    the same as a float, as ``1`` and ``1.0`` are different JSON answers)."""
    a: "Node"
    b: "Node"


@dataclass(frozen=True)
class If:
    """A decision list: the value of the first case whose condition holds, else ``default``."""
    cases: tuple[tuple["Node", "Node"], ...]
    default: "Node"


@dataclass(frozen=True)
class Record:
    """A JSON object; one program per field. Keys are distinct; JSON output sorts them."""
    fields: tuple[tuple[str, "Node"], ...]


@dataclass(frozen=True)
class Lookup:
    """Table lookup: the value paired with the text key equal to ``x``, else ``default``."""
    x: "Node"
    table: tuple[tuple[str, "Node"], ...]
    default: "Node"


Node = Union[Field, Const, Deopt, Lower, Upper, Strip, Split, Join, Index, Slice, Search, Contains,
             StartsWith, EndsWith, ParseInt, ParseFloat, ParseMoney, Compare, IsNull, And, Or, Not,
             Same, If, Record, Lookup]

NODE_TYPES: tuple[type, ...] = (Field, Const, Deopt, Lower, Upper, Strip, Split, Join, Index, Slice,
                                Search, Contains, StartsWith, EndsWith, ParseInt, ParseFloat,
                                ParseMoney, Compare, IsNull, And, Or, Not, Same, If, Record, Lookup)


def walk(node: Any) -> Iterator[Node]:
    """Every node of the tree rooted at ``node`` (children inside tuples and pairs included),
    each once per occurrence, parents before their children."""
    stack = [node]
    while stack:
        n = stack.pop()
        if type(n) in NODE_TYPES:
            yield n
            stack.extend(getattr(n, f) for f in n.__dataclass_fields__)
        elif isinstance(n, tuple):
            stack.extend(n)
