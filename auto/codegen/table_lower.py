"""Lowering a :class:`~auto.codegen.table.TableModel` to WebAssembly text.

The module shares the prelude (allocator, JSON validation, ``run`` / ``run_batch``, fixed-number
writer, error objects). Table-only: the prelude's specialist part (field checks, featurizer
state) is replaced by a plain "is it a JSON object" check. Memo-first: the specialist's module
is kept whole, its ``$eval`` renamed ``$spec_eval``, and a new ``$eval`` looks the input up first.

Lookup, per item (the item's JSON text ``[$istart, $iend)``, surrounding whitespace excluded):

1. FNV-1a 64 over those bytes (offset basis 14695981039346656037, prime 1099511628211; eight
   bytes per i64 load, then the tail).
2. Binary search (lower bound) for the hash in the index, sorted by ``(hash, key)``.
3. For each index entry with that hash: equal length and equal bytes (8 at a time) -> hit. A
   hash collision therefore never returns a wrong answer; it only costs a comparison.

Memory (after the specialist's static data for memo-first; after the constants for table-only;
the layout is the runtime's ``fnv1a64-index/1``, :mod:`auto_runtime.table`, which declares it in
the manifest as ``model.table``, :func:`table_declaration`, and answers hits from it)::

    index    24-byte entries, 8-aligned: hash u64 | key ptr u32 | key len u32 | answer ptr u32 |
             answer len u32 (all little-endian, absolute addresses)
    keys     the canonical input bytes, back to back
    answers  the canonical answer bytes, each distinct answer once
    heap     per call: input | scratch | nesting stack | output

A hit writes ``{"answer":<answer>,"margin":1000000.000000000,"nonconformity":0.000000000}``; a
table-only miss writes ``{"answer":null,"margin":0.000000000,"nonconformity":1.000000000}``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from auto_runtime.digest import digest_bytes
from auto_runtime.table import INDEX_DTYPE, ENTRY, LAYOUT

from auto.errors import CodegenError

from .kernel import eval_func
from .prelude import any_object, base_tokens, fill, module_text, prelude, put_errors
from .reference import fixed
from .specialist_lower import specialist_static
from .static import StaticData, align, check_static, heap_start, pages
from .table import (FNV64_OFFSET_BASIS, FNV64_PRIME, HIT_MARGIN, HIT_NONCONFORMITY,
                    MISS_NONCONFORMITY, TableModel)
from .wat import data_segment, i64_const

HIT_PREFIX = b'{"answer":'
HIT_SUFFIX = (b',"margin":' + fixed(HIT_MARGIN).encode() + b',"nonconformity":'
              + fixed(HIT_NONCONFORMITY).encode() + b"}")
MISS = (b'{"answer":null,"margin":' + fixed(0.0).encode() + b',"nonconformity":'
        + fixed(MISS_NONCONFORMITY).encode() + b"}")


def _hash_func() -> str:
    ob, pr = i64_const(FNV64_OFFSET_BASIS), i64_const(FNV64_PRIME)
    step8 = "\n".join(
        f"        (local.set $h (i64.mul (i64.xor (local.get $h) "
        f"(i64.and (i64.shr_u (local.get $w) (i64.const {8 * k})) (i64.const 255))) (i64.const {pr})))"
        for k in range(8))
    return f"""
  ;; FNV-1a 64 of the bytes [p, e): h = {FNV64_OFFSET_BASIS}; per byte h = (h ^ b) * {FNV64_PRIME}
  ;; (mod 2^64); eight bytes per i64 load (little-endian: lowest byte first), then the tail
  (func $fnv64 (param $p i32) (param $e i32) (result i64)
    (local $h i64) (local $w i64)
    (local.set $h (i64.const {ob}))
    (block $d8
      (loop $l8
        (br_if $d8 (i32.gt_u (i32.add (local.get $p) (i32.const 8)) (local.get $e)))
        (local.set $w (i64.load (local.get $p)))
{step8}
        (local.set $p (i32.add (local.get $p) (i32.const 8)))
        (br $l8)))
    (block $d1
      (loop $l1
        (br_if $d1 (i32.ge_u (local.get $p) (local.get $e)))
        (local.set $h (i64.mul (i64.xor (local.get $h) (i64.load8_u (local.get $p))) (i64.const {pr})))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (br $l1)))
    (local.get $h))
