"""Lowering a program of the DSL (:mod:`auto.extract.ast`) to a WebAssembly artifact.

Public API::

    lower_program(program, field) -> str   # WebAssembly text (deterministic)
    compile_program(program) -> bytes      # type-check, find the field, lower, assemble

The module is the shared prelude (``prelude.wat``: allocator, JSON validation of the task input,
the field check ``$item`` / ``$is_field``, ``$string`` to decode the field, ``run`` /
``run_batch``, error objects) plus a hand-written runtime library (:data:`LIBRARY`: string
operations, number parsing, a Pike VM, JSON writers) plus one generated function ``$prog`` that
evaluates the whole expression tree inline (no recursion at run time). The same program always
gives the same text.

Output per input (canonical JSON, byte for byte what ``auto.canonical.canonical_json`` writes for
the interpreter's result)::

    {"answer":<value>,"deopt":false}     the program produced a value
    {"answer":null,"deopt":true}         a Deopt node was reached
    {"error":"<code>"}                   bad input (as every artifact), or ``too_large`` when the
                                         intermediate values do not fit in memory (2 GiB cap of
                                         ``$ensure``, or the host's memory limit)

Values at run time are a tag (i32) and a payload (i64)::

    tag 0 null    payload unused
    tag 1 int     i64
    tag 2 float   i64 ten-thousandths (|v| < 10**18)
    tag 3 bool    0 / 1
    tag 4 text    (ptr << 32) | len of UTF-8 bytes (a view into the input or the arena)
    tag 5 list    (ptr << 32) | count of an array of ``count`` i64 text payloads
    tag 6 record  (ptr << 32) | len of the record's canonical JSON text

Per call the arena starts at the output pointer ``$o`` (8-aligned) and grows with ``$top``;
every allocation checks ``$ensure`` first (``$room`` / ``$reserve``) and sets ``$oom`` instead of
writing out of bounds. When the program is done the output object is written at the top of the
arena and moved down to ``$o`` (``memory.copy`` allows overlap). Memory per call is linear in the
input: views cost nothing; case mapping and ``Join`` copy their text; ``Split`` allocates 8 bytes
per part; records hold their JSON text (at most 6 bytes per text byte for ``\\u00XX`` escapes);
each ``Search`` uses ``O(instructions * slots)`` bytes, released when it returns.

Regexes: each pattern is compiled by :func:`auto.extract.regex.compile_regex` to a Pike-VM program
(the contract: ops 0 BYTE set, 1 SPLIT x y, 2 JMP x, 3 SAVE slot, 4 ASSERT kind, 5 MATCH) stored
in a data segment as 12-byte instructions ``(op, a, b)`` (i32 little-endian; a BYTE's ``a`` is the
absolute address of its 32-byte bitmap), run by the one shared ``$search``: leftmost-first
(Python ``re.search``) Pike VM (Pike 1987; R. Cox, "Regular Expression Matching: the Virtual
Machine Approach", 2009), a new lowest-priority thread at every code-point start until a thread
matched, each pc added once per step (a stamp array), the epsilon closure walked with an explicit
stack of at most ``2 * instructions + 2`` entries. Time ``O(len * instructions * slots)``.
"""

from __future__ import annotations

import json
import struct
from decimal import Decimal, InvalidOperation

from auto.errors import CodegenError, CompileError

from .kernel import STRING_FAST
from .layout import HEAP_SLACK, MAX_BATCH, MAX_INPUT, PAGE, _align, put_errors, wat_bytes
from .lower import fill, prelude
from .table_lower import EQ_FUNC, ITEM_ANY_OBJECT

OK_PREFIX = b'{"answer":'
OK_SUFFIX = b',"deopt":false}'
DEOPT_OUTPUT = b'{"answer":null,"deopt":true}'
STATIC_LIMIT = 1 << 30
"""Largest static data (constants, regex tables) in bytes."""
I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1
FLOAT_SCALE = 10_000
"""Floats are i64 counts of ten-thousandths (:mod:`auto.extract.ast`)."""
FLOAT_LIMIT = 10 ** 14 * FLOAT_SCALE
"""Exclusive bound on ``|v|`` of a float in ten-thousandths (``|value| < 10**14``)."""
I32_MAX = (1 << 31) - 1

T_NULL, T_INT, T_FLOAT, T_BOOL, T_TEXT, T_LIST, T_JSON = range(7)

