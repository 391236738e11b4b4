"""Lowering a region (:mod:`auto.models.region`) to one capability artifact.

Public API::

    lower_region(region) -> str     # WebAssembly text (deterministic)
    compile_region(region) -> bytes # type-check every step program, lower, assemble

The module imports the three tool functions of module ``auto`` (``tool_call``, ``tool_result``,
``commit``; the ABI is in docs/architecture.md) and nothing else. It is the shared prelude (input
JSON, the one text field), the program runtime (``program_runtime.wat``), the region runtime
(``region_runtime.wat``: reading tool results), one function ``$step_<k>`` per :class:`Bind`
(the program's expression tree inline, :mod:`auto.codegen.program_expr`) and ``$eval``, which
runs the steps over locals (one tag and one payload per named value):

- ``Bind``: the variable must be a text (else deopt); it becomes ``$fv`` (what the program's
  ``Field`` reads) and the step function runs; a deopt of the program deopts the call;
- ``Call``: the request ``{"arguments":<object>,"tool":"<name>"}`` is written at the arena top
  (canonical JSON: the arguments are a record's JSON text or ``{key: value}`` with sorted keys),
  ``tool_call`` answers the result's length, the arena reserves it and ``tool_result`` copies it
  there; the value is that JSON text;
- ``Get``: ``$jget`` on the JSON text; ``Concat``: the parts written one after another (a
  ``var`` part: a text as its bytes, a JSON string value (a tool result) as its unescaped text,
  anything else as canonical JSON; a ``json`` part: canonical JSON, a text quoted and escaped); ``Commit``: the record
  ``{"answer":{...},"deopt":false}`` goes to ``commit``, which answers 0 to deopt;
- ``Branch``: the first case whose constant equals the (text) value, else deopt;
- ``Output``: ``{"answer":<value or record>,"deopt":false}`` moved to the output pointer.

Output per input, as a program artifact: ``{"answer":...,"deopt":false}``,
``{"answer":null,"deopt":true}`` or ``{"error":"<code>"}``. The host refuses any tool call that
breaks the rules of :mod:`auto_runtime.tools`; the artifact then traps and the call deopts.
"""

from __future__ import annotations

import json

from auto.models import region as R
from auto.canonical import canonical_json
from auto.errors import CodegenError
from auto.models.program.types import check, input_fields

from .prelude import base_tokens, fill, prelude, put_errors, wat_source
from .program_expr import T_BOOL, T_INT, T_JSON, T_NULL, T_TEXT, ExprGen, prog_func
from .static import FIRST, StaticData, check_static, heap_start, pages
from .table_lower import EQ_FUNC
from .wat import assemble, i64_const

DEOPT_OUTPUT = b'{"answer":null,"deopt":true}'
TOOL_IMPORTS = """  (import "auto" "tool_call" (func $tool_call (param i32 i32) (result i32)))
  (import "auto" "tool_result" (func $tool_result (param i32) (result i32)))
  (import "auto" "commit" (func $commit (param i32 i32) (result i32)))
"""