"""


HASH_FUNC = _hash_func()
"""WAT of ``$fnv64 (param $p i32) (param $e i32) (result i64)``: FNV-1a 64 of ``[p, e)``."""

EQ_FUNC = """
  ;; are the n bytes at x and at y equal? (eight at a time, then the tail)
  (func $eq (param $x i32) (param $y i32) (param $n i32) (result i32)
    (local $e i32)
    (local.set $e (i32.add (local.get $x) (local.get $n)))
    (block $d8
      (loop $l8
        (br_if $d8 (i32.gt_u (i32.add (local.get $x) (i32.const 8)) (local.get $e)))
        (if (i64.ne (i64.load (local.get $x)) (i64.load (local.get $y))) (then (return (i32.const 0))))
        (local.set $x (i32.add (local.get $x) (i32.const 8)))
        (local.set $y (i32.add (local.get $y) (i32.const 8)))
        (br $l8)))
    (block $d1
      (loop $l1
        (br_if $d1 (i32.ge_u (local.get $x) (local.get $e)))
        (if (i32.ne (i32.load8_u (local.get $x)) (i32.load8_u (local.get $y))) (then (return (i32.const 0))))
        (local.set $x (i32.add (local.get $x) (i32.const 1)))
        (local.set $y (i32.add (local.get $y) (i32.const 1)))
        (br $l1)))
    (i32.const 1))
"""
"""WAT of ``$eq (param $x i32) (param $y i32) (param $n i32) (result i32)``: 1 iff the ``n``
bytes at ``x`` and ``y`` are equal."""


def table_blob(model: TableModel, base: int) -> tuple[bytes, int, int]:
    """The index, keys and answers placed at ``base`` (8-aligned).

    Returns:
        ``(blob, index_address, longest_answer)``: the bytes to store at ``base``, where the
        index starts (== base), and the longest answer in bytes.
    """
    if base % 8:
        raise CodegenError("table base must be 8-aligned")
    n = len(model)
    keys_at = base + ENTRY * n
    keys = b"".join(model.keys)
    ans_at = keys_at + len(keys)
    ans_pos: dict[str, int] = {}  # each distinct answer stored once, in first-use order
    parts: list[bytes] = []
    at = ans_at
    for a in model.answers:
        if a not in ans_pos:
            ans_pos[a] = at
            ab = a.encode("utf-8")
            parts.append(ab)
            at += len(ab)
    alen = {a: len(a.encode("utf-8")) for a in ans_pos}
    idx = np.empty(n, dtype=INDEX_DTYPE)
    idx["hash"] = np.array(model.hashes, dtype=np.uint64)
    klen = np.fromiter(map(len, model.keys), dtype=np.int64, count=n)
    kptr = np.empty(n, dtype=np.int64)
    if n:
        kptr[0] = keys_at
        np.cumsum(klen[:-1], out=kptr[1:])
        kptr[1:] += keys_at
    idx["kptr"], idx["klen"] = kptr, klen
    idx["aptr"] = np.fromiter(map(ans_pos.__getitem__, model.answers), dtype=np.int64, count=n)
    idx["alen"] = np.fromiter(map(alen.__getitem__, model.answers), dtype=np.int64, count=n)
    longest = max(alen.values(), default=0)
    return idx.tobytes() + keys + b"".join(parts), base, longest


def table_declaration(base: int, blob: bytes, entries: int) -> dict[str, Any]:
    """The manifest's ``model.table`` for a table of ``entries`` entries whose bytes ``blob`` lie
    at ``base`` (the runtime reads and verifies it, :mod:`auto_runtime.table`): layout, address,
    size in bytes, entries, ``sha256:`` of the bytes, and the hit output's two numbers."""
    return {"layout": LAYOUT, "address": base, "bytes": len(blob), "entries": entries,
            "digest": digest_bytes(blob), "hit": {"margin": HIT_MARGIN, "nonconformity": HIT_NONCONFORMITY}}


def lookup_funcs(n: int, index: int, prefix: tuple[int, int], suffix: tuple[int, int],
                 miss_call: str) -> str:
    """WAT of ``$lookup`` (``$fnv64`` of the item, lower-bound search, ``$eq`` on every entry
    with that hash -> the entry's address or 0), ``$fnv64``, ``$eq`` and the new ``$eval``.
    ``n`` entries, index at ``index``; ``prefix`` / ``suffix``: (address, length) of the hit
    output's constant parts; ``miss_call``: the WAT expression ``$eval`` returns on a miss (it
    may use ``$o``)."""
    if n == 0:
        lookup = "  (func $lookup (result i32) (i32.const 0))\n"
    else:
        lookup = f"""  ;; lower-bound search for the item's hash, then a full byte comparison against every entry
  ;; with that hash -> the entry's address, or 0 (a miss)
  (func $lookup (result i32)
    (local $h i64) (local $lo i32) (local $hi i32) (local $mid i32) (local $a i32) (local $n i32)
    (local.set $n (i32.sub (global.get $iend) (global.get $istart)))
    (local.set $h (call $fnv64 (global.get $istart) (global.get $iend)))
    (local.set $hi (i32.const {n}))
    (block $bd
      (loop $bl
        (br_if $bd (i32.ge_u (local.get $lo) (local.get $hi)))
        (local.set $mid (i32.shr_u (i32.add (local.get $lo) (local.get $hi)) (i32.const 1)))
        (if (i64.lt_u (i64.load offset={index} (i32.mul (local.get $mid) (i32.const {ENTRY})))
                      (local.get $h))
          (then (local.set $lo (i32.add (local.get $mid) (i32.const 1))))
          (else (local.set $hi (local.get $mid))))
        (br $bl)))
    (local.set $a (i32.add (i32.const {index}) (i32.mul (local.get $lo) (i32.const {ENTRY}))))
    (block $miss
      (loop $scan
        (br_if $miss (i32.ge_u (local.get $a) (i32.const {index + ENTRY * n})))
        (br_if $miss (i64.ne (i64.load (local.get $a)) (local.get $h)))
        (if (i32.eq (i32.load offset=12 (local.get $a)) (local.get $n))
          (then
            (if (call $eq (global.get $istart) (i32.load offset=8 (local.get $a)) (local.get $n))
              (then (return (local.get $a))))))
        (local.set $a (i32.add (local.get $a) (i32.const {ENTRY})))
        (br $scan)))
    (i32.const 0))
""" + HASH_FUNC + EQ_FUNC
    ev = f"""  ;; ---- generated: look the item up; a hit writes its answer, a miss goes on ----
  (func $eval (param $o i32) (result i32)
    (local $a i32)
    (local.set $a (call $lookup))
    (if (i32.eqz (local.get $a)) (then (return {miss_call})))
    (local.set $o (call $copy (local.get $o) (i32.const {prefix[0]}) (i32.const {prefix[1]})))
    (local.set $o (call $copy (local.get $o) (i32.load offset=16 (local.get $a))
                                             (i32.load offset=20 (local.get $a))))
    (call $copy (local.get $o) (i32.const {suffix[0]}) (i32.const {suffix[1]})))
"""
    return lookup + ev


