"""Lowering a program of the DSL (:mod:`auto.models.program.ast`) to a WebAssembly artifact.

Public API::

    lower_program(program, field, evidence=None) -> str   # WebAssembly text (deterministic)
    compile_program(program, evidence=None) -> bytes      # type-check, find the field, lower, assemble

The module is the shared prelude (``prelude.wat``, :mod:`auto.codegen.prelude`: allocator, JSON
validation of the task input, the field check ``$item`` / ``$is_field``, ``$string`` to decode
the field, ``run`` / ``run_batch``, error objects) plus a hand-written runtime library
(``program_runtime.wat``: string operations, number parsing, a Pike VM, JSON writers) plus one
generated function ``$prog`` that evaluates the whole expression tree inline, with no recursion
at run time (:mod:`auto.codegen.program_expr`). The same program always gives the same text.

Output per input (canonical JSON, byte for byte what ``auto.canonical.canonical_json`` writes for
the interpreter's result)::

    {"answer":<value>,"deopt":false}     the program produced a value
    {"answer":<value>,"deopt":false,"evidence":<value>}
                                         ... with an evidence expression: its value (what the
                                         program's guard decides from, auto_runtime.guard)
    {"answer":null,"deopt":true}         a Deopt node was reached (in the program or its evidence)
    {"error":"<code>"}                   bad input (as every artifact), or ``too_large`` when the
                                         intermediate values do not fit in memory (2 GiB cap of
                                         ``$ensure``, or the host's memory limit)

Values at run time are a tag (i32) and a payload (i64); :mod:`auto.codegen.program_expr` lists
them.

Per call the arena starts at the output pointer ``$o`` (8-aligned) and grows with ``$top``;
every allocation checks ``$ensure`` first (``$room`` / ``$reserve``) and sets ``$oom`` instead of
writing out of bounds. When the program is done the output object is written at the top of the
arena and moved down to ``$o`` (``memory.copy`` allows overlap). Memory per call is linear in the
input: views cost nothing; case mapping and ``Join`` copy their text; ``Split`` allocates 8 bytes
per part; records hold their JSON text (at most 6 bytes per text byte for ``\\u00XX`` escapes);
each ``Search`` uses ``O(instructions * slots)`` bytes, released when it returns.

Regexes: each pattern's Pike-VM program is stored in a data segment
(:mod:`auto.codegen.program_regex`) and run by the one shared ``$search``: leftmost-first
(Python ``re.search``) Pike VM (Pike 1987; R. Cox, "Regular Expression Matching: the Virtual
Machine Approach", 2009), a new lowest-priority thread at every code-point start until a thread
matched, each pc added once per step (a stamp array), the epsilon closure walked with an explicit
stack of at most ``2 * instructions + 2`` entries. Time ``O(len * instructions * slots)``.
"""

from __future__ import annotations

from auto.errors import CodegenError, CompileError
from auto.models.program.types import check, input_fields

from .prelude import any_object, base_tokens, fill, module_text, prelude, put_errors, wat_source
from .program_expr import ExprGen, prog_func
from .static import FIRST, StaticData, check_static, heap_start, pages
from .table_lower import EQ_FUNC
from .wat import assemble, i64_const

OK_PREFIX = b'{"answer":'
OK_SUFFIX = b',"deopt":false}'
EVIDENCE_INFIX = b',"deopt":false,"evidence":'
DEOPT_OUTPUT = b'{"answer":null,"deopt":true}'


