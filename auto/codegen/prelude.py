"""The prelude every artifact shares (``prelude.wat``) and how a lowering completes it.

The prelude is hand-written WebAssembly text: the allocator, the JSON reader and validator, the
field check ``$item``, ``$string`` (decode a JSON string), the fixed-number writer, the error
objects and ``run`` / ``run_batch``. Its at-sign tokens (``@KEY@``) are filled in by the lowering
(:func:`fill`): :func:`base_tokens` gives the ones every lowering sets the same way; the
specialist's layout gives ``FIELD``, ``FIELD_LEN``, ``COUNTS``, ``TOUCHED``, ``COUNTS_BYTES``,
``MASK4``; every lowering gives ``HEAP`` and ``OUT_MAX``. A lowering whose inputs need only be
JSON objects replaces the specialist part (between the ``<specialist>`` comments) with
:data:`ITEM_ANY_OBJECT` (:func:`any_object`). :func:`module_text` wraps the result in a module.
"""

from __future__ import annotations

import re
import struct
from importlib import resources

from auto.canonical import canonical_json
from auto.errors import CodegenError

from .static import StaticData

MAX_INPUT = 1 << 20
"""Largest ``run`` input (and ``run_batch`` item) in bytes; larger ones answer ``too_large``."""
MAX_BATCH = 64 << 20
"""Largest ``run_batch`` input in bytes (and largest ``alloc``); larger ones answer ``too_large``."""
ERROR_CODES = ("bad_json", "missing_field", "wrong_type", "too_large")
"""Status codes 1..4, in order."""
FIXED_MAX = 21
"""Longest printed fixed number: sign, 10 integer digits, point, 9 digits (i64 saturation)."""

_SPECIALIST_BEGIN = "  ;; <specialist>\n"
_SPECIALIST_END = "  ;; </specialist>\n"

# The replacement of the prelude's specialist part for inputs that need only be JSON objects.
ITEM_ANY_OBJECT = """  ;; One task input at p (after whitespace) -> position after it, or -1 for bad JSON.
  ;; Sets $status: 0 for an object, 3 (wrong_type) for any other JSON value.
  (func $item (param $p i32) (result i32)
    (global.set $status
      (select (i32.const 0) (i32.const 3) (i32.eq (call $peek (local.get $p)) (i32.const 123))))
    (call $skip_value (local.get $p)))
"""


def _splat8(v: int) -> str:
    return "(v128.const i8x16 " + " ".join([str(v)] * 16) + ")"


# SIMD fast path of $string (spliced into the prelude): 16 plain bytes at a time (no quote, backslash, control or non-ASCII
# byte among them) are copied, ASCII-folded when asked; anything else takes the byte-wise path.
STRING_FAST = f"""        (if (i32.le_u (i32.add (local.get $p) (i32.const 16)) (local.get $end))
          (then
            (local.set $v (v128.load (local.get $p)))
            (if (i32.eqz (v128.any_true (v128.or
                  (v128.or (i8x16.lt_u (local.get $v) {_splat8(32)}) (i8x16.lt_s (local.get $v) {_splat8(0)}))
                  (v128.or (i8x16.eq (local.get $v) {_splat8(34)}) (i8x16.eq (local.get $v) {_splat8(92)})))))
              (then
                (if (local.get $fold)
                  (then (local.set $v (v128.or (local.get $v) (v128.and {_splat8(32)}
                    (v128.and (i8x16.gt_u (local.get $v) {_splat8(64)}) (i8x16.lt_u (local.get $v) {_splat8(91)})))))))
                (v128.store (local.get $d) (local.get $v))
                (local.set $d (i32.add (local.get $d) (i32.const 16)))
                (local.set $p (i32.add (local.get $p) (i32.const 16)))
                (br $l)))))"""


def wat_source(name: str) -> str:
    """The text of the hand-written WebAssembly file ``name`` shipped in :mod:`auto.codegen`."""
    return resources.files("auto.codegen").joinpath(name).read_text("utf-8")


def prelude() -> str:
    """The prelude's text, at-sign tokens unfilled."""
    return wat_source("prelude.wat")


def fill(text: str, subst: dict) -> str:
    """Replace each ``@KEY@`` in ``text`` by ``str(subst[KEY])``.

    Raises:
        CodegenError: a token is left unfilled.
    """
    for k, v in subst.items():
        text = text.replace(f"@{k}@", str(v))
    left = re.findall(r"@[A-Z_]+@", text)
    if left:
        raise CodegenError(f"unfilled placeholders in the prelude: {sorted(set(left))}")
    return text


def put_errors(static: StaticData) -> int:
    """Place the error objects and the error table (``(ptr, len)`` i32 pairs, 8-aligned, indexed
    by status code; entry 0 repeats ``bad_json``); returns the table's address (``@ERRTAB@``)."""
    errs = [canonical_json({"error": c}).encode() for c in ERROR_CODES]
    at = [static.put(e) for e in errs]
    pairs = [(at[0], len(errs[0]))] + [(a, len(e)) for a, e in zip(at, errs)]
    return static.put(b"".join(struct.pack("<ii", a, n) for a, n in pairs), 8)


def base_tokens(simd: bool, errtab: int) -> dict:
    """The tokens every lowering fills the same way: the string scanner (SIMD or not), the input
    limits and the error table's address."""
    return {"STRING_FAST": STRING_FAST if simd else "",
            "STRING_LOCALS": "(local $v v128)" if simd else "",
            "MAX_INPUT": MAX_INPUT, "MAX_BATCH": MAX_BATCH, "ERRTAB": errtab}


def any_object(text: str) -> str:
    """``text`` (the prelude) with its specialist part replaced by :data:`ITEM_ANY_OBJECT`."""
    a = text.index(_SPECIALIST_BEGIN)
    b = text.index(_SPECIALIST_END) + len(_SPECIALIST_END)
    return text[:a] + ITEM_ANY_OBJECT + text[b:]


def module_text(pages: int, code: list[str], data: list[str]) -> str:
    """The module: memory 0 of ``pages`` pages (exported as ``memory``), the code parts in order,
    then the data segments."""
    return ("(module\n"
            f"  (memory (export \"memory\") {pages})\n"
            + "".join(code) + "\n".join(data) + "\n)\n")
