"""Code generation for a program's expression tree: ``$prog``, every node inline (no recursion
at run time).

Values at run time are a tag (i32) and a payload (i64)::

    tag 0 null    payload unused
    tag 1 int     i64
    tag 2 float   i64 ten-thousandths (|v| < 10**14, :mod:`auto.models.program.values`)
    tag 3 bool    0 / 1
    tag 4 text    (ptr << 32) | len of UTF-8 bytes (a view into the input or the arena)
    tag 5 list    (ptr << 32) | count of an array of ``count`` i64 text payloads
    tag 6 record  (ptr << 32) | len of the record's canonical JSON text

Each node gets its own pair of locals; :class:`ExprGen` emits the statements that set them,
calling the program runtime (``program_runtime.wat``) for text, number, regex and JSON work.
Constants (texts, regex tables) go to the program's :class:`~auto.codegen.static.StaticData`.

Common subexpressions: a sub-expression that occurs more than once in the program (and in its
evidence expression, which shares the program's predicates; structural equality of the nodes) is
computed at most once per call. It gets one pair of locals and a "computed" flag; each occurrence
runs its code only while the flag is clear (the first occurrence that is reached computes it,
later ones read the locals). Evaluation stays lazy: a shared node inside a branch that is not
taken is not computed, so Deopt and the And/Or/If evaluation order mean what they meant without
sharing. Constants and the field are not shared (they cost one instruction).
"""

from __future__ import annotations

import json
from collections import Counter

from auto.errors import CodegenError
from auto.models.program import ast as A
from auto.models.program.ast import COMPARE_OPS
from auto.models.program.values import FLOAT_LIMIT_UNITS, FLOAT_SCALE, I64_MAX, I64_MIN, float_units

from .program_regex import RegexTables, place_regex
from .static import StaticData
from .wat import i64_const

I32_MAX = (1 << 31) - 1

T_NULL, T_INT, T_FLOAT, T_BOOL, T_TEXT, T_LIST, T_JSON = range(7)
"""Value tags (see the module docstring)."""


def float_const_units(value: float) -> int:
    """A float constant in ten-thousandths (:func:`auto.models.program.values.float_units`).

    Raises:
        CodegenError: not finite, more than 4 fractional digits, or ``|value| >= 10**14``.
    """
    units = float_units(float(value))
    if units is None:
        raise CodegenError(f"float constant {value!r} needs at most 4 decimals, a finite value "
                           "and |v| < 1e14")
    return units


_SPECIAL = set("()[]{}|*+?.^$\\")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v"}


def literal_pattern(pattern: str) -> tuple[bool, str, bool] | None:
    """``(left boundary, literal, right boundary)`` when ``pattern`` is a non-empty literal of the
    safe subset between optional ``\\b`` assertions (what keyword predicates look like), else None.
    A literal is ordinary characters and backslash-escaped specials (``\\.``, ``\\$``, ...) or
    ``\\n`` ``\\t`` ``\\r`` ``\\f`` ``\\v``."""
    left = pattern.startswith("\\b")
    body = pattern[2:] if left else pattern
    right = body.endswith("\\b") and not body.endswith("\\\\b")
    if right:
        body = body[:-2]
    out = []
    i = 0
    while i < len(body):
        c = body[i]
        if c == "\\":
            if i + 1 >= len(body):
                return None
            d = body[i + 1]
            if d in _SPECIAL:
                out.append(d)
            elif d in _ESCAPES:
                out.append(_ESCAPES[d])
            else:
                return None
            i += 2
            continue
        if c in _SPECIAL:
            return None
        out.append(c)
        i += 1
    return (left, "".join(out), right) if out else None


