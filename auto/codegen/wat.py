"""WebAssembly text: the literals the code generators write, and assembling the text.

Text format source: the WebAssembly Core Specification 2.0, §6 "Text Format" (integer literals
§6.3.1, float literals §6.3.2 with hexadecimal floats, strings §6.3.3 with ``\\hh`` escapes).
"""

from __future__ import annotations

from auto.errors import CodegenError


def i32_const(v: int) -> int:
    """``v`` mod 2**32 as a signed i32 literal."""
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


def i64_const(v: int) -> int:
    """``v`` mod 2**64 as a signed i64 literal."""
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >= 1 << 63 else v


def f64_text(x: float) -> str:
    """Exact WAT literal of a float (hexadecimal float notation)."""
    return float(x).hex()


_ESC = [chr(c) if 0x20 <= c < 0x7F and c not in (0x22, 0x5C) else "\\%02x" % c
        for c in range(256)]


def wat_bytes(data: bytes) -> str:
    """``data`` as the body of a WAT string literal (printable ASCII kept, the rest ``\\hh``)."""
    return "".join([_ESC[c] for c in data])


def data_segment(address: int, data: bytes) -> str:
    """One active data segment line: ``data`` stored at ``address`` of memory 0."""
    return f'  (data (i32.const {address}) "{wat_bytes(data)}")'


def assemble(wat: str) -> bytes:
    """Assemble WebAssembly text into a binary module with ``wasmtime.wat2wasm``.

    Returns the module bytes (deterministic for the same text).

    Raises:
        CodegenError: the text does not assemble.
    """
    import wasmtime  # loaded on first use: lowering alone does not need the engine

    try:
        return bytes(wasmtime.wat2wasm(wat))
    except Exception as e:  # wasmtime raises its own error types
        raise CodegenError(f"assembling the generated WebAssembly text failed: {e}") from e