class _Gen:
    """Generates ``$eval``'s body and the step functions of one region."""

    def __init__(self, region, st: StaticData) -> None:
        self.region = region
        self.st = st
        self.vars: dict[str, tuple[str, str]] = {}
        self.locals: list[str] = []
        self.lines: list[str] = []
        self.funcs: list[str] = []
        self.n = 0

    def var(self, name: str, new: bool = False) -> tuple[str, str]:
        if name not in self.vars:
            if not new:
                raise CodegenError(f"region step reads {name!r}, which no earlier step binds")
            k = len(self.vars)
            self.vars[name] = (f"$x{k}t", f"$x{k}v")
            self.locals += [f"(local $x{k}t i32)", f"(local $x{k}v i64)"]
        return self.vars[name]

    def emit(self, line: str, ind: int = 3) -> None:
        self.lines.append("  " * ind + line)

    def text(self, s: str) -> str:
        return f"(i64.const {i64_const(self.st.packed(s.encode('utf-8')))})"

    def set(self, name: str, tag: str, payload: str, ind: int) -> None:
        t, v = self.var(name, new=True)
        self.emit(f"(local.set {t} {tag}) (local.set {v} {payload})", ind)

    def write_value(self, name: str, ind: int) -> None:
        """``$d = wval($d, value)``: a value as canonical JSON."""
        t, v = self.var(name)
        self.emit(f"(local.set $d (call $wval (local.get $d) (local.get {t}) (local.get {v})))", ind)

    def write_text(self, s: str, ind: int) -> None:
        self.emit(f"(local.set $d (call $wraw (local.get $d) {self.text(s)}))", ind)

    def write_record(self, pairs: list[tuple[str, str]], ind: int) -> None:
        """``{"k":<value>,...}`` with the keys sorted (canonical JSON)."""
        if not pairs:
            self.write_text("{}", ind)
            return
        for i, (k, var) in enumerate(sorted(pairs)):
            self.write_text(("{" if i == 0 else ",") + json.dumps(k, ensure_ascii=False) + ":", ind)
            self.write_value(var, ind)
        self.write_text("}", ind)

    def start_top(self, ind: int) -> None:
        self.emit("(local.set $s (global.get $top)) (local.set $d (local.get $s))", ind)

    def end_top(self, ind: int) -> None:
        self.emit("(br_if $oom (global.get $oom))", ind)
        self.emit("(global.set $top (i32.and (i32.add (local.get $d) (i32.const 7)) (i32.const -8)))", ind)

    # -- steps

    def steps(self, steps, ind: int) -> None:  # noqa: C901 - one dispatch over step kinds
        for s in steps:
            if isinstance(s, R.Bind):
                self.bind(s, ind)
            elif isinstance(s, R.Const):
                self.const(s, ind)
            elif isinstance(s, R.Get):
                t, v = self.var(s.var)
                self.emit(f"(global.set $rt (i32.const {T_NULL})) (global.set $rv (i64.const 0))", ind)
                self.emit(f"(if (i32.eq (local.get {t}) (i32.const {T_JSON})) "
                          f"(then (call $jget (local.get {v}) {self.text(json.dumps(s.key, ensure_ascii=False))})))", ind)
                self.emit("(br_if $oom (global.get $oom))", ind)
                self.set(s.name, "(global.get $rt)", "(global.get $rv)", ind)
            elif isinstance(s, R.Call):
                self.call(s, ind)
            elif isinstance(s, R.Concat):
                self.start_top(ind)
                for kind, part in s.parts:
                    if kind == "text":
                        self.write_text(part, ind)
                    elif kind == "json":  # canonical JSON of any value (a text quoted and escaped)
                        t, v = self.var(part)
                        self.emit(f"(local.set $d (call $wval (local.get $d) (local.get {t}) (local.get {v})))", ind)
                    else:  # a text as it is, a JSON string (a tool result) as its text, anything else as JSON
                        t, v = self.var(part)
                        self.emit(f"(if (i32.eq (local.get {t}) (i32.const {T_TEXT})) "
                                  f"(then (local.set $d (call $wraw (local.get $d) (local.get {v})))) "
                                  f"(else (if (i32.eq (local.get {t}) (i32.const {T_JSON})) "
                                  f"(then (local.set $d (call $wjtext (local.get $d) (local.get {v})))) "
                                  f"(else (local.set $d (call $wval (local.get $d) (local.get {t}) (local.get {v})))))))", ind)
                self.end_top(ind)
                self.set(s.name, f"(i32.const {T_TEXT})", "(call $pack (local.get $s) (i32.sub (local.get $d) (local.get $s)))", ind)
            elif isinstance(s, R.Commit):
                self.start_top(ind)
                self.write_text('{"answer":', ind)
                self.write_record([(n, n) for n in s.names], ind)
                self.write_text(',"deopt":false}', ind)
                self.emit("(br_if $oom (global.get $oom))", ind)
                self.emit("(br_if $deopt (i32.eqz (call $commit (local.get $s) (i32.sub (local.get $d) (local.get $s)))))", ind)
                self.emit("(global.set $top (local.get $s))", ind)
            elif isinstance(s, R.Branch):
                t, v = self.var(s.var)
                for value, sub in s.cases:
                    self.emit(f"(if (i32.and (i32.eq (local.get {t}) (i32.const {T_TEXT})) "
                              f"(call $eqb (local.get {v}) {self.text(value)}))", ind)
                    self.emit("(then", ind + 1)
                    self.steps(sub, ind + 2)
                    self.emit("))", ind + 1)
                self.emit("(br $deopt)", ind)
                return
            elif isinstance(s, R.Output):
                self.start_top(ind)
                self.write_text('{"answer":', ind)
                if isinstance(s.value, str):
                    self.write_value(s.value, ind)
                else:
                    self.write_record(list(s.value), ind)
                self.write_text(',"deopt":false}', ind)
                self.emit("(br_if $oom (global.get $oom))", ind)
                self.emit("(memory.copy (local.get $o) (local.get $s) (i32.sub (local.get $d) (local.get $s)))", ind)
                self.emit("(return (i32.add (local.get $o) (i32.sub (local.get $d) (local.get $s))))", ind)
                return
            else:
                raise CodegenError(f"cannot lower region step {s!r}")
        raise CodegenError("a region path must end with an Output or a Branch")

    def bind(self, s, ind: int) -> None:
        check(s.program)
        fields = input_fields(s.program)
        if fields - {s.var}:
            raise CodegenError(f"step {s.name}: the program reads {sorted(fields)}, expected only {s.var!r}")
        t, v = self.var(s.var)
        k = len(self.funcs)
        gen = ExprGen(s.var, self.st)
        text = prog_func(gen, s.program)
        if "(func $prog (result i32)" not in text:  # pragma: no cover - prog_func's own header
            raise CodegenError("unexpected step function text")
        self.funcs.append(text.replace("(func $prog (result i32)", f"(func $step_{k} (result i32)", 1))
        self.emit(f"(br_if $deopt (i32.ne (local.get {t}) (i32.const {T_TEXT})))", ind)
        self.emit(f"(global.set $fv (local.get {v}))", ind)
        self.emit(f"(local.set $r (call $step_{k}))", ind)
        self.emit("(br_if $deopt (i32.eq (local.get $r) (i32.const 1)))", ind)
        self.emit("(br_if $oom (i32.eq (local.get $r) (i32.const 2)))", ind)
        self.set(s.name, "(global.get $rt)", "(global.get $rv)", ind)

    def const(self, s, ind: int) -> None:
        v = s.value
        if v is None:
            self.set(s.name, f"(i32.const {T_NULL})", "(i64.const 0)", ind)
        elif isinstance(v, bool):
            self.set(s.name, f"(i32.const {T_BOOL})", f"(i64.const {int(v)})", ind)
        elif isinstance(v, int) and -(1 << 63) <= v < (1 << 63):
            self.set(s.name, f"(i32.const {T_INT})", f"(i64.const {v})", ind)
        elif isinstance(v, str):
            self.set(s.name, f"(i32.const {T_TEXT})", self.text(v), ind)
        else:  # any other JSON value: its canonical text
            self.set(s.name, f"(i32.const {T_JSON})", self.text(canonical_json(v)), ind)

    def call(self, s, ind: int) -> None:
        self.start_top(ind)
        self.write_text('{"arguments":', ind)
        if isinstance(s.args, str):
            t, v = self.var(s.args)
            self.emit(f"(br_if $deopt (i32.ne (local.get {t}) (i32.const {T_JSON})))", ind)
            self.emit(f"(local.set $d (call $wraw (local.get $d) (local.get {v})))", ind)
        else:
            self.write_record(list(s.args), ind)
        self.write_text(',"tool":' + json.dumps(s.tool, ensure_ascii=False) + "}", ind)
        self.emit("(br_if $oom (global.get $oom))", ind)
        self.emit("(local.set $n (call $tool_call (local.get $s) (i32.sub (local.get $d) (local.get $s))))", ind)
        self.emit("(global.set $top (local.get $s))", ind)
        self.emit("(local.set $p (call $reserve (i64.extend_i32_u (local.get $n))))", ind)
        self.emit("(br_if $oom (i32.eqz (local.get $p)))", ind)
        self.emit("(drop (call $tool_result (local.get $p)))", ind)
        self.set(s.name, f"(i32.const {T_JSON})", "(call $pack (local.get $p) (local.get $n))", ind)