class ExprGen:
    """Generates the body of ``$prog`` for one program (statements that set per-node locals)."""

    def __init__(self, field: str | None, static: StaticData) -> None:
        self.field = field
        self.static = static
        self.locals: list[str] = []
        self.lines: list[str] = []
        self.n = 0
        self.regexes: dict[str, RegexTables] = {}
        self.shared: set = set()
        self.slots: dict = {}

    def plan(self, roots) -> None:
        """Mark every sub-expression of ``roots`` that occurs more than once (and costs more than
        one instruction) as shared: it is computed at most once per call."""
        counts: Counter = Counter()
        for root in roots:
            for n in A.walk(root):
                if type(n) not in (A.Const, A.Field, A.Deopt):
                    counts[n] += 1
        self.shared = {n for n, c in counts.items() if c > 1}

    # -- helpers
    def emit(self, line: str) -> None:
        self.lines.append("    " + line)

    def value_locals(self) -> tuple[str, str]:
        k = self.n
        self.n += 1
        t, v = f"$t{k}", f"$v{k}"
        self.locals += [f"(local {t} i32)", f"(local {v} i64)"]
        return t, v

    def label(self, stem: str) -> str:
        self.n += 1
        return f"${stem}{self.n}"

    def set(self, dst: tuple[str, str], t: str, v: str) -> None:
        self.emit(f"(local.set {dst[0]} {t}) (local.set {dst[1]} {v})")

    def copy(self, dst: tuple[str, str], src: tuple[str, str]) -> None:
        self.set(dst, f"(local.get {src[0]})", f"(local.get {src[1]})")

    def const_text(self, s: str) -> str:
        return f"(i64.const {i64_const(self.static.packed(s.encode('utf-8')))})"

    def is_tag(self, src: tuple[str, str], tag: int) -> str:
        return f"(i32.eq (local.get {src[0]}) (i32.const {tag}))"

    # -- regexes
    def regex(self, pattern: str) -> RegexTables:
        """The pattern's tables in static data (placed once per pattern)."""
        r = self.regexes.get(pattern)
        if r is None:
            r = self.regexes[pattern] = place_regex(pattern, self.static)
        return r

    # -- nodes
    def node(self, n) -> tuple[str, str]:
        """Emit code for ``n``; returns its (tag, payload) locals. A shared node (:meth:`plan`)
        is computed under its flag into locals of its own."""
        kind = type(n).__name__
        method = getattr(self, "_" + kind, None)
        if method is None or type(n) not in A.NODE_TYPES:
            raise CodegenError(f"cannot lower a {kind} node")
        if n not in self.shared:
            return method(n)
        slot = self.slots.get(n)
        if slot is None:
            out = self.value_locals()
            flag = f"$m{self.n}"
            self.n += 1
            self.locals.append(f"(local {flag} i32)")
            slot = self.slots[n] = (out, flag)
        out, flag = slot
        self.emit(f"(if (i32.eqz (local.get {flag})) (then")
        r = method(n)
        self.copy(out, r)
        self.emit(f"(local.set {flag} (i32.const 1))))")
        return out

    def _Field(self, n):
        if n.name != self.field:
            raise CodegenError(f"the program reads field {n.name!r}, expected only {self.field!r}")
        out = self.value_locals()
        self.set(out, f"(i32.const {T_TEXT})", "(global.get $fv)")
        return out

    def _Const(self, n):
        out = self.value_locals()
        v = n.value
        if v is None:
            return out
        if isinstance(v, bool):
            self.set(out, f"(i32.const {T_BOOL})", f"(i64.const {int(v)})")
        elif isinstance(v, int):
            if not I64_MIN <= v <= I64_MAX:
                raise CodegenError(f"int constant {v} is outside i64")
            self.set(out, f"(i32.const {T_INT})", f"(i64.const {v})")
        elif isinstance(v, float):
            self.set(out, f"(i32.const {T_FLOAT})", f"(i64.const {float_const_units(v)})")
        elif isinstance(v, str):
            self.set(out, f"(i32.const {T_TEXT})", self.const_text(v))
        else:
            raise CodegenError(f"unsupported constant {v!r}")
        return out

    def _Deopt(self, n):
        out = self.value_locals()
        self.emit("(br $deopt)")
        return out

    def _text_op(self, n, call: str, tag: int = T_TEXT, nullable: bool = False,
                 alloc: bool = False) -> tuple[str, str]:
        """``out = call(x)`` when x is text, else null. ``call`` uses ``{x}`` for x's payload;
        ``nullable``: a result of -1 means null; ``alloc``: the call may run out of memory."""
        x = self.node(n.x if hasattr(n, "x") else n.xs)
        out = self.value_locals()
        src_tag = T_LIST if not hasattr(n, "x") else T_TEXT
        body = [f"(local.set {out[1]} {call.format(x=f'(local.get {x[1]})')})"]
        if alloc:
            body.append("(br_if $oom (global.get $oom))")
        if nullable:
            body.append(f"(local.set {out[0]} (select (i32.const 0) (i32.const {tag}) "
                        f"(i64.eq (local.get {out[1]}) (i64.const -1))))")
        else:
            body.append(f"(local.set {out[0]} (i32.const {tag}))")
        self.emit(f"(if {self.is_tag(x, src_tag)} (then {' '.join(body)}))")
        return out

    def _Lower(self, n):
        return self._text_op(n, "(call $case {x} (i32.const 0))", alloc=True)

    def _Upper(self, n):
        return self._text_op(n, "(call $case {x} (i32.const 1))", alloc=True)

    def _Strip(self, n):
        return self._text_op(n, "(call $strip {x})")

    def _Split(self, n):
        if not isinstance(n.sep, str) or not n.sep:
            raise CodegenError("Split needs a non-empty text separator")
        return self._text_op(n, f"(call $split {{x}} {self.const_text(n.sep)})", tag=T_LIST, alloc=True)

    def _Join(self, n):
        if not isinstance(n.sep, str):
            raise CodegenError("Join needs a text separator")
        return self._text_op(n, f"(call $join {{x}} {self.const_text(n.sep)})", alloc=True)

    def _Index(self, n):
        i = int(n.i)
        if not -I32_MAX <= i <= I32_MAX:  # no list has 2**31 parts: always out of range
            self.node(n.xs)  # evaluated for its Deopt nodes
            return self.value_locals()
        return self._text_op(n, f"(call $index {{x}} (i32.const {i}))", nullable=True)

    def _Slice(self, n):
        def clamp(v):
            return 0 if v is None else max(-I32_MAX, min(I32_MAX, int(v)))
        flags = (n.start is not None) | ((n.stop is not None) << 1)
        return self._text_op(
            n, f"(call $slice {{x}} (i32.const {clamp(n.start)}) (i32.const {clamp(n.stop)}) (i32.const {flags}))")

    def _Search(self, n):
        lit = literal_pattern(n.pattern) if n.group == 0 else None
        if lit is not None:  # (\b)?literal(\b)?: one scan with $find, no Pike VM
            left, text, right = lit
            return self._text_op(n, f"(call $findw {{x}} {self.const_text(text)} (i32.const {int(left)}) "
                                    f"(i32.const {int(right)}))", nullable=True)
        r = self.regex(n.pattern)
        g = int(n.group)
        if not 0 <= g <= r.groups or 2 * g + 1 >= r.slots:
            raise CodegenError(f"regex {n.pattern!r} has no group {g}")
        return self._text_op(
            n, f"(call $search {{x}} (i32.const {r.address}) (i32.const {r.instructions}) (i32.const {r.slots}) "
               f"(i32.const {g}) (i32.const {r.first}))",
            nullable=True, alloc=True)

    def _pred(self, n, call: str):
        x = self.node(n.x)
        out = self.value_locals()
        c = call.format(x=f"(local.get {x[1]})")
        self.set(out, f"(i32.const {T_BOOL})",
                 f"(i64.extend_i32_u (if (result i32) {self.is_tag(x, T_TEXT)} (then {c}) (else (i32.const 0))))")
        return out

    def _Contains(self, n):
        return self._pred(n, f"(call $has {{x}} {self.const_text(n.s)} (i32.const 0))")

    def _StartsWith(self, n):
        return self._pred(n, f"(call $has {{x}} {self.const_text(n.s)} (i32.const 1))")

    def _EndsWith(self, n):
        return self._pred(n, f"(call $has {{x}} {self.const_text(n.s)} (i32.const 2))")

    def _parse(self, n, mode: int, tag: int):
        x = self.node(n.x)
        out = self.value_locals()
        self.emit(f"(if {self.is_tag(x, T_TEXT)} (then (if (call $parse (local.get {x[1]}) (i32.const {mode})) "
                  f"(then (local.set {out[0]} (i32.const {tag})) (local.set {out[1]} (global.get $pv))))))")
        return out

    def _ParseInt(self, n):
        return self._parse(n, 0, T_INT)

    def _ParseFloat(self, n):
        return self._parse(n, 1, T_FLOAT)

    def _ParseMoney(self, n):
        return self._parse(n, 2, T_FLOAT)

    def _Compare(self, n):
        op, c = n.op, n.value
        if op not in COMPARE_OPS:
            raise CodegenError(f"unknown comparison {op!r}")
        x = self.node(n.x)
        out = self.value_locals()
        xt, xv = x
        if c is None:
            raise CodegenError("Compare against null: use IsNull")
        if isinstance(c, (str, bool)):
            if op not in ("eq", "ne"):
                raise CodegenError(f"{type(c).__name__} values support only eq/ne, not {op}")
            if isinstance(c, str):
                tag, same = T_TEXT, f"(call $eqb (local.get {xv}) {self.const_text(c)})"
            else:
                tag, same = T_BOOL, f"(i64.eq (local.get {xv}) (i64.const {int(c)}))"
            res = same if op == "eq" else f"(i32.eqz {same})"
            self.set(out, f"(i32.const {T_BOOL})", f"(i64.extend_i32_u (if (result i32) "
                     f"(i32.eq (local.get {xt}) (i32.const {tag})) (then {res}) (else (i32.const 0))))")
            return out
        if not isinstance(c, (int, float)):
            raise CodegenError(f"cannot compare with {c!r}")
        # three-way sign of (x - c) for an int operand and for a float operand
        test = {"eq": "(i32.eqz {s})", "ne": "(i32.ne {s} (i32.const 0))",
                "lt": "(i32.lt_s {s} (i32.const 0))", "le": "(i32.le_s {s} (i32.const 0))",
                "gt": "(i32.gt_s {s} (i32.const 0))", "ge": "(i32.ge_s {s} (i32.const 0))"}[op]
        X = f"(local.get {xv})"

        def cmp(a: str, b: int) -> str:
            return f"(i32.sub (i64.gt_s {a} (i64.const {b})) (i64.lt_s {a} (i64.const {b})))"

        if isinstance(c, float):
            u = float_const_units(c)
            q, r = divmod(u, FLOAT_SCALE)  # floor division: c = q + r / 10**4, 0 <= r < 10**4
            # int x against q + r/10**4: x > q -> 1; x < q -> -1; x == q -> 0 if r == 0 else -1
            s_int = cmp(X, q) if r == 0 else f"(select (i32.const 1) (i32.const -1) (i64.gt_s {X} (i64.const {q})))"
            s_float = cmp(X, u)
        else:
            if c > I64_MAX:
                s_int = "(i32.const -1)"
            elif c < I64_MIN:
                s_int = "(i32.const 1)"
            else:
                s_int = cmp(X, c)
            cu = c * FLOAT_SCALE
            s_float = ("(i32.const -1)" if cu >= FLOAT_LIMIT_UNITS else
                       "(i32.const 1)" if cu <= -FLOAT_LIMIT_UNITS else cmp(X, cu))
        self.set(out, f"(i32.const {T_BOOL})", f"(i64.extend_i32_u (if (result i32) "
                 f"(i32.eq (local.get {xt}) (i32.const {T_INT})) (then {test.format(s=s_int)}) (else "
                 f"(if (result i32) (i32.eq (local.get {xt}) (i32.const {T_FLOAT})) "
                 f"(then {test.format(s=s_float)}) (else (i32.const 0))))))")
        return out

    def _IsNull(self, n):
        x = self.node(n.x)
        out = self.value_locals()
        self.set(out, f"(i32.const {T_BOOL})", f"(i64.extend_i32_u (i32.eqz (local.get {x[0]})))")
        return out

    def _Same(self, n):
        a = self.node(n.a)
        b = self.node(n.b)
        out = self.value_locals()
        self.set(out, f"(i32.const {T_BOOL})", f"(i64.extend_i32_u (call $same (local.get {a[0]}) (local.get {a[1]}) "
                 f"(local.get {b[0]}) (local.get {b[1]})))")
        return out

    def _Not(self, n):
        x = self.node(n.x)
        out = self.value_locals()
        self.set(out, f"(i32.const {T_BOOL})", f"(i64.extend_i32_u (i64.eqz (local.get {x[1]})))")
        return out

    def _junction(self, n, stop_on_true: bool):
        out = self.value_locals()
        lab = self.label("j")
        self.set(out, f"(i32.const {T_BOOL})", f"(i64.const {int(stop_on_true)})")
        self.emit(f"(block {lab}")
        for item in n.items:
            x = self.node(item)
            cond = f"(local.get {x[1]})" if stop_on_true else f"(i64.eqz (local.get {x[1]}))"
            self.emit(f"(br_if {lab} (i32.wrap_i64 {cond}))" if stop_on_true else f"(br_if {lab} {cond})")
        self.emit(f"(local.set {out[1]} (i64.const {int(not stop_on_true)})))")
        return out

    def _And(self, n):
        return self._junction(n, False)

    def _Or(self, n):
        return self._junction(n, True)

    def _If(self, n):
        out = self.value_locals()
        end = self.label("if")
        self.emit(f"(block {end}")
        for cond, val in n.cases:
            skip = self.label("case")
            self.emit(f"(block {skip}")
            c = self.node(cond)
            self.emit(f"(br_if {skip} (i64.eqz (local.get {c[1]})))")
            v = self.node(val)
            self.copy(out, v)
            self.emit(f"(br {end}))")
        v = self.node(n.default)
        self.copy(out, v)
        self.emit(")")
        return out

    def _Lookup(self, n):
        x = self.node(n.x)
        out = self.value_locals()
        end = self.label("lk")
        self.emit(f"(block {end}")
        self.emit(f"(if {self.is_tag(x, T_TEXT)} (then")
        seen = set()
        for key, val in n.table:
            if not isinstance(key, str):
                raise CodegenError(f"Lookup keys are texts, got {key!r}")
            if key in seen:  # an earlier entry with the same key always wins
                continue
            seen.add(key)
            skip = self.label("key")
            self.emit(f"(block {skip}")
            self.emit(f"(br_if {skip} (i32.eqz (call $eqb (local.get {x[1]}) {self.const_text(key)})))")
            v = self.node(val)
            self.copy(out, v)
            self.emit(f"(br {end}))")
        self.emit("))")
        v = self.node(n.default)
        self.copy(out, v)
        self.emit(")")
        return out

    def _Record(self, n):
        keys = [k for k, _ in n.fields]
        if any(not isinstance(k, str) for k in keys):
            raise CodegenError("Record keys must be texts")
        if len(set(keys)) != len(keys):
            raise CodegenError(f"Record keys must be distinct: {keys}")
        vals = {k: self.node(v) for k, v in n.fields}
        out = self.value_locals()
        d = "$d"
        self.emit(f"(local.set {d} (global.get $top))")
        for i, k in enumerate(sorted(keys)):
            part = ("{" if i == 0 else ",") + json.dumps(k, ensure_ascii=False) + ":"
            self.emit(f"(local.set {d} (call $wraw (local.get {d}) {self.const_text(part)}))")
            self.emit(f"(local.set {d} (call $wval (local.get {d}) (local.get {vals[k][0]}) (local.get {vals[k][1]})))")
        self.emit(f"(local.set {d} (call $wraw (local.get {d}) {self.const_text('{}' if not keys else '}')}))")
        self.emit("(br_if $oom (global.get $oom))")
        self.set(out, f"(i32.const {T_JSON})",
                 f"(call $pack (global.get $top) (i32.sub (local.get {d}) (global.get $top)))")
        self.emit(f"(global.set $top (i32.and (i32.add (local.get {d}) (i32.const 7)) (i32.const -8)))")
        return out


def prog_func(gen: ExprGen, root, evidence=None) -> str:
    """WAT of ``$prog``: the whole expression ``root`` inline (statements from ``gen``), then the
    ``evidence`` expression when given (into ``$et`` / ``$ev``; it shares ``root``'s common
    subexpressions); returns 0 with the value in ``$rt`` / ``$rv``, 1 for a deopt (in either),
    2 when memory ran out."""
    gen.plan([root] if evidence is None else [root, evidence])
    r = gen.node(root)
    gen.emit(f"(global.set $rt (local.get {r[0]})) (global.set $rv (local.get {r[1]}))")
    if evidence is not None:
        e = gen.node(evidence)
        gen.emit(f"(global.set $et (local.get {e[0]})) (global.set $ev (local.get {e[1]}))")
    body = "\n".join(gen.lines)
    locs = " ".join(["(local $d i32)"] + gen.locals)
    return f"""
  ;; ---- generated: the program, inline; 0 = a value in $rt/$rv, 1 = deopt, 2 = out of memory ----
  (func $prog (result i32)
    {locs}
    (block $oom
      (block $deopt
{body}
        (return (i32.const 0)))
      (return (i32.const 1)))
    (i32.const 2))
"""
