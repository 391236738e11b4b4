"""Lowering a :class:`~auto.models.specialist.train.CompiledModel` (a specialist) to WebAssembly text.

The module is the hand-written prelude (:mod:`auto.codegen.prelude`: allocator, JSON reader and
validator, fixed-number writer, ``run`` / ``run_batch``) with its at-sign tokens filled in from
the layout (:mod:`auto.codegen.layout`), plus the generated ``$eval``
(:mod:`auto.codegen.kernel`), plus the data segments. The same model always gives the same text.
"""

from __future__ import annotations

import numpy as np

from auto.errors import CodegenError

from .kernel import eval_func
from .layout import Layout, layout, support_bytes, tree_bytes, weight_bytes
from .prelude import base_tokens, fill, module_text, prelude
from .static import check_static, segments


def specialist_static(model, simd: bool) -> tuple[Layout, dict, list[str]]:
    """A specialist's static part: its layout, the prelude tokens that depend on it (all but
    ``HEAP`` and ``OUT_MAX``) and its data segments (constants, tree, weights, class support bitmaps).

    Raises:
        CodegenError: non-finite weights.
    """
    arrays = [model.W, model.b, model.P]
    if model.tree is not None:
        arrays += [model.tree.threshold, model.tree.leaf_margin]
    if not all(np.isfinite(a).all() for a in arrays):
        raise CodegenError("model has NaN or infinite weights; cannot lower it")
    L = layout(model, simd)
    subst = {**base_tokens(simd, L.errtab),
             "FIELD": L.field[0], "FIELD_LEN": L.field[1],
             "COUNTS": L.counts, "TOUCHED": L.touched,
             "COUNTS_BYTES": 4 * model.features.buckets, "MASK4": 4 * (model.features.buckets - 1)}
    data = [L.consts.segment()]
    if model.tree is not None:
        data += segments(L.tree, tree_bytes(model))
    data += segments(L.weights, weight_bytes(model, L.H2))
    if L.support is not None:
        data += segments(L.support, support_bytes(model))
    return L, subst, data


def lower_specialist(model, *, simd: bool = True) -> str:
    """WebAssembly text of the artifact for the specialist ``model`` (deterministic).

    Args:
        model: an :class:`auto.models.specialist.train.CompiledModel`.
        simd: use wasm SIMD (on by default in wasmtime): four n-gram hashes at once, 16-byte
            string scanning, two f64 accumulators per lane pair. Results are bit-identical
            either way; ``False`` gives a module without any v128 instruction.

    Returns:
        The WAT module text (exports exactly ``memory``, ``alloc``, ``run``, ``run_batch``; no
        imports).

    Raises:
        CodegenError: non-finite weights, or a model too large for a 32-bit memory.
    """
    L, subst, data = specialist_static(model, simd)
    check_static(L.heap, "model")
    pre = fill(prelude(), {**subst, "HEAP": L.heap, "OUT_MAX": L.out_max})
    return module_text(L.pages, [pre, eval_func(model, L, simd)], data)
