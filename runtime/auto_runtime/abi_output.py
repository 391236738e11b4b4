"""Reading an artifact's output bytes into checked ABI output objects.

An ABI output object (``run``) is a JSON object with an ``answer`` (and, when present, numbers
``margin`` and ``nonconformity``) or an ``error`` string; ``run_batch`` answers a JSON array of
them, one per input. :func:`read_one` and :func:`read_many` decode the bytes strictly
(:func:`auto_runtime.jsonio.strict_loads`) and check that shape.
"""

from __future__ import annotations

from typing import Any

from auto_runtime.errors import OutputError
from auto_runtime.jsonio import strict_loads


def check_output_item(obj: Any, where: str) -> Any:
    """``obj`` when it is an ABI output object, else :class:`OutputError` naming ``where``."""
    if obj.__class__ is not dict:
        raise OutputError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    if "answer" in obj:
        for key in ("nonconformity", "margin"):
            v = obj.get(key)
            if v is not None and (v.__class__ is bool or not isinstance(v, (int, float))):
                raise OutputError(f"{where}: {key!r} must be a number, got {v!r:.60}")
        return obj
    if isinstance(obj.get("error"), str):
        return obj
    raise OutputError(f"{where}: output object has neither 'answer' nor an 'error' string")


def read_one(raw: bytes, _n: int = 1) -> dict[str, Any]:
    """The checked output object of ``run``'s bytes.

    Raises:
        ValueError: not valid JSON. OutputError: not an ABI output object.
    """
    out = strict_loads(raw)
    if out.__class__ is not dict or "answer" not in out or out.get("nonconformity").__class__ is not float:
        out = check_output_item(out, "artifact output")  # the common well-formed shape skips the full check
    return out


def read_many(raw: bytes, n: int) -> list[dict[str, Any]]:
    """The checked output objects of ``run_batch``'s bytes for ``n`` inputs.

    Raises:
        ValueError: not valid JSON. OutputError: not a JSON array of ``n`` ABI output objects.
    """
    out = strict_loads(raw)
    if out.__class__ is not list or len(out) != n:
        raise OutputError(
            f"run_batch output must be a JSON array of {n} objects, got "
            + (f"{len(out)} items" if isinstance(out, list) else type(out).__name__)
        )
    for i, item in enumerate(out):
        if item.__class__ is not dict or "answer" not in item or item.get("nonconformity").__class__ is not float:
            check_output_item(item, f"run_batch output[{i}]")
    return out


__all__ = ["check_output_item", "read_many", "read_one"]
