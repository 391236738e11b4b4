"""Python reference of the artifact's ``run`` / ``run_batch`` (bytes in, bytes out).

Built on Python's own ``json`` (an independent JSON reader) and
:meth:`auto.models.specialist.train.CompiledModel.predict_text`; the differential tests compare the wasm against it.

Input rules, shared with the artifact: the input must be UTF-8 JSON (RFC 8259: no NaN/Infinity,
no raw control characters in strings, no lone surrogate escapes, whitespace is space/tab/LF/CR);
error precedence ``too_large`` (input over ``MAX_INPUT`` bytes) > ``bad_json`` > ``wrong_type``
(not an object) > ``missing_field`` > ``wrong_type`` (field not a string); duplicate keys: the last
wins. In a batch, invalid JSON anywhere makes the whole answer ``{"error":"bad_json"}``; a
non-array batch is ``{"error":"wrong_type"}``; an item whose JSON text spans more than
``MAX_INPUT`` bytes answers ``too_large``.

A :class:`~auto.codegen.table.TableModel` is looked up by the item's exact JSON bytes (surrounding
whitespace excluded): table-only inputs need only be objects (no ``missing_field``); memo-first
inputs pass the specialist's field checks first, then the table, then the specialist.
"""

from __future__ import annotations

import json
from typing import Any

from auto.canonical import canonical_json

from .prelude import MAX_BATCH, MAX_INPUT
from .table import HIT_MARGIN, TableModel

_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1


def fixed(x: float) -> str:
    """The ABI's fixed number: ``-?D+.DDDDDDDDD`` from ``trunc(x * 1e9)`` as a signed 64-bit int.

    Saturates like wasm's ``i64.trunc_sat_f64_s`` (NaN -> 0).
    """
    y = x * 1e9
    v = 0 if y != y else (_I64_MAX if y >= 2.0 ** 63 else _I64_MIN if y < -(2.0 ** 63) else int(y))
    a = -v if v < 0 else v
    return ("-" if v < 0 else "") + f"{a // 10**9}.{a % 10**9:09d}"


def _reject(name: str):
    raise ValueError(f"{name} is not JSON")


_DEC = json.JSONDecoder(parse_constant=_reject, parse_int=lambda s: 0, parse_float=lambda s: 0.0,
                        strict=True)
_WS = " \t\n\r"
_WSB = b" \t\n\r"


def _has_surrogate(obj: Any) -> bool:
    stack = [obj]
    while stack:
        o = stack.pop()
        if isinstance(o, str):
            try:
                o.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(o, dict):
            stack.extend(o.keys())
            stack.extend(o.values())
        elif isinstance(o, list):
            stack.extend(o)
    return False


def _load(data: bytes) -> tuple[bool, Any, str]:
    """``(ok, value, text)``; ok is False for anything that is not valid UTF-8 JSON."""
    try:
        text = data.decode("utf-8")
        obj = _DEC.decode(text)
    except (UnicodeDecodeError, ValueError):
        return False, None, ""
    if _has_surrogate(obj):
        return False, None, ""
    return True, obj, text


def _err(code: str) -> bytes:
    return canonical_json({"error": code}).encode()


_HIT_SUFFIX = b',"margin":' + fixed(HIT_MARGIN).encode() + b',"nonconformity":' + fixed(0.0).encode() + b"}"
_MISS = b'{"answer":null,"margin":' + fixed(0.0).encode() + b',"nonconformity":' + fixed(1.0).encode() + b"}"


def _answer(model, obj: Any, size: int, raw: bytes) -> bytes:
    """One item's output; ``raw`` is the item's JSON text (UTF-8, no surrounding whitespace)."""
    table = None
    if isinstance(model, TableModel):
        table, model = model, model.fallback
    if size > MAX_INPUT:
        return _err("too_large")
    if not isinstance(obj, dict):
        return _err("wrong_type")
    if model is not None:
        f = model.features.field
        if f not in obj:
            return _err("missing_field")
        if not isinstance(obj[f], str):
            return _err("wrong_type")
    if table is not None:
        a = table.lookup(raw)
        if a is not None:
            return b'{"answer":' + a.encode("utf-8") + _HIT_SUFFIX
        if model is None:
            return _MISS
    p = model.predict_text(obj[f])
    return (b'{"answer":' + p.label.encode() + b',"margin":' + fixed(p.margin).encode()
            + b',"nonconformity":' + fixed(p.nonconformity).encode() + b"}")


def reference_run(model, data: bytes) -> bytes:
    """What the artifact's ``run`` returns for input ``data`` (UTF-8 bytes).

    Raises:
        RecursionError: nesting deeper than Python's json reader supports (the artifact has no
            such limit).
    """
    if len(data) > MAX_INPUT:
        return _err("too_large")
    ok, obj, _ = _load(data)
    if not ok:
        return _err("bad_json")
    return _answer(model, obj, 0, data.strip(_WSB))


def reference_run_batch(model, data: bytes) -> bytes:
    """What the artifact's ``run_batch`` returns for ``data`` (a JSON array of inputs).

    Raises:
        RecursionError: as :func:`reference_run`.
    """
    if len(data) > MAX_BATCH:
        return _err("too_large")
    ok, obj, text = _load(data)
    if not ok:
        return _err("bad_json")
    if not isinstance(obj, list):
        return _err("wrong_type")
    outs = []
    i = len(text) - len(text.lstrip(_WS)) + 1

    def ws(k: int) -> int:
        while k < len(text) and text[k] in _WS:
            k += 1
        return k

    i = ws(i)
    if text[i] != "]":
        while True:
            val, j = _DEC.raw_decode(text, i)
            raw = text[i:j].encode("utf-8")
            outs.append(_answer(model, val, len(raw), raw))
            i = ws(j)
            if text[i] != ",":
                break
            i = ws(i + 1)
    return b"[" + b",".join(outs) + b"]"
