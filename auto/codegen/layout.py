"""The memory layout of a specialist artifact (constants, counts, tree, weights, heap) and the
bytes of its tree and weights.

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
    support     u8 [C, ceil(B/8)]  per-class bucket bitmaps, bit ``j & 7`` of byte ``j >> 3``
                             (only with ``model.support``: the unexplained mass)
    heap        per call: input | scratch | nesting stack | output
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from .prelude import FIXED_MAX, put_errors
from .static import StaticData, align, heap_start, pages

GROUP = 8
"""Accumulators (v128 pairs, or f64 without SIMD) per pass over the touched buckets."""
TABLE = 16
"""Counts below this take ``count / norm`` from a per-call table instead of dividing."""


@dataclass
class Layout:
    """Addresses (bytes) of every static region, the constants' bytes, and sizes."""

    consts: StaticData
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
    support: int | None
    support_row: int
    heap: int
    out_max: int
    pages: int
    H2: int


def layout(model, simd: bool) -> Layout:
    """Place the constants and regions for ``model`` (see the memory map above)."""
    B = model.features.buckets
    st = StaticData()
    errtab = put_errors(st)
    pre = [b'{"answer":' + c.encode() + b',"margin":' for c in model.classes]
    pre_at = [st.put(p) for p in pre]
    nc = b',"nonconformity":'
    nc_at = st.put(nc)
    fld = model.features.field.encode("utf-8")
    fld_at = st.put(fld)
    clstab = st.put(b"".join(struct.pack("<ii", p, len(s)) for p, s in zip(pre_at, pre)), 8)
    counts = align(st.end, 16)
    touched = counts + 4 * B
    tree = align(touched + 4 * (B + 1), 16)  # one spare slot: the branch-free write
    n_nodes = model.tree.feature.shape[0] if model.tree is not None else 0
    H = model.n_rows + model.n_prototypes
    H2 = H + (H & 1) if simd else H
    xs = align(tree + 24 * n_nodes, 16)
    table = xs + 8 * B
    weights = table + 8 * TABLE
    support_row = (B + 7) // 8
    support = weights + 4 * B * H2 if getattr(model, "support", None) is not None else None
    heap = heap_start(weights + 4 * B * H2 + (len(model.classes) * support_row if support is not None else 0))
    out_max = max(len(p) for p in pre) + len(nc) + 2 * FIXED_MAX + 1 + 16
    return Layout(st, errtab, clstab, (nc_at, len(nc)), (fld_at, len(fld)), counts, touched,
                  tree, xs, table, weights, support, support_row, heap, out_max, pages(heap), H2)


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




def support_bytes(model) -> bytes:
    """The per-class bucket bitmaps of ``model.support`` (bool ``[C, B]``): ``ceil(B/8)`` bytes per
    class, bucket ``j`` at bit ``j & 7`` of byte ``j >> 3`` (little bit order)."""
    return np.packbits(np.asarray(model.support, dtype=bool), axis=1, bitorder="little").tobytes()
