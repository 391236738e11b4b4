"""Lowering a specialist to a WebAssembly artifact: WAT generation, assembling, Python reference.

Public API::

    lower(model, simd=True) -> str          # WebAssembly text (deterministic)
    assemble(wat) -> bytes                  # binary module (wasmtime.wat2wasm)
    compile_model(model, simd=True) -> bytes  # model: CompiledModel or TableModel
    TableModel(entries, fallback=None)      # exact-match table ("memo"), memo-first with a fallback
    fnv1a64(data) -> int                    # the table's hash (FNV-1a 64)
    reference_run(model, data) -> bytes     # what `run` returns, computed in Python
    reference_run_batch(model, data) -> bytes
    fixed(x) -> str                         # the ABI's fixed-number format

The artifact follows the ABI in ``docs/architecture.md``: exports ``memory``, ``alloc``, ``run``,
``run_batch``; no imports. When ``alloc(len)`` cannot provide the bytes (``len > MAX_BATCH``, or
memory cannot grow) it returns the memory size in bytes, a pointer just past the end of memory,
so ``ptr + len`` fails the host's bounds check (it never returns a pointer into the static data).
Per call the heap needs about three times the input plus the output (scratch for decoded
strings, a nesting stack, the answer)."""

from __future__ import annotations

from .prelude import ERROR_CODES, MAX_BATCH, MAX_INPUT
from .reference import fixed, reference_run, reference_run_batch
from .specialist_lower import lower_specialist
from .table import TableModel, canonical_key, fnv1a64
from .table_lower import lower_table, lower_table_parts, table_declaration
from .wat import assemble, fill_last_segment


def lower(model, *, simd: bool = True) -> str:
    """WebAssembly text of the artifact for ``model`` (deterministic: same model, same text).

    Args:
        model: an :class:`auto.models.specialist.train.CompiledModel` (lowered by
            :func:`auto.codegen.specialist_lower.lower_specialist`), or a
            :class:`~auto.codegen.table.TableModel` (lowered by
            :func:`auto.codegen.table_lower.lower_table`; same ABI, same guarantees).
        simd: use wasm SIMD (see :func:`~auto.codegen.specialist_lower.lower_specialist`);
            results are bit-identical either way.

    Returns:
        The WAT module text (exports exactly ``memory``, ``alloc``, ``run``, ``run_batch``; no
        imports).

    Raises:
        CodegenError: non-finite weights, or static data over 1 GiB.
    """
    if isinstance(model, TableModel):
        return lower_table(model, simd=simd)
    return lower_specialist(model, simd=simd)


def compile_model(model, *, simd: bool = True) -> bytes:
    """``assemble(lower(model))``: the artifact's code (no manifest yet; see :mod:`auto.emit`).

    ``model`` is a :class:`~auto.models.specialist.train.CompiledModel` (specialist) or a
    :class:`~auto.codegen.table.TableModel` (exact-match table, optionally memo-first). A
    table's data is placed into the assembled module directly
    (:func:`~auto.codegen.table_lower.lower_table_parts`,
    :func:`~auto.codegen.wat.fill_last_segment`): the same bytes, without a text detour.

    Raises:
        CodegenError: lowering or assembling failed.
    """
    if isinstance(model, TableModel):
        return compile_table(model, simd=simd)[0]
    return assemble(lower(model, simd=simd))


def compile_table(model: TableModel, *, simd: bool = True) -> tuple[bytes, dict | None]:
    """``(code, declaration)`` of a table: :func:`compile_model`'s bytes and the manifest's
    ``model.table`` (:func:`~auto.codegen.table_lower.table_declaration`; None for a table with
    no entries), which lets the runtime answer hits without entering WebAssembly.

    Raises:
        CodegenError: lowering or assembling failed.
    """
    text, base, blob = lower_table_parts(model, simd=simd)
    code = assemble(text)
    if not blob:
        return code, None
    return fill_last_segment(code, base, blob), table_declaration(base, blob, len(model))


__all__ = ["ERROR_CODES", "MAX_BATCH", "MAX_INPUT", "TableModel", "assemble", "canonical_key",
           "compile_model", "compile_table", "fixed", "fnv1a64", "lower", "reference_run", "reference_run_batch"]