# The hand-written runtime library. Globals: $fv (the field's text payload), $top (arena top),
# $oom (an allocation failed), $pv (a parsed number), $rt / $rv (the program's result), and the
# Pike VM's state ($vm_*).
LIBRARY = r"""
  ;; ---- program runtime (auto.codegen.program_lower) ----
  (global $fv (mut i64) (i64.const 0))
  (global $top (mut i32) (i32.const 0))
  (global $oom (mut i32) (i32.const 0))
  (global $pv (mut i64) (i64.const 0))
  (global $rt (mut i32) (i32.const 0))
  (global $rv (mut i64) (i64.const 0))
  (global $vm_prog (mut i32) (i32.const 0))
  (global $vm_ns (mut i32) (i32.const 0))
  (global $vm_mark (mut i32) (i32.const 0))
  (global $vm_cur (mut i32) (i32.const 0))
  (global $vm_stk (mut i32) (i32.const 0))
  (global $vm_tp (mut i32) (i32.const 0))
  (global $vm_tn (mut i32) (i32.const 0))

  (func $ptr (param $x i64) (result i32) (i32.wrap_i64 (i64.shr_u (local.get $x) (i64.const 32))))
  (func $len (param $x i64) (result i32) (i32.wrap_i64 (local.get $x)))

  ;; can n more bytes be written at d? (grows memory; sets $oom and answers 0 when it cannot)
  (func $room (param $d i32) (param $n i64) (result i32)
    (if (call $ensure (i64.add (i64.extend_i32_u (local.get $d)) (local.get $n)))
      (then (return (i32.const 1))))
    (global.set $oom (i32.const 1))
    (i32.const 0))

  ;; n bytes at the arena top (8-aligned) -> their address, or 0 (and $oom set)
  (func $reserve (param $n i64) (result i32)
    (local $p i32)
    (local.set $p (global.get $top))
    (if (i32.eqz (call $room (local.get $p) (local.get $n))) (then (return (i32.const 0))))
    (global.set $top (i32.and (i32.add (i32.add (local.get $p) (i32.wrap_i64 (local.get $n)))
                                       (i32.const 7)) (i32.const -8)))
    (local.get $p))

  ;; ---- text ----
  ;; ASCII lower-case (up = 0) or upper-case (up = 1) copy of text x
  (func $case (param $x i64) (param $up i32) (result i64)
    (local $s i32) (local $n i32) (local $d i32) (local $i i32) (local $c i32) (local $lo i32)
    (local.set $s (call $ptr (local.get $x)))
    (local.set $n (call $len (local.get $x)))
    (local.set $d (call $reserve (i64.extend_i32_u (local.get $n))))
    (if (i32.eqz (local.get $d)) (then (return (i64.const 0))))
    (local.set $lo (select (i32.const 97) (i32.const 65) (local.get $up)))
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (local.set $c (i32.load8_u (i32.add (local.get $s) (local.get $i))))
        (if (i32.lt_u (i32.sub (local.get $c) (local.get $lo)) (i32.const 26))
          (then (local.set $c (i32.xor (local.get $c) (i32.const 32)))))
        (i32.store8 (i32.add (local.get $d) (local.get $i)) (local.get $c))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $l)))
    (call $pack (local.get $d) (local.get $n)))

  ;; is c one of the ASCII whitespace bytes " \t\n\r\f\v"?
  (func $isws (param $c i32) (result i32)
    (i32.or (i32.eq (local.get $c) (i32.const 32))
            (i32.lt_u (i32.sub (local.get $c) (i32.const 9)) (i32.const 5))))

  ;; text x without ASCII whitespace at either end (a view)
  (func $strip (param $x i64) (result i64)
    (local $s i32) (local $e i32)
    (local.set $s (call $ptr (local.get $x)))
    (local.set $e (i32.add (local.get $s) (call $len (local.get $x))))
    (block $d1
      (loop $l1
        (br_if $d1 (i32.ge_u (local.get $s) (local.get $e)))
        (br_if $d1 (i32.eqz (call $isws (i32.load8_u (local.get $s)))))
        (local.set $s (i32.add (local.get $s) (i32.const 1)))
        (br $l1)))
    (block $d2
      (loop $l2
        (br_if $d2 (i32.ge_u (local.get $s) (local.get $e)))
        (br_if $d2 (i32.eqz (call $isws (i32.load8_u (i32.sub (local.get $e) (i32.const 1))))))
        (local.set $e (i32.sub (local.get $e) (i32.const 1)))
        (br $l2)))
    (call $pack (local.get $s) (i32.sub (local.get $e) (local.get $s))))

  ;; are texts x and y byte-equal?
  (func $eqb (param $x i64) (param $y i64) (result i32)
    (local $n i32)
    (local.set $n (call $len (local.get $x)))
    (if (i32.ne (local.get $n) (call $len (local.get $y))) (then (return (i32.const 0))))
    (call $eq (call $ptr (local.get $x)) (call $ptr (local.get $y)) (local.get $n)))

  ;; offset (from s) of the first occurrence of the m bytes at q in [s + from, s + n), or -1
  (func $find (param $s i32) (param $n i32) (param $q i32) (param $m i32) (param $from i32) (result i32)
    (local $i i32) (local $last i32) (local $c0 i32)
    (if (i32.eqz (local.get $m)) (then (return (local.get $from))))
    (if (i32.gt_u (local.get $m) (local.get $n)) (then (return (i32.const -1))))
    (local.set $last (i32.sub (local.get $n) (local.get $m)))
    (local.set $c0 (i32.load8_u (local.get $q)))
    (local.set $i (local.get $from))
    (block $done
      (loop $l
        (br_if $done (i32.gt_u (local.get $i) (local.get $last)))
        (if (i32.eq (i32.load8_u (i32.add (local.get $s) (local.get $i))) (local.get $c0))
          (then
            (if (call $eq (i32.add (local.get $s) (local.get $i)) (local.get $q) (local.get $m))
              (then (return (local.get $i))))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $l)))
    (i32.const -1))

  ;; kind 0: s in x; 1: x.startswith(s); 2: x.endswith(s)
  (func $has (param $x i64) (param $s i64) (param $kind i32) (result i32)
    (local $n i32) (local $m i32)
    (local.set $n (call $len (local.get $x)))
    (local.set $m (call $len (local.get $s)))
    (if (i32.eqz (local.get $kind))
      (then (return (i32.ge_s (call $find (call $ptr (local.get $x)) (local.get $n)
                                          (call $ptr (local.get $s)) (local.get $m) (i32.const 0))
                              (i32.const 0)))))
    (if (i32.gt_u (local.get $m) (local.get $n)) (then (return (i32.const 0))))
    (call $eq (i32.add (call $ptr (local.get $x))
                       (select (i32.const 0) (i32.sub (local.get $n) (local.get $m))
                               (i32.eq (local.get $kind) (i32.const 1))))
              (call $ptr (local.get $s)) (local.get $m)))

  ;; x.split(sep) (sep non-empty) -> list payload (an array of text payloads in the arena)
  (func $split (param $x i64) (param $sep i64) (result i64)
    (local $s i32) (local $n i32) (local $q i32) (local $m i32) (local $k i32) (local $i i32)
    (local $a i32) (local $at i32) (local $j i32)
    (local.set $s (call $ptr (local.get $x)))
    (local.set $n (call $len (local.get $x)))
    (local.set $q (call $ptr (local.get $sep)))
    (local.set $m (call $len (local.get $sep)))
    (local.set $k (i32.const 1))
    (block $d1
      (loop $l1
        (local.set $i (call $find (local.get $s) (local.get $n) (local.get $q) (local.get $m) (local.get $i)))
        (br_if $d1 (i32.lt_s (local.get $i) (i32.const 0)))
        (local.set $k (i32.add (local.get $k) (i32.const 1)))
        (local.set $i (i32.add (local.get $i) (local.get $m)))
        (br $l1)))
    (local.set $a (call $reserve (i64.shl (i64.extend_i32_u (local.get $k)) (i64.const 3))))
    (if (i32.eqz (local.get $a)) (then (return (i64.const 0))))
    (local.set $i (i32.const 0))
    (block $d2
      (loop $l2
        (local.set $at (call $find (local.get $s) (local.get $n) (local.get $q) (local.get $m) (local.get $i)))
        (br_if $d2 (i32.lt_s (local.get $at) (i32.const 0)))
        (i64.store (i32.add (local.get $a) (i32.shl (local.get $j) (i32.const 3)))
          (call $pack (i32.add (local.get $s) (local.get $i)) (i32.sub (local.get $at) (local.get $i))))
        (local.set $j (i32.add (local.get $j) (i32.const 1)))
        (local.set $i (i32.add (local.get $at) (local.get $m)))
        (br $l2)))
    (i64.store (i32.add (local.get $a) (i32.shl (local.get $j) (i32.const 3)))
      (call $pack (i32.add (local.get $s) (local.get $i)) (i32.sub (local.get $n) (local.get $i))))
    (call $pack (local.get $a) (local.get $k)))

  ;; sep.join(list xs) -> text in the arena
  (func $join (param $xs i64) (param $sep i64) (result i64)
    (local $a i32) (local $k i32) (local $i i32) (local $tot i64) (local $d i32) (local $o i32)
    (local $e i64) (local $m i32)
    (local.set $a (call $ptr (local.get $xs)))
    (local.set $k (call $len (local.get $xs)))
    (local.set $m (call $len (local.get $sep)))
    (block $d1
      (loop $l1
        (br_if $d1 (i32.ge_u (local.get $i) (local.get $k)))
        (local.set $tot (i64.add (local.get $tot) (i64.extend_i32_u
          (call $len (i64.load (i32.add (local.get $a) (i32.shl (local.get $i) (i32.const 3))))))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $l1)))
    (if (local.get $k)
      (then (local.set $tot (i64.add (local.get $tot)
        (i64.mul (i64.extend_i32_u (i32.sub (local.get $k) (i32.const 1))) (i64.extend_i32_u (local.get $m)))))))
    (if (i64.gt_u (local.get $tot) (i64.const 0x7fff0000))
      (then (global.set $oom (i32.const 1)) (return (i64.const 0))))
    (local.set $d (call $reserve (local.get $tot)))
    (if (i32.eqz (local.get $d)) (then (return (i64.const 0))))
    (local.set $o (local.get $d))
    (local.set $i (i32.const 0))
    (block $d2
      (loop $l2
        (br_if $d2 (i32.ge_u (local.get $i) (local.get $k)))
        (if (local.get $i)
          (then (local.set $o (call $copy (local.get $o) (call $ptr (local.get $sep)) (local.get $m)))))
        (local.set $e (i64.load (i32.add (local.get $a) (i32.shl (local.get $i) (i32.const 3)))))
        (local.set $o (call $copy (local.get $o) (call $ptr (local.get $e)) (call $len (local.get $e))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $l2)))
    (call $pack (local.get $d) (i32.sub (local.get $o) (local.get $d))))

  ;; list xs [i] (i < 0 counts from the end) -> text payload, or -1 when out of range
  (func $index (param $xs i64) (param $i i32) (result i64)
    (local $k i32)
    (local.set $k (call $len (local.get $xs)))
    (if (i32.lt_s (local.get $i) (i32.const 0)) (then (local.set $i (i32.add (local.get $i) (local.get $k)))))
    (if (i32.or (i32.lt_s (local.get $i) (i32.const 0)) (i32.ge_s (local.get $i) (local.get $k)))
      (then (return (i64.const -1))))
    (i64.load (i32.add (call $ptr (local.get $xs)) (i32.shl (local.get $i) (i32.const 3)))))

  ;; byte offset of code point k (0 <= k <= code points) in the n bytes at s
  (func $cp_off (param $s i32) (param $n i32) (param $k i32) (result i32)
    (local $i i32)
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (if (i32.ne (i32.and (i32.load8_u (i32.add (local.get $s) (local.get $i))) (i32.const 0xC0))
                    (i32.const 0x80))
          (then
            (br_if $done (i32.eqz (local.get $k)))
            (local.set $k (i32.sub (local.get $k) (i32.const 1)))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $l)))
    (local.get $i))

  ;; a Python slice index (has = 0: the default dflt) normalized against length n
  (func $norm (param $i i32) (param $has i32) (param $dflt i32) (param $n i32) (result i32)
    (if (i32.eqz (local.get $has)) (then (return (local.get $dflt))))
    (if (i32.lt_s (local.get $i) (i32.const 0))
      (then
        (local.set $i (i32.add (local.get $i) (local.get $n)))
        (if (i32.lt_s (local.get $i) (i32.const 0)) (then (local.set $i (i32.const 0))))))
    (if (i32.gt_s (local.get $i) (local.get $n)) (then (local.set $i (local.get $n))))
    (local.get $i))

  ;; x[start:stop] in code points (flags: bit 0 start given, bit 1 stop given) -> a view
  (func $slice (param $x i64) (param $start i32) (param $stop i32) (param $flags i32) (result i64)
    (local $s i32) (local $n i32) (local $cps i32) (local $i i32) (local $a i32) (local $b i32)
    (local.set $s (call $ptr (local.get $x)))
    (local.set $n (call $len (local.get $x)))
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (local.set $cps (i32.add (local.get $cps)
          (i32.ne (i32.and (i32.load8_u (i32.add (local.get $s) (local.get $i))) (i32.const 0xC0))
                  (i32.const 0x80))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $l)))
    (local.set $a (call $norm (local.get $start) (i32.and (local.get $flags) (i32.const 1))
                              (i32.const 0) (local.get $cps)))
    (local.set $b (call $norm (local.get $stop) (i32.and (local.get $flags) (i32.const 2))
                              (local.get $cps) (local.get $cps)))
    (if (i32.le_s (local.get $b) (local.get $a)) (then (return (call $pack (local.get $s) (i32.const 0)))))
    (local.set $a (call $cp_off (local.get $s) (local.get $n) (local.get $a)))
    (local.set $b (call $cp_off (local.get $s) (local.get $n) (local.get $b)))
    (call $pack (i32.add (local.get $s) (local.get $a)) (i32.sub (local.get $b) (local.get $a))))

  ;; ---- numbers ----
  ;; Parse the stripped text x: mode 0 int, 1 float, 2 money (one optional "$" after the sign).
  ;; Grammar: -? $? digits (a comma only between two digits) then, for modes 1 and 2, an optional
  ;; "." and 1-4 digits. Returns 1 and sets $pv (an i64; ten-thousandths for floats), or 0 (null):
  ;; a syntax error, an int outside i64, or |float| >= 10**14.
  (func $parse (param $x i64) (param $mode i32) (result i32)
    (local $p i32) (local $e i32) (local $neg i32) (local $acc i64) (local $d i64) (local $c i32)
    (local $lim i64) (local $nd i32) (local $fd i32) (local $fr i64)
    (local.set $x (call $strip (local.get $x)))
    (local.set $p (call $ptr (local.get $x)))
    (local.set $e (i32.add (local.get $p) (call $len (local.get $x))))
    (if (i32.and (i32.lt_u (local.get $p) (local.get $e)) (i32.eq (i32.load8_u (local.get $p)) (i32.const 45)))
      (then (local.set $neg (i32.const 1)) (local.set $p (i32.add (local.get $p) (i32.const 1)))))
    (if (i32.and (i32.eq (local.get $mode) (i32.const 2))
                 (i32.and (i32.lt_u (local.get $p) (local.get $e)) (i32.eq (i32.load8_u (local.get $p)) (i32.const 36))))
      (then (local.set $p (i32.add (local.get $p) (i32.const 1)))))
    ;; magnitude limit: ints 2**63 - 1 (2**63 when negative); floats 10**14 - 1 (integer part)
    (local.set $lim (select (i64.add (i64.const 0x7fffffffffffffff) (i64.extend_i32_u (local.get $neg)))
                            (i64.const 99999999999999) (i32.eqz (local.get $mode))))
    (block $int
      (loop $l
        (br_if $int (i32.ge_u (local.get $p) (local.get $e)))
        (local.set $c (i32.load8_u (local.get $p)))
        (if (i32.lt_u (i32.sub (local.get $c) (i32.const 48)) (i32.const 10))
          (then
            (local.set $d (i64.extend_i32_u (i32.sub (local.get $c) (i32.const 48))))
            (if (i64.gt_u (local.get $acc) (i64.div_u (i64.sub (local.get $lim) (local.get $d)) (i64.const 10)))
              (then (return (i32.const 0))))
            (local.set $acc (i64.add (i64.mul (local.get $acc) (i64.const 10)) (local.get $d)))
            (local.set $nd (i32.add (local.get $nd) (i32.const 1)))
            (local.set $p (i32.add (local.get $p) (i32.const 1)))
            (br $l)))
        (br_if $int (i32.ne (local.get $c) (i32.const 44)))
        ;; a comma: a digit before it (nd > 0 and the previous byte) and a digit after it
        (br_if $int (i32.eqz (local.get $nd)))
        (br_if $int (i32.ge_u (i32.sub (i32.load8_u (i32.sub (local.get $p) (i32.const 1))) (i32.const 48)) (i32.const 10)))
        (br_if $int (i32.ge_u (i32.add (local.get $p) (i32.const 1)) (local.get $e)))
        (br_if $int (i32.ge_u (i32.sub (i32.load8_u offset=1 (local.get $p)) (i32.const 48)) (i32.const 10)))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (br $l)))
    (if (i32.eqz (local.get $nd)) (then (return (i32.const 0))))
    (if (i32.eqz (local.get $mode))
      (then
        (if (i32.ne (local.get $p) (local.get $e)) (then (return (i32.const 0))))
        (global.set $pv (select (i64.sub (i64.const 0) (local.get $acc)) (local.get $acc) (local.get $neg)))
        (return (i32.const 1))))
    (if (i32.lt_u (local.get $p) (local.get $e))
      (then
        (if (i32.ne (i32.load8_u (local.get $p)) (i32.const 46)) (then (return (i32.const 0))))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (block $fd
          (loop $l
            (br_if $fd (i32.ge_u (local.get $p) (local.get $e)))
            (local.set $c (i32.sub (i32.load8_u (local.get $p)) (i32.const 48)))
            (if (i32.ge_u (local.get $c) (i32.const 10)) (then (return (i32.const 0))))
            (if (i32.ge_u (local.get $fd) (i32.const 4)) (then (return (i32.const 0))))
            (local.set $fr (i64.add (i64.mul (local.get $fr) (i64.const 10)) (i64.extend_i32_u (local.get $c))))
            (local.set $fd (i32.add (local.get $fd) (i32.const 1)))
            (local.set $p (i32.add (local.get $p) (i32.const 1)))
            (br $l)))
        (if (i32.eqz (local.get $fd)) (then (return (i32.const 0))))
        (loop $pad
          (if (i32.lt_u (local.get $fd) (i32.const 4))
            (then
              (local.set $fr (i64.mul (local.get $fr) (i64.const 10)))
              (local.set $fd (i32.add (local.get $fd) (i32.const 1)))
              (br $pad))))))
    (local.set $acc (i64.add (i64.mul (local.get $acc) (i64.const 10000)) (local.get $fr)))
    (global.set $pv (select (i64.sub (i64.const 0) (local.get $acc)) (local.get $acc) (local.get $neg)))
    (i32.const 1))

  ;; ---- JSON writers: each checks $room first and writes nothing when memory is exhausted ----
  ;; the unsigned decimal digits of v at d
  (func $wdigits (param $d i32) (param $v i64) (result i32)
    (local $n i32) (local $t i64) (local $k i32)
    (local.set $n (i32.const 1))
    (local.set $t (local.get $v))
    (block $done
      (loop $l
        (br_if $done (i64.lt_u (local.get $t) (i64.const 10)))
        (local.set $t (i64.div_u (local.get $t) (i64.const 10)))
        (local.set $n (i32.add (local.get $n) (i32.const 1)))
        (br $l)))
    (local.set $k (local.get $n))
    (loop $l
      (local.set $k (i32.sub (local.get $k) (i32.const 1)))
      (i32.store8 (i32.add (local.get $d) (local.get $k))
        (i32.add (i32.const 48) (i32.wrap_i64 (i64.rem_u (local.get $v) (i64.const 10)))))
      (local.set $v (i64.div_u (local.get $v) (i64.const 10)))
      (br_if $l (local.get $k)))
    (i32.add (local.get $d) (local.get $n)))

  ;; an i64 as Python's str(int)
  (func $wint (param $d i32) (param $v i64) (result i32)
    (if (i32.eqz (call $room (local.get $d) (i64.const 24))) (then (return (local.get $d))))
    (if (i64.lt_s (local.get $v) (i64.const 0))
      (then
        (i32.store8 (local.get $d) (i32.const 45))
        (local.set $d (i32.add (local.get $d) (i32.const 1)))
        (local.set $v (i64.sub (i64.const 0) (local.get $v)))))
    (call $wdigits (local.get $d) (local.get $v)))

  ;; k (0..4) fraction digits of f, zero-padded, at d
  (func $wfrac (param $d i32) (param $f i64) (param $k i32) (result i32)
    (local $e i32)
    (local.set $e (i32.add (local.get $d) (local.get $k)))
    (block $done
      (loop $l
        (br_if $done (i32.eqz (local.get $k)))
        (local.set $k (i32.sub (local.get $k) (i32.const 1)))
        (i32.store8 (i32.add (local.get $d) (local.get $k))
          (i32.add (i32.const 48) (i32.wrap_i64 (i64.rem_u (local.get $f) (i64.const 10)))))
        (local.set $f (i64.div_u (local.get $f) (i64.const 10)))
        (br $l)))
    (local.get $e))

  ;; A float of v ten-thousandths as Python's repr(v / 10000) (the binary64 nearest to the
  ;; exact value, printed as the shortest decimal that reads back as it; ties to even digits).
  ;; Below 10**11 (at most 15 significant digits) that is the exact decimal without trailing
  ;; zeros ("1.5", "-2.0"); above, the shortest of the value rounded to k = 0..4 decimals whose
  ;; nearest binary64 is the same. Exact integer arithmetic: the binary64 is D / 2**16 there.
  (func $wfloat (param $d i32) (param $v i64) (result i32)
    (local $m i64) (local $f i64) (local $k i32) (local $x f64) (local $dd i64) (local $dh i64)
    (local $dl i64) (local $bits i64) (local $u i64) (local $p i64) (local $num i64) (local $r i64)
    (local $n i64) (local $diff i64) (local $lim i64) (local $ok i32) (local $even i32)
    (if (i32.eqz (call $room (local.get $d) (i64.const 32))) (then (return (local.get $d))))
    (local.set $m (local.get $v))
    (if (i64.lt_s (local.get $v) (i64.const 0))
      (then
        (i32.store8 (local.get $d) (i32.const 45))
        (local.set $d (i32.add (local.get $d) (i32.const 1)))
        (local.set $m (i64.sub (i64.const 0) (local.get $v)))))
    (if (i64.lt_u (local.get $m) (i64.const 1000000000000000))
      (then
        (local.set $d (call $wdigits (local.get $d) (i64.div_u (local.get $m) (i64.const 10000))))
        (i32.store8 (local.get $d) (i32.const 46))
        (local.set $d (i32.add (local.get $d) (i32.const 1)))
        (local.set $f (i64.rem_u (local.get $m) (i64.const 10000)))
        (if (i64.eqz (local.get $f))
          (then
            (i32.store8 (local.get $d) (i32.const 48))
            (return (i32.add (local.get $d) (i32.const 1)))))
        (local.set $k (i32.const 4))
        (block $done
          (loop $l
            (br_if $done (i64.ne (i64.rem_u (local.get $f) (i64.const 10)) (i64.const 0)))
            (local.set $f (i64.div_u (local.get $f) (i64.const 10)))
            (local.set $k (i32.sub (local.get $k) (i32.const 1)))
            (br $l)))
        (return (call $wfrac (local.get $d) (local.get $f) (local.get $k)))))
    ;; 10**11 <= x < 10**14: q + r / 10**4 rounds correctly (see the module docstring)
    (local.set $x (f64.add (f64.convert_i64_u (i64.div_u (local.get $m) (i64.const 10000)))
                           (f64.div (f64.convert_i64_u (i64.rem_u (local.get $m) (i64.const 10000)))
                                    (f64.const 10000))))
    (local.set $dd (i64.trunc_f64_u (f64.mul (local.get $x) (f64.const 65536))))
    (local.set $dh (i64.shr_u (local.get $dd) (i64.const 16)))
    (local.set $dl (i64.and (local.get $dd) (i64.const 0xFFFF)))
    (local.set $bits (i64.reinterpret_f64 (local.get $x)))
    ;; ulp in units of 2**-16: 2**(exponent - 52 + 16)
    (local.set $u (i64.shl (i64.const 1)
      (i64.sub (i64.and (i64.shr_u (local.get $bits) (i64.const 52)) (i64.const 0x7FF)) (i64.const 1059))))
    (local.set $even (i64.eqz (i64.and (local.get $bits) (i64.const 1))))
    (local.set $p (i64.const 1))
    (loop $try
      ;; the value rounded to k decimals (ties to an even last digit): n / p
      (local.set $num (i64.mul (local.get $dl) (local.get $p)))
      (local.set $f (i64.shr_u (local.get $num) (i64.const 16)))
      (local.set $r (i64.and (local.get $num) (i64.const 0xFFFF)))
      (if (i32.or (i64.gt_u (local.get $r) (i64.const 0x8000))
                  (i32.and (i64.eq (local.get $r) (i64.const 0x8000))
                           (i32.wrap_i64 (i64.and (i64.add (i64.mul (local.get $dh) (local.get $p)) (local.get $f))
                                                  (i64.const 1)))))
        (then (local.set $f (i64.add (local.get $f) (i64.const 1)))))
      (local.set $n (i64.add (i64.mul (local.get $dh) (local.get $p)) (local.get $f)))
      ;; (n / p - x) * p * 2**16, and the half-ulp bound in the same units (a quarter ulp below
      ;; a power of two, where the next smaller binary64 is closer)
      (local.set $diff (i64.sub (i64.shl (local.get $f) (i64.const 16)) (local.get $num)))
      (local.set $lim (i64.mul (local.get $u) (local.get $p)))
      (if (i32.and (i64.lt_s (local.get $diff) (i64.const 0))
                   (i64.eqz (i64.and (local.get $bits) (i64.const 0xFFFFFFFFFFFFF))))
        (then (local.set $diff (i64.shl (local.get $diff) (i64.const 1)))))
      (if (i64.lt_s (local.get $diff) (i64.const 0))
        (then (local.set $diff (i64.sub (i64.const 0) (local.get $diff)))))
      (local.set $diff (i64.shl (local.get $diff) (i64.const 1)))
      (local.set $ok (i32.or (i64.lt_u (local.get $diff) (local.get $lim))
                             (i32.and (i64.eq (local.get $diff) (local.get $lim)) (local.get $even))))
      (if (i32.and (i32.eqz (local.get $ok)) (i32.lt_u (local.get $k) (i32.const 4)))
        (then
          (local.set $k (i32.add (local.get $k) (i32.const 1)))
          (local.set $p (i64.mul (local.get $p) (i64.const 10)))
          (br $try))))
    (local.set $d (call $wdigits (local.get $d) (i64.div_u (local.get $n) (local.get $p))))
    (i32.store8 (local.get $d) (i32.const 46))
    (local.set $d (i32.add (local.get $d) (i32.const 1)))
    (if (i32.eqz (local.get $k))
      (then
        (i32.store8 (local.get $d) (i32.const 48))
        (return (i32.add (local.get $d) (i32.const 1)))))
    (call $wfrac (local.get $d) (i64.rem_u (local.get $n) (local.get $p)) (local.get $k)))

  ;; a JSON string of the text x, escaped as Python's json with ensure_ascii=False
  (func $wstr (param $d i32) (param $x i64) (result i32)
    (local $s i32) (local $e i32) (local $c i32) (local $r i32)
    (local.set $s (call $ptr (local.get $x)))
    (local.set $e (i32.add (local.get $s) (call $len (local.get $x))))
    (if (i32.eqz (call $room (local.get $d)
                   (i64.add (i64.mul (i64.extend_i32_u (call $len (local.get $x))) (i64.const 6)) (i64.const 2))))
      (then (return (local.get $d))))
    (i32.store8 (local.get $d) (i32.const 34))
    (local.set $d (i32.add (local.get $d) (i32.const 1)))
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (local.get $s) (local.get $e)))
        (local.set $c (i32.load8_u (local.get $s)))
        (local.set $s (i32.add (local.get $s) (i32.const 1)))
        (if (i32.and (i32.ge_u (local.get $c) (i32.const 32))
                     (i32.and (i32.ne (local.get $c) (i32.const 34)) (i32.ne (local.get $c) (i32.const 92))))
          (then
            (i32.store8 (local.get $d) (local.get $c))
            (local.set $d (i32.add (local.get $d) (i32.const 1)))
            (br $l)))
        (i32.store8 (local.get $d) (i32.const 92))
        (local.set $r (i32.load8_u offset=@ESCTAB@ (local.get $c)))
        (if (local.get $r)
          (then
            (i32.store8 offset=1 (local.get $d) (local.get $r))
            (local.set $d (i32.add (local.get $d) (i32.const 2))))
          (else
            ;; \u00XX, lowercase hex
            (i32.store offset=1 (local.get $d) (i32.const 0x00303075))
            (i32.store8 offset=4 (local.get $d) (i32.add (i32.const 48) (i32.shr_u (local.get $c) (i32.const 4))))
            (i32.store8 offset=5 (local.get $d)
              (i32.load8_u offset=@HEXTAB@ (i32.and (local.get $c) (i32.const 15))))
            (local.set $d (i32.add (local.get $d) (i32.const 6)))))
        (br $l)))
    (i32.store8 (local.get $d) (i32.const 34))
    (i32.add (local.get $d) (i32.const 1)))

  ;; n constant bytes at s
  (func $wraw (param $d i32) (param $x i64) (result i32)
    (if (i32.eqz (call $room (local.get $d) (i64.extend_i32_u (call $len (local.get $x)))))
      (then (return (local.get $d))))
    (call $copy (local.get $d) (call $ptr (local.get $x)) (call $len (local.get $x))))

  ;; a list of texts as a JSON array
  (func $wlist (param $d i32) (param $xs i64) (result i32)
    (local $a i32) (local $k i32) (local $i i32)
    (local.set $a (call $ptr (local.get $xs)))
    (local.set $k (call $len (local.get $xs)))
    (if (i32.eqz (call $room (local.get $d) (i64.const 2))) (then (return (local.get $d))))
    (i32.store8 (local.get $d) (i32.const 91))
    (local.set $d (i32.add (local.get $d) (i32.const 1)))
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (local.get $i) (local.get $k)))
        (if (local.get $i)
          (then
            (if (i32.eqz (call $room (local.get $d) (i64.const 1))) (then (return (local.get $d))))
            (i32.store8 (local.get $d) (i32.const 44))
            (local.set $d (i32.add (local.get $d) (i32.const 1)))))
        (local.set $d (call $wstr (local.get $d)
                            (i64.load (i32.add (local.get $a) (i32.shl (local.get $i) (i32.const 3))))))
        (if (global.get $oom) (then (return (local.get $d))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $l)))
    (if (i32.eqz (call $room (local.get $d) (i64.const 1))) (then (return (local.get $d))))
    (i32.store8 (local.get $d) (i32.const 93))
    (i32.add (local.get $d) (i32.const 1)))

  ;; any value (tag t, payload v) as canonical JSON
  (func $wval (param $d i32) (param $t i32) (param $v i64) (result i32)
    (if (i32.eq (local.get $t) (i32.const 1)) (then (return (call $wint (local.get $d) (local.get $v)))))
    (if (i32.eq (local.get $t) (i32.const 2)) (then (return (call $wfloat (local.get $d) (local.get $v)))))
    (if (i32.eq (local.get $t) (i32.const 3))
      (then (return (call $wraw (local.get $d) (select (i64.const @TRUE@) (i64.const @FALSE@)
                                                       (i32.wrap_i64 (local.get $v)))))))
    (if (i32.eq (local.get $t) (i32.const 4)) (then (return (call $wstr (local.get $d) (local.get $v)))))
    (if (i32.eq (local.get $t) (i32.const 5)) (then (return (call $wlist (local.get $d) (local.get $v)))))
    (if (i32.eq (local.get $t) (i32.const 6)) (then (return (call $wraw (local.get $d) (local.get $v)))))
    (call $wraw (local.get $d) (i64.const @NULL@)))

  ;; ---- Pike VM ----
  ;; word byte for \b: ASCII [A-Za-z0-9_]
  (func $isword (param $c i32) (result i32)
    (i32.or (i32.or (i32.lt_u (i32.sub (local.get $c) (i32.const 48)) (i32.const 10))
                    (i32.lt_u (i32.sub (i32.or (local.get $c) (i32.const 32)) (i32.const 97)) (i32.const 26)))
            (i32.eq (local.get $c) (i32.const 95))))

  ;; does assertion kind (0 start, 1 end, 2 word boundary, 3 not a boundary) hold at pos?
  (func $assert (param $kind i32) (param $pos i32) (result i32)
    (local $b i32) (local $a i32)
    (if (i32.eqz (local.get $kind)) (then (return (i32.eqz (local.get $pos)))))
    (if (i32.eq (local.get $kind) (i32.const 1)) (then (return (i32.eq (local.get $pos) (global.get $vm_tn)))))
    (if (local.get $pos)
      (then (local.set $b (call $isword (i32.load8_u (i32.sub (i32.add (global.get $vm_tp) (local.get $pos)) (i32.const 1)))))))
    (if (i32.lt_u (local.get $pos) (global.get $vm_tn))
      (then (local.set $a (call $isword (i32.load8_u (i32.add (global.get $vm_tp) (local.get $pos)))))))
    (i32.xor (i32.ne (local.get $a) (local.get $b)) (i32.eq (local.get $kind) (i32.const 3))))

  ;; Add the thread (pc, slots $vm_cur) at text position pos to the list (n entries of 4 + 4*ns
  ;; bytes) following JMP / SPLIT / SAVE / ASSERT in priority order; each pc once per stamp.
  ;; $vm_cur is restored before returning. Returns the new entry count.
  (func $addthread (param $list i32) (param $n i32) (param $pc i32) (param $pos i32) (param $stamp i32) (result i32)
    (local $sp i32) (local $a i32) (local $ins i32) (local $op i32) (local $ns4 i32) (local $e i32)
    (local.set $ns4 (i32.shl (global.get $vm_ns) (i32.const 2)))
    (local.set $sp (global.get $vm_stk))
    (i32.store (local.get $sp) (local.get $pc))
    (local.set $sp (i32.add (local.get $sp) (i32.const 8)))
    (block $empty
      (loop $pop
        (br_if $empty (i32.eq (local.get $sp) (global.get $vm_stk)))
        (local.set $sp (i32.sub (local.get $sp) (i32.const 8)))
        (local.set $pc (i32.load (local.get $sp)))
        (if (i32.lt_s (local.get $pc) (i32.const 0))
          (then
            ;; restore slot -1 - pc
            (i32.store (i32.add (global.get $vm_cur) (i32.shl (i32.sub (i32.const -1) (local.get $pc)) (i32.const 2)))
                       (i32.load offset=4 (local.get $sp)))
            (br $pop)))
        (block $stop
          (loop $follow
            (local.set $e (i32.add (global.get $vm_mark) (i32.shl (local.get $pc) (i32.const 2))))
            (br_if $stop (i32.eq (i32.load (local.get $e)) (local.get $stamp)))
            (i32.store (local.get $e) (local.get $stamp))
            (local.set $ins (i32.add (global.get $vm_prog) (i32.mul (local.get $pc) (i32.const 12))))
            (local.set $op (i32.load (local.get $ins)))
            (local.set $a (i32.load offset=4 (local.get $ins)))
            (if (i32.eq (local.get $op) (i32.const 2))
              (then (local.set $pc (local.get $a)) (br $follow)))
            (if (i32.eq (local.get $op) (i32.const 1))
              (then
                (i32.store (local.get $sp) (i32.load offset=8 (local.get $ins)))
                (local.set $sp (i32.add (local.get $sp) (i32.const 8)))
                (local.set $pc (local.get $a))
                (br $follow)))
            (if (i32.eq (local.get $op) (i32.const 3))
              (then
                (local.set $e (i32.add (global.get $vm_cur) (i32.shl (local.get $a) (i32.const 2))))
                (i32.store (local.get $sp) (i32.sub (i32.const -1) (local.get $a)))
                (i32.store offset=4 (local.get $sp) (i32.load (local.get $e)))
                (local.set $sp (i32.add (local.get $sp) (i32.const 8)))
                (i32.store (local.get $e) (local.get $pos))
                (local.set $pc (i32.add (local.get $pc) (i32.const 1)))
                (br $follow)))
            (if (i32.eq (local.get $op) (i32.const 4))
              (then
                (br_if $stop (i32.eqz (call $assert (local.get $a) (local.get $pos))))
                (local.set $pc (i32.add (local.get $pc) (i32.const 1)))
                (br $follow)))
            ;; BYTE or MATCH: the thread waits in the list
            (local.set $e (i32.add (local.get $list) (i32.mul (local.get $n) (i32.add (local.get $ns4) (i32.const 4)))))
            (i32.store (local.get $e) (local.get $pc))
            (memory.copy (i32.add (local.get $e) (i32.const 4)) (global.get $vm_cur) (local.get $ns4))
            (local.set $n (i32.add (local.get $n) (i32.const 1)))))
        (br $pop)))
    (local.get $n))

  ;; First leftmost-first match of the program (ni instructions at prog, ns slots) in text x ->
  ;; the text payload of capture group g, or -1 (no match, or the group did not take part).
  ;; The VM's memory comes from the arena and is released before returning.
  (func $search (param $x i64) (param $prog i32) (param $ni i32) (param $ns i32) (param $g i32) (param $first i32) (result i64)
    (local $save i32) (local $base i32) (local $tsz i32) (local $cl i32) (local $nl i32)
    (local $best i32) (local $cc i32) (local $nc i32) (local $pos i32) (local $tn i32)
    (local $matched i32) (local $i i32) (local $th i32) (local $ins i32) (local $c i32)
    (local $s i32) (local $e i32) (local $ns4 i32) (local $set i32)
    (local.set $ns4 (i32.shl (local.get $ns) (i32.const 2)))
    (local.set $tsz (i32.add (local.get $ns4) (i32.const 4)))
    (local.set $save (global.get $top))
    ;; marks 4*ni | cur ns4 | best ns4 | stack 8*(2*ni+2) | clist ni*tsz | nlist ni*tsz
    (local.set $base (call $reserve (i64.extend_i32_u
      (i32.add (i32.add (i32.shl (local.get $ni) (i32.const 2)) (i32.shl (local.get $ns4) (i32.const 1)))
               (i32.add (i32.shl (i32.add (i32.shl (local.get $ni) (i32.const 1)) (i32.const 2)) (i32.const 3))
                        (i32.shl (i32.mul (local.get $ni) (local.get $tsz)) (i32.const 1)))))))
    (if (i32.eqz (local.get $base)) (then (return (i64.const -1))))
    (global.set $vm_prog (local.get $prog))
    (global.set $vm_ns (local.get $ns))
    (global.set $vm_tp (call $ptr (local.get $x)))
    (local.set $tn (call $len (local.get $x)))
    (global.set $vm_tn (local.get $tn))
    (global.set $vm_mark (local.get $base))
    (memory.fill (local.get $base) (i32.const 0) (i32.shl (local.get $ni) (i32.const 2)))
    (global.set $vm_cur (i32.add (local.get $base) (i32.shl (local.get $ni) (i32.const 2))))
    (local.set $best (i32.add (global.get $vm_cur) (local.get $ns4)))
    (global.set $vm_stk (i32.add (local.get $best) (local.get $ns4)))
    (local.set $cl (i32.add (global.get $vm_stk) (i32.shl (i32.add (i32.shl (local.get $ni) (i32.const 1)) (i32.const 2)) (i32.const 3))))
    (local.set $nl (i32.add (local.get $cl) (i32.mul (local.get $ni) (local.get $tsz))))
    (block $done
      (loop $step
        ;; a new lowest-priority thread at each code-point start until something matched
        (if (i32.eqz (local.get $matched))
          (then
            ;; no live thread: skip to the next byte that may start a match (first: a 256-byte
            ;; table, or 0 when the program can match without consuming a byte)
            (if (i32.and (i32.eqz (local.get $cc)) (i32.ne (local.get $first) (i32.const 0)))
              (then
                (block $found
                  (loop $scan
                    (br_if $done (i32.ge_u (local.get $pos) (local.get $tn)))
                    (br_if $found (i32.load8_u (i32.add (local.get $first)
                      (i32.load8_u (i32.add (global.get $vm_tp) (local.get $pos))))))
                    (local.set $pos (i32.add (local.get $pos) (i32.const 1)))
                    (br $scan)))))
            (if (i32.or (i32.ge_u (local.get $pos) (local.get $tn))
                        (i32.ne (i32.and (i32.load8_u (i32.add (global.get $vm_tp) (local.get $pos))) (i32.const 0xC0))
                                (i32.const 0x80)))
              (then
                (memory.fill (global.get $vm_cur) (i32.const 0xFF) (local.get $ns4))
                (local.set $cc (call $addthread (local.get $cl) (local.get $cc) (i32.const 0) (local.get $pos)
                                                (i32.add (local.get $pos) (i32.const 1))))))))
        (br_if $done (i32.and (i32.eqz (local.get $cc)) (local.get $matched)))
        (local.set $nc (i32.const 0))
        (local.set $i (i32.const 0))
        (local.set $th (local.get $cl))
        (block $cut
          (loop $each
            (br_if $cut (i32.ge_u (local.get $i) (local.get $cc)))
            (local.set $ins (i32.add (local.get $prog) (i32.mul (i32.load (local.get $th)) (i32.const 12))))
            (if (i32.eq (i32.load (local.get $ins)) (i32.const 5))
              (then
                (memory.copy (local.get $best) (i32.add (local.get $th) (i32.const 4)) (local.get $ns4))
                (local.set $matched (i32.const 1))
                (br $cut)))
            (if (i32.lt_u (local.get $pos) (local.get $tn))
              (then
                (local.set $c (i32.load8_u (i32.add (global.get $vm_tp) (local.get $pos))))
                (local.set $set (i32.load offset=4 (local.get $ins)))
                (if (i32.and (i32.shr_u (i32.load8_u (i32.add (local.get $set) (i32.shr_u (local.get $c) (i32.const 3))))
                                        (i32.and (local.get $c) (i32.const 7)))
                             (i32.const 1))
                  (then
                    (memory.copy (global.get $vm_cur) (i32.add (local.get $th) (i32.const 4)) (local.get $ns4))
                    (local.set $nc (call $addthread (local.get $nl) (local.get $nc)
                                     (i32.add (i32.load (local.get $th)) (i32.const 1))
                                     (i32.add (local.get $pos) (i32.const 1))
                                     (i32.add (local.get $pos) (i32.const 2))))))))
            (local.set $th (i32.add (local.get $th) (local.get $tsz)))
            (local.set $i (i32.add (local.get $i) (i32.const 1)))
            (br $each)))
        (local.set $th (local.get $cl))
        (local.set $cl (local.get $nl))
        (local.set $nl (local.get $th))
        (local.set $cc (local.get $nc))
        (br_if $done (i32.ge_u (local.get $pos) (local.get $tn)))
        (local.set $pos (i32.add (local.get $pos) (i32.const 1)))
        (br $step)))
    (global.set $top (local.get $save))
    (if (i32.eqz (local.get $matched)) (then (return (i64.const -1))))
    (local.set $s (i32.load (i32.add (local.get $best) (i32.shl (local.get $g) (i32.const 3)))))
    (local.set $e (i32.load offset=4 (i32.add (local.get $best) (i32.shl (local.get $g) (i32.const 3)))))
    (if (i32.or (i32.lt_s (local.get $s) (i32.const 0)) (i32.lt_s (local.get $e) (local.get $s)))
      (then (return (i64.const -1))))
    (call $pack (i32.add (global.get $vm_tp) (local.get $s)) (i32.sub (local.get $e) (local.get $s))))
"""