def lower_table(model: TableModel, *, simd: bool = True) -> str:
    """WebAssembly text of the artifact for a :class:`TableModel` (deterministic); see
    :func:`lower_table_parts` (the table written into the text as its last data segment)."""
    text, base, blob = lower_table_parts(model, simd=simd)
    return text.replace(placeholder_segment(base), data_segment(base, blob)) if blob else text


def placeholder_segment(base: int) -> str:
    """The empty data segment at ``base`` that stands for the table in :func:`lower_table_parts`."""
    return data_segment(base, b"")


def lower_table_parts(model: TableModel, *, simd: bool = True) -> tuple[str, int, bytes]:
    """WebAssembly text of the artifact for a :class:`TableModel` (deterministic), with the
    table (index, keys and answers) left out of the text: its last data segment is an empty
    placeholder at ``base`` (:func:`placeholder_segment`) for ``blob``, filled in the assembled
    module (:func:`auto.codegen.wat.fill_last_segment`).

    Args:
        model: the table (and its fallback specialist for memo-first).
        simd: as for :func:`auto.codegen.specialist_lower.lower_specialist` (the string scanner,
            and the specialist's kernel).

    Returns:
        ``(text, base, blob)``: the WAT module text (exports exactly ``memory``, ``alloc``,
        ``run``, ``run_batch``; no imports), the table's address and its bytes (empty: no
        entries, and no placeholder).

    Raises:
        CodegenError: the static data (table + specialist) would exceed 1 GiB, or the fallback
            cannot be lowered (non-finite weights).
    """
    spec = model.fallback
    if spec is None:
        st = StaticData()
        subst = base_tokens(simd, put_errors(st))
        pre_at, suf_at, miss_at = st.put(HIT_PREFIX), st.put(HIT_SUFFIX), st.put(MISS)
        base = align(st.end, 8)
        data = [st.segment()]
        spec_out_max = len(MISS) + 16
        spec_parts: list[str] = []
    else:
        L, subst, data = specialist_static(spec, simd)
        pre_at = align(L.heap, 16)
        suf_at = pre_at + len(HIT_PREFIX)
        data.append(data_segment(pre_at, HIT_PREFIX + HIT_SUFFIX))
        base = align(suf_at + len(HIT_SUFFIX), 8)
        spec_out_max = L.out_max
        spec_parts = [eval_func(spec, L, simd, name="$spec_eval")]
    blob, index, longest = table_blob(model, base)
    heap = heap_start(base + len(blob))
    check_static(heap, "table")
    out_max = max(spec_out_max, len(HIT_PREFIX) + longest + len(HIT_SUFFIX) + 16)
    pre = prelude() if spec is not None else any_object(prelude())
    pre = fill(pre, {**subst, "HEAP": heap, "OUT_MAX": out_max})
    miss_call = (f"(call $copy (local.get $o) (i32.const {miss_at}) (i32.const {len(MISS)}))"
                 if spec is None else "(call $spec_eval (local.get $o))")
    gen = lookup_funcs(len(model), index, (pre_at, len(HIT_PREFIX)), (suf_at, len(HIT_SUFFIX)),
                       miss_call)
    if blob:
        data.append(placeholder_segment(base))
    return module_text(pages(heap), [pre, *spec_parts, gen], data), base, blob


__all__ = ["ENTRY", "EQ_FUNC", "HASH_FUNC", "HIT_PREFIX", "HIT_SUFFIX", "MISS", "lower_table",
           "lower_table_parts", "placeholder_segment", "table_blob", "table_declaration"]