def lower_program(program, field: str | None, evidence=None) -> str:
    """WebAssembly text of the artifact for ``program`` over the input's string field ``field``.

    Deterministic: the same program and field give the same text.

    Args:
        program: the root node of a program (:mod:`auto.models.program.ast`), assumed type-checked
            (:func:`compile_program` checks it).
        field: the task input's string field every :class:`~auto.models.program.ast.Field` reads;
            ``None`` for a program without a Field (then any JSON object is a valid input).
        evidence: an optional second expression over the same field, evaluated after the
            program when it produced a value; the output then carries its value as
            ``"evidence"``. Common subexpressions of the two are computed once.

    Returns:
        The WAT module text: exports exactly ``memory``, ``alloc``, ``run``, ``run_batch``; no
        imports.

    Raises:
        CodegenError: a node the backend cannot lower (an unknown node, a Field of another name,
            a constant outside its type's range, a Compare the DSL does not define, a regex that
            does not compile, a group the regex lacks, duplicate record keys) or static data over
            1 GiB.
    """
    if field is not None and (not isinstance(field, str) or not field):
        raise CodegenError("the input field name must be a non-empty string or None")
    st = StaticData()
    errtab = put_errors(st)
    fname = (field or "").encode("utf-8")
    fld = st.put(fname) if fname else FIRST
    ok_prefix, ok_suffix = i64_const(st.packed(OK_PREFIX)), i64_const(st.packed(OK_SUFFIX))
    if evidence is not None:
        ev_infix, close = i64_const(st.packed(EVIDENCE_INFIX)), i64_const(st.packed(b"}"))
    deopt_at = st.put(DEOPT_OUTPUT)
    esc = bytearray(256)
    for c, r in {0x22: b'"', 0x5C: b"\\", 0x0A: b"n", 0x0D: b"r", 0x09: b"t", 0x08: b"b", 0x0C: b"f"}.items():
        esc[c] = r[0]
    esctab = st.put(bytes(esc))
    hextab = st.put(b"0123456789abcdef")
    words = {k: st.packed(v) for k, v in (("TRUE", b"true"), ("FALSE", b"false"), ("NULL", b"null"))}
    gen = ExprGen(field, st)
    prog = prog_func(gen, program, evidence)
    heap = heap_start(st.end)
    check_static(heap, "program")
    out_max = max(len(DEOPT_OUTPUT), 32) + 32
    subst = {**base_tokens(True, errtab),
             "FIELD": fld, "FIELD_LEN": len(fname),
             # the specialist's counts are unused here: $clear / $frame are never called
             "COUNTS": 16, "TOUCHED": 16, "COUNTS_BYTES": 0, "MASK4": 0,
             "HEAP": heap, "OUT_MAX": out_max}
    # no Field node: any JSON object is a valid input (as a table-only memo)
    pre = fill(prelude() if field is not None else any_object(prelude()), subst)
    lib = fill(wat_source("program_runtime.wat"), {"ESCTAB": esctab, "HEXTAB": hextab,
                                                   **{k: i64_const(v) for k, v in words.items()}})
    ev = f"""
  ;; ---- generated: decode the field, run the program, write the output object at $o ----
  (func $eval (param $o i32) (result i32)
    (local $r i32) (local $s i32) (local $d i32)
    {{decode}}
    (global.set $fv (call $pack (global.get $scratch) (i32.sub (global.get $dend) (global.get $scratch))))
    (global.set $top (i32.and (i32.add (local.get $o) (i32.const 7)) (i32.const -8)))
    (global.set $oom (i32.const 0))
    (local.set $r (call $prog))
    (if (i32.eq (local.get $r) (i32.const 1))
      (then (return (call $copy (local.get $o) (i32.const {deopt_at}) (i32.const {len(DEOPT_OUTPUT)})))))
    (if (i32.eqz (local.get $r))
      (then
        (local.set $s (global.get $top))
        (local.set $d (call $wraw (local.get $s) (i64.const {ok_prefix})))
        (local.set $d (call $wval (local.get $d) (global.get $rt) (global.get $rv)))
        {{suffix}}
        (if (i32.eqz (global.get $oom))
          (then
            (memory.copy (local.get $o) (local.get $s) (i32.sub (local.get $d) (local.get $s)))
            (return (i32.add (local.get $o) (i32.sub (local.get $d) (local.get $s))))))))
    (call $copy_err (local.get $o) (i32.const 4)))
"""
    suffix = ("(local.set $d (call $wraw (local.get $d) (i64.const {ok_suffix})))".format(ok_suffix=ok_suffix)
              if evidence is None else
              f"(local.set $d (call $wraw (local.get $d) (i64.const {ev_infix})))\n"
              "        (local.set $d (call $wval (local.get $d) (global.get $et) (global.get $ev)))\n"
              f"        (local.set $d (call $wraw (local.get $d) (i64.const {close})))")
    ev = ev.replace("{suffix}", suffix)
    ev = ev.replace("{decode}", "(drop (call $string (global.get $sval) (global.get $scratch) (i32.const 0)))"
                    if field is not None else "(global.set $dend (global.get $scratch))")
    return module_text(pages(heap), [pre, EQ_FUNC, lib, prog, ev], [st.segment()])


def compile_program(program, evidence=None) -> bytes:
    """Type-check ``program`` (and ``evidence``), find their one input field, lower and assemble.

    Returns:
        The module bytes (no manifest yet; see :mod:`auto.emit`). Deterministic.

    Raises:
        CompileError: the program and its evidence read more than one input field between them.
        CodegenError: lowering or assembling failed (see :func:`lower_program`).
        Whatever :func:`auto.models.program.types.check` raises for an ill-typed program or evidence.
    """
    check(program)
    names = input_fields(program)
    if evidence is not None:
        check(evidence)
        names |= input_fields(evidence)
    if len(names) > 1:  # check() refuses this already; kept for programs checked elsewhere
        raise CompileError(f"a program reads at most one input field, this one reads {sorted(names)}")
    return assemble(lower_program(program, names.pop() if names else None, evidence))


__all__ = ["DEOPT_OUTPUT", "EVIDENCE_INFIX", "OK_PREFIX", "OK_SUFFIX", "compile_program", "lower_program"]