def _first_bytes(insts, sets) -> bytes | None:
    """A 256-byte table (1 = the byte may start a match) for a regex program, or None when a
    match may consume nothing (MATCH is reachable through SPLIT / JMP / SAVE / ASSERT alone).
    Assertions are treated as passing, so the table over-approximates: skipping positions whose
    byte is 0 never changes the result."""
    allowed = bytearray(256)
    seen: set[int] = set()
    stack = [0]
    while stack:
        pc = stack.pop()
        if pc in seen:
            continue
        seen.add(pc)
        op, a, b = insts[pc]
        if op == 0:
            bm = sets[a]
            for v in range(256):
                if bm[v >> 3] >> (v & 7) & 1:
                    allowed[v] = 1
        elif op == 1:
            stack += [a, b]
        elif op == 2:
            stack.append(a)
        elif op in (3, 4):
            stack.append(pc + 1)
        else:
            return None
    return bytes(allowed)


class _Static:
    """The constants' bytes, placed from address 16 (so no constant sits at address 0)."""

    def __init__(self) -> None:
        self.buf = bytearray(16)
        self._seen: dict[tuple[bytes, int], int] = {}

    def put(self, b: bytes, align: int = 1) -> int:
        key = (bytes(b), align)
        if key in self._seen:
            return self._seen[key]
        while len(self.buf) % align:
            self.buf.append(0)
        at = len(self.buf)
        self.buf.extend(b)
        self._seen[key] = at
        return at

    def text(self, b: bytes) -> int:
        """A constant's payload: ``(address << 32) | length`` (address 16 for the empty text)."""
        at = self.put(b) if b else 16
        return (at << 32) | len(b)


