"""Memory layout and data segments of an artifact (constants, counts, weights, heap).

Memory map (all addresses static, chosen at compile time)::

    [0, 16)     unused, so no buffer ever starts at address 0
    constants   error objects, per-class answer prefixes, ',"nonconformity":', the field name,
                the error and class tables ((ptr, len) i32 pairs)
    counts      i32 [B]      n-gram counts per bucket (zero between calls)
    touched     i32 [B + 1]  byte offsets (bucket * 4) in first-touch order (+1 spare slot)
    tree        24-byte nodes (feature i32, left/class i32, right i32, pad, threshold/margin f64)
    xs          f64 [B]      x values of the touched buckets, first-touch order
    table       f64 [16]     k / norm for small counts k
    weights     f32 [B, H2]  bucket-major: the R linear rows then the K prototypes (H2 = H padded
                             to even for SIMD)
    heap        per call: input | scratch | nesting stack | output
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from auto.canonical import canonical_json

MAX_INPUT = 1 << 20
"""Largest ``run`` input (and ``run_batch`` item) in bytes; larger ones answer ``too_large``."""
MAX_BATCH = 64 << 20
"""Largest ``run_batch`` input in bytes (and largest ``alloc``); larger ones answer ``too_large``."""
ERROR_CODES = ("bad_json", "missing_field", "wrong_type", "too_large")
"""Status codes 1..4, in order."""
FIXED_MAX = 21
"""Longest printed fixed number: sign, 10 integer digits, point, 9 digits (i64 saturation)."""
PAGE = 65536
HEAP_SLACK = PAGE
"""Heap bytes declared up front beyond the static data (enough for a typical input)."""
GAP = 64
"""Zero runs at least this long split the weight data segments (memory starts zeroed)."""
GROUP = 8
"""Accumulators (v128 pairs, or f64 without SIMD) per pass over the touched buckets."""
TABLE = 16
"""Counts below this take ``count / norm`` from a per-call table instead of dividing."""


def i32_const(v: int) -> int:
    """``v`` mod 2**32 as a signed i32 literal."""
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


def f64_text(x: float) -> str:
    """Exact WAT literal of a float (hexadecimal float notation)."""
    return float(x).hex()


_ESC = [chr(c) if 0x20 <= c < 0x7F and c not in (0x22, 0x5C) else "\\%02x" % c
        for c in range(256)]


def wat_bytes(data: bytes) -> str:
    """``data`` as the body of a WAT string literal (printable ASCII kept, the rest ``\\hh``)."""
    return "".join([_ESC[c] for c in data])


@dataclass
class Layout:
    """Addresses (bytes) of every static region, the constants' bytes, and sizes."""

    consts: bytearray
    errtab: int
    clstab: int
    nc: tuple[int, int]
    field: tuple[int, int]
    counts: int
    touched: int
    tree: int
    xs: int
    table: int
    weights: int
    heap: int
    out_max: int
    pages: int
    H2: int


def _align(x: int, a: int) -> int:
    return (x + a - 1) // a * a


def put_errors(put) -> int:
    """Place the error objects and the error table (``(ptr, len)`` i32 pairs, 8-aligned, indexed
    by status code; entry 0 repeats ``bad_json``) with ``put(bytes, align) -> address``; returns
    the table's address (the prelude's ``@ERRTAB@``)."""
    errs = [canonical_json({"error": c}).encode() for c in ERROR_CODES]
    at = [put(e) for e in errs]
    pairs = [(at[0], len(errs[0]))] + [(a, len(e)) for a, e in zip(at, errs)]
    return put(b"".join(struct.pack("<ii", a, n) for a, n in pairs), 8)


def layout(model, simd: bool) -> Layout:
    """Place the constants and regions for ``model`` (see the memory map above)."""
    B = model.features.buckets
    buf = bytearray(16)

    def put(b: bytes, align: int = 1) -> int:
        while len(buf) % align:
            buf.append(0)
        at = len(buf)
        buf.extend(b)
        return at

    errtab = put_errors(put)
    pre = [b'{"answer":' + c.encode() + b',"margin":' for c in model.classes]
    pre_at = [put(p) for p in pre]
    nc = b',"nonconformity":'
    nc_at = put(nc)
    fld = model.features.field.encode("utf-8")
    fld_at = put(fld)
    clstab = put(b"".join(struct.pack("<ii", p, len(s)) for p, s in zip(pre_at, pre)), 8)
    counts = _align(len(buf), 16)
    touched = counts + 4 * B
    tree = _align(touched + 4 * (B + 1), 16)  # one spare slot: the branch-free write
    n_nodes = model.tree.feature.shape[0] if model.tree is not None else 0
    H = model.n_rows + model.n_prototypes
    H2 = H + (H & 1) if simd else H
    xs = _align(tree + 24 * n_nodes, 16)
    table = xs + 8 * B
    weights = table + 8 * TABLE
    heap = _align(weights + 4 * B * H2, 16) + 16
    out_max = max(len(p) for p in pre) + len(nc) + 2 * FIXED_MAX + 1 + 16
    pages = (heap + HEAP_SLACK + PAGE - 1) // PAGE
    return Layout(buf, errtab, clstab, (nc_at, len(nc)), (fld_at, len(fld)), counts, touched,
                   tree, xs, table, weights, heap, out_max, pages, H2)


def segments(base: int, data: bytes) -> list[str]:
    """Data segments for ``data`` at ``base``, skipping zero runs of at least GAP bytes."""
    a = np.frombuffer(data, np.uint8)
    nz = np.flatnonzero(a)
    if nz.size == 0:
        return []
    breaks = np.flatnonzero(np.diff(nz) > GAP)
    starts = np.concatenate([[nz[0]], nz[breaks + 1]])
    ends = np.concatenate([nz[breaks], [nz[-1]]]) + 1
    return [f'  (data (i32.const {base + int(s)}) "{wat_bytes(data[int(s):int(e)])}")'
            for s, e in zip(starts, ends)]


def weight_bytes(model, H2: int) -> bytes:
    """Little-endian f32 weights, bucket-major ``[B, H2]``: linear rows, prototypes, zero pad."""
    B = model.features.buckets
    blk = np.zeros((B, H2), np.float32)
    R = model.n_rows
    if R:
        blk[:, :R] = model.W.T
    blk[:, R:R + model.n_prototypes] = model.P.T
    return blk.astype("<f4").tobytes()


def tree_bytes(model) -> bytes:
    """24-byte tree nodes; child links are byte offsets (node * 24), leaves have feature -1."""
    t = model.tree
    out = bytearray()
    for i in range(t.feature.shape[0]):
        if t.feature[i] < 0:
            out += struct.pack("<iiiid", -1, int(t.leaf_class[i]), 0, 0, float(t.leaf_margin[i]))
        else:
            out += struct.pack("<iiiid", int(t.feature[i]), 24 * int(t.left[i]),
                               24 * int(t.right[i]), 0, float(t.threshold[i]))
    return bytes(out)