def lower_region(region) -> str:
    """WebAssembly text of the capability artifact of ``region`` (deterministic).

    Raises:
        CodegenError: a step reads an unbound value, a Bind's program reads another field or
            cannot be lowered, or a path does not end with an Output or a Branch.
        ProgramTypeError: a Bind's program is ill-typed.
    """
    st = StaticData()
    errtab = put_errors(st)
    fname = region.field.encode("utf-8")
    if not fname:
        raise CodegenError("a region reads a non-empty text field")
    fld = st.put(fname)
    deopt_at = st.put(DEOPT_OUTPUT)
    esc = bytearray(256)
    for c, r in {0x22: b'"', 0x5C: b"\\", 0x0A: b"n", 0x0D: b"r", 0x09: b"t", 0x08: b"b", 0x0C: b"f"}.items():
        esc[c] = r[0]
    esctab = st.put(bytes(esc))
    hextab = st.put(b"0123456789abcdef")
    words = {k: i64_const(st.packed(v)) for k, v in (("TRUE", b"true"), ("FALSE", b"false"), ("NULL", b"null"))}
    gen = _Gen(region, st)
    t_in, v_in = gen.var(region.field, new=True)
    gen.steps(region.steps, 3)
    heap = heap_start(st.end)
    check_static(heap, "region")
    subst = {**base_tokens(True, errtab), "FIELD": fld if fname else FIRST, "FIELD_LEN": len(fname),
             "COUNTS": 16, "TOUCHED": 16, "COUNTS_BYTES": 0, "MASK4": 0, "HEAP": heap,
             "OUT_MAX": len(DEOPT_OUTPUT) + 64}
    pre = fill(prelude(), subst)
    lib = fill(wat_source("program_runtime.wat"), {"ESCTAB": esctab, "HEXTAB": hextab, **words})
    rlib = fill(wat_source("region_runtime.wat"), words)
    body = "\n".join(gen.lines)
    ev = f"""
  ;; ---- generated: the region's steps over its named values ----
  (func $eval (param $o i32) (result i32)
    (local $r i32) (local $s i32) (local $d i32) (local $n i32) (local $p i32)
    {' '.join(gen.locals)}
    (drop (call $string (global.get $sval) (global.get $scratch) (i32.const 0)))
    (local.set {t_in} (i32.const {T_TEXT}))
    (local.set {v_in} (call $pack (global.get $scratch) (i32.sub (global.get $dend) (global.get $scratch))))
    (global.set $top (i32.and (i32.add (local.get $o) (i32.const 7)) (i32.const -8)))
    (global.set $oom (i32.const 0))
    (block $oom
      (block $deopt
{body}
        (unreachable))
      (return (call $copy (local.get $o) (i32.const {deopt_at}) (i32.const {len(DEOPT_OUTPUT)}))))
    (call $copy_err (local.get $o) (i32.const 4)))
"""
    return ("(module\n" + TOOL_IMPORTS + f"  (memory (export \"memory\") {pages(heap)})\n"
            + "".join([pre, EQ_FUNC, lib, rlib, *gen.funcs, ev]) + "\n".join([st.segment()]) + "\n)\n")


def compile_region(region) -> bytes:
    """Lower and assemble ``region`` (:func:`lower_region`). Deterministic.

    Raises:
        CodegenError, ProgramTypeError: as :func:`lower_region`, or assembling failed.
    """
    return assemble(lower_region(region))


__all__ = ["DEOPT_OUTPUT", "TOOL_IMPORTS", "compile_region", "lower_region"]