def _i64_lit(v: int) -> int:
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >= 1 << 63 else v


def float_units(value) -> int:
    """A float constant in ten-thousandths (exact: through ``Decimal(repr(value))``).

    Raises:
        CodegenError: not finite, more than 4 fractional digits, or ``|value| >= 10**14``.
    """
    try:
        d = Decimal(repr(float(value)))
    except (InvalidOperation, ValueError, OverflowError) as e:
        raise CodegenError(f"float constant {value!r} is not a finite number") from e
    if not d.is_finite():
        raise CodegenError(f"float constant {value!r} is not finite")
    u = d * FLOAT_SCALE
    if u != u.to_integral_value():
        raise CodegenError(f"float constant {value!r} has more than 4 fractional digits")
    n = int(u)
    if abs(n) >= FLOAT_LIMIT:
        raise CodegenError(f"float constant {value!r} is outside |v| < 10**14")
    return n


class _Gen:
    """Generates the body of ``$prog`` for one program (statements that set per-node locals)."""

    def __init__(self, field: str, static: _Static) -> None:
        self.field = field
        self.static = static
        self.locals: list[str] = []
        self.lines: list[str] = []
        self.n = 0
        self.regexes: dict[str, tuple[int, int, int, int, int]] = {}

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
        return f"(i64.const {_i64_lit(self.static.text(s.encode('utf-8')))})"

    def is_tag(self, src: tuple[str, str], tag: int) -> str:
        return f"(i32.eq (local.get {src[0]}) (i32.const {tag}))"

    # -- regexes
    def regex(self, pattern: str) -> tuple[int, int, int, int, int]:
        """``(program address, instructions, slots, groups, first-byte table address or 0)``."""
        if pattern in self.regexes:
            return self.regexes[pattern]
        from auto.extract.regex import compile_regex
        try:
            prog = compile_regex(pattern)
        except Exception as e:  # the regex module's own error types
            raise CodegenError(f"regex {pattern!r} cannot be compiled: {e}") from e
        insts = list(prog.insts)
        if not insts:
            raise CodegenError(f"regex {pattern!r} compiled to an empty program")
        set_at = [self.static.put(bytes(s), 4) for s in prog.sets]
        if any(len(s) != 32 for s in prog.sets):
            raise CodegenError(f"regex {pattern!r}: a byte set is not a 32-byte bitmap")
        words = bytearray()
        for op, a, b in insts:
            a = 0 if a is None else int(a)
            b = 0 if b is None else int(b)
            if op == 0:
                if not 0 <= a < len(set_at):
                    raise CodegenError(f"regex {pattern!r}: BYTE refers to set {a}")
                a = set_at[a]
            elif op in (1, 2) and not (0 <= a < len(insts) and (op == 2 or 0 <= b < len(insts))):
                raise CodegenError(f"regex {pattern!r}: jump target out of range")
            elif op == 3 and not 0 <= a < prog.nslots:
                raise CodegenError(f"regex {pattern!r}: SAVE slot {a} out of range")
            elif op == 4 and a not in (0, 1, 2, 3):
                raise CodegenError(f"regex {pattern!r}: unknown assertion {a}")
            elif op not in (0, 1, 2, 3, 4, 5):
                raise CodegenError(f"regex {pattern!r}: unknown opcode {op}")
            words += struct.pack("<iii", op, a, b)
        if insts[-1][0] not in (2, 5) and not any(op == 5 for op, _, _ in insts):
            raise CodegenError(f"regex {pattern!r}: no MATCH instruction")
        at = self.static.put(bytes(words), 4)
        first = _first_bytes(insts, prog.sets)
        r = (at, len(insts), int(prog.nslots), int(prog.ngroups),
             0 if first is None else self.static.put(first))
        self.regexes[pattern] = r
        return r

    # -- nodes
    def node(self, n) -> tuple[str, str]:
        """Emit code for ``n``; returns its (tag, payload) locals."""
        from auto.extract import ast as A
        kind = type(n).__name__
        method = getattr(self, "_" + kind, None)
        if method is None or type(n) not in A.NODE_TYPES:
            raise CodegenError(f"cannot lower a {kind} node")
        return method(n)

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
            self.set(out, f"(i32.const {T_FLOAT})", f"(i64.const {float_units(v)})")
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
        at, ni, ns, ng, first = self.regex(n.pattern)
        g = int(n.group)
        if not 0 <= g <= ng or 2 * g + 1 >= ns:
            raise CodegenError(f"regex {n.pattern!r} has no group {g}")
        return self._text_op(
            n, f"(call $search {{x}} (i32.const {at}) (i32.const {ni}) (i32.const {ns}) (i32.const {g}) (i32.const {first}))",
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
        from auto.extract.ast import COMPARE_OPS
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
            u = float_units(c)
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
            s_float = ("(i32.const -1)" if cu >= FLOAT_LIMIT else
                       "(i32.const 1)" if cu <= -FLOAT_LIMIT else cmp(X, cu))
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


def _prog_func(gen: _Gen, root) -> str:
    r = gen.node(root)
    body = "\n".join(gen.lines)
    locs = " ".join(["(local $d i32)"] + gen.locals)
    return f"""
  ;; ---- generated: the program, inline; 0 = a value in $rt/$rv, 1 = deopt, 2 = out of memory ----
  (func $prog (result i32)
    {locs}
    (block $oom
      (block $deopt
{body}
        (global.set $rt (local.get {r[0]}))
        (global.set $rv (local.get {r[1]}))
        (return (i32.const 0)))
      (return (i32.const 1)))
    (i32.const 2))
"""


def lower_program(program, field: str | None) -> str:
    """WebAssembly text of the artifact for ``program`` over the input's string field ``field``.

    Deterministic: the same program and field give the same text.

    Args:
        program: the root node of a program (:mod:`auto.extract.ast`), assumed type-checked
            (:func:`compile_program` checks it).
        field: the task input's string field every :class:`~auto.extract.ast.Field` reads;
            ``None`` for a program without a Field (then any JSON object is a valid input).

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
    st = _Static()
    errtab = put_errors(st.put)
    fname = (field or "").encode("utf-8")
    fld = st.put(fname) if fname else 16
    ok_pre, ok_suf = st.put(OK_PREFIX), st.put(OK_SUFFIX)
    deopt_at = st.put(DEOPT_OUTPUT)
    esc = bytearray(256)
    for c, r in {0x22: b'"', 0x5C: b"\\", 0x0A: b"n", 0x0D: b"r", 0x09: b"t", 0x08: b"b", 0x0C: b"f"}.items():
        esc[c] = r[0]
    esctab = st.put(bytes(esc))
    hextab = st.put(b"0123456789abcdef")
    words = {k: st.text(v) for k, v in (("TRUE", b"true"), ("FALSE", b"false"), ("NULL", b"null"))}
    gen = _Gen(field, st)
    prog = _prog_func(gen, program)
    heap = _align(len(st.buf), 16) + 16
    if heap > STATIC_LIMIT:
        raise CodegenError(f"program needs {heap} bytes of static memory (limit 1 GiB)")
    out_max = max(len(DEOPT_OUTPUT), 32) + 32
    subst = {"STRING_FAST": STRING_FAST, "STRING_LOCALS": "(local $v v128)",
             "MAX_INPUT": MAX_INPUT, "MAX_BATCH": MAX_BATCH, "ERRTAB": errtab,
             "FIELD": fld, "FIELD_LEN": len(fname),
             # the specialist's counts are unused here: $clear / $frame are never called
             "COUNTS": 16, "TOUCHED": 16, "COUNTS_BYTES": 0, "MASK4": 0,
             "HEAP": heap, "OUT_MAX": out_max}
    pre = prelude()
    if field is None:  # no Field node: any JSON object is a valid input (as a table-only memo)
        a = pre.index("  ;; <specialist>\n")
        b = pre.index("  ;; </specialist>\n") + len("  ;; </specialist>\n")
        pre = pre[:a] + ITEM_ANY_OBJECT + pre[b:]
    pre = fill(pre, subst)
    lib = fill(LIBRARY, {"ESCTAB": esctab, "HEXTAB": hextab,
                         **{k: _i64_lit(v) for k, v in words.items()}})
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
        (local.set $d (call $wraw (local.get $s) (i64.const {_i64_lit(st.text(OK_PREFIX))})))
        (local.set $d (call $wval (local.get $d) (global.get $rt) (global.get $rv)))
        (local.set $d (call $wraw (local.get $d) (i64.const {_i64_lit(st.text(OK_SUFFIX))})))
        (if (i32.eqz (global.get $oom))
          (then
            (memory.copy (local.get $o) (local.get $s) (i32.sub (local.get $d) (local.get $s)))
            (return (i32.add (local.get $o) (i32.sub (local.get $d) (local.get $s))))))))
    (call $copy_err (local.get $o) (i32.const 4)))
"""
    del ok_pre, ok_suf
    ev = ev.replace("{decode}", "(drop (call $string (global.get $sval) (global.get $scratch) (i32.const 0)))"
                    if field is not None else "(global.set $dend (global.get $scratch))")
    data = f'  (data (i32.const 0) "{wat_bytes(bytes(st.buf))}")'
    pages = (heap + HEAP_SLACK + PAGE - 1) // PAGE
    return ("(module\n"
            f"  (memory (export \"memory\") {pages})\n"
            + pre + EQ_FUNC + lib + prog + ev + data + "\n)\n")


def compile_program(program) -> bytes:
    """Type-check ``program``, find its one input field, lower and assemble it.

    Returns:
        The module bytes (no manifest yet; see :mod:`auto.emit`). Deterministic.

    Raises:
        CompileError: the program reads no input field, or more than one.
        CodegenError: lowering or assembling failed (see :func:`lower_program`).
        Whatever :func:`auto.extract.types.check` raises for an ill-typed program.
    """
    from auto.extract.types import check, input_fields

    from . import assemble
    check(program)
    names = input_fields(program)
    if len(names) > 1:  # check() refuses this already; kept for programs checked elsewhere
        raise CompileError(f"a program reads at most one input field, this one reads {sorted(names)}")
    return assemble(lower_program(program, names.pop() if names else None))


__all__ = ["DEOPT_OUTPUT", "LIBRARY", "compile_program", "float_units", "lower_program"]
