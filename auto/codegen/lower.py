"""Lowering a :class:`~auto.distill.CompiledModel` to WebAssembly text (our own code generator).

The module is the hand-written prelude (``prelude.wat``: allocator, JSON reader and validator,
fixed-number writer, ``run`` / ``run_batch``) with its at-sign tokens filled in from the layout
(:mod:`auto.codegen.layout`), plus the generated ``$eval`` (:mod:`auto.codegen.kernel`), plus
the data segments. The same model always gives the same text. A
:class:`~auto.codegen.table.TableModel` goes to :mod:`auto.codegen.table_lower`.
"""

from __future__ import annotations

import re
from importlib import resources

import numpy as np

from auto.errors import CodegenError

from .kernel import STRING_FAST
from .layout import (MAX_BATCH, MAX_INPUT, Layout, layout, segments, tree_bytes, wat_bytes,
                     weight_bytes)
from .table import TableModel


def prelude() -> str:
    """The prelude's text, at-sign tokens unfilled."""
    return resources.files("auto.codegen").joinpath("prelude.wat").read_text("utf-8")


_prelude = prelude  # the name older callers use


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


def specialist_static(model, simd: bool) -> tuple[Layout, dict, list[str]]:
    """A specialist's static part: its layout, the prelude tokens that depend on it (all but
    ``HEAP`` and ``OUT_MAX``) and its data segments (constants, tree, weights).

    Raises:
        CodegenError: non-finite weights.
    """
    arrays = [model.W, model.b, model.P]
    if model.tree is not None:
        arrays += [model.tree.threshold, model.tree.leaf_margin]
    if not all(np.isfinite(a).all() for a in arrays):
        raise CodegenError("model has NaN or infinite weights; cannot lower it")
    L = layout(model, simd)
    subst = {"STRING_FAST": STRING_FAST if simd else "",
             "STRING_LOCALS": "(local $v v128)" if simd else "",
             "MAX_INPUT": MAX_INPUT, "MAX_BATCH": MAX_BATCH,
             "ERRTAB": L.errtab, "FIELD": L.field[0], "FIELD_LEN": L.field[1],
             "COUNTS": L.counts, "TOUCHED": L.touched,
             "COUNTS_BYTES": 4 * model.features.buckets, "MASK4": 4 * (model.features.buckets - 1)}
    data = [f'  (data (i32.const 0) "{wat_bytes(bytes(L.consts))}")']
    if model.tree is not None:
        data += segments(L.tree, tree_bytes(model))
    data += segments(L.weights, weight_bytes(model, L.H2))
    return L, subst, data


def lower(model, *, simd: bool = True) -> str:
    """WebAssembly text of the artifact for ``model`` (deterministic: same model, same text).

    Args:
        model: an :class:`auto.distill.CompiledModel`, or a
            :class:`~auto.codegen.table.TableModel` (lowered by
            :func:`auto.codegen.table_lower.lower_table`; same ABI, same guarantees).
        simd: use wasm SIMD (on by default in wasmtime): four n-gram hashes at once, 16-byte
            string scanning, two f64 accumulators per lane pair. Results are bit-identical
            either way; ``False`` gives a module without any v128 instruction.

    Returns:
        The WAT module text (exports exactly ``memory``, ``alloc``, ``run``, ``run_batch``; no
        imports).

    Raises:
        CodegenError: non-finite weights, or a model too large for a 32-bit memory.
    """
    if isinstance(model, TableModel):
        from .table_lower import lower_table
        return lower_table(model, simd=simd)
    from .kernel import eval_func
    L, subst, data = specialist_static(model, simd)
    if L.heap > (1 << 30):
        raise CodegenError(f"model needs {L.heap} bytes of static memory (limit 1 GiB)")
    pre = fill(prelude(), {**subst, "HEAP": L.heap, "OUT_MAX": L.out_max})
    return ("(module\n"
            f"  (memory (export \"memory\") {L.pages})\n"
            + pre + eval_func(model, L, simd) + "\n".join(data) + "\n)\n")
