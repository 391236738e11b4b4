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


def _sleb32(v: int) -> bytes:
    """Signed LEB128 of an i32 (the encoding of an ``i32.const`` immediate)."""
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if (v == 0 and not b & 0x40) or (v == -1 and b & 0x40):
            out.append(b)
            return bytes(out)
        out.append(b | 0x80)


def _uleb(data: bytes, pos: int) -> tuple[int, int]:
    """``(value, position after it)`` of the unsigned LEB128 at ``pos``."""
    v = shift = 0
    while True:
        if pos >= len(data) or shift > 35:
            raise CodegenError("assembled module: a truncated or overlong LEB128 in its data section")
        b = data[pos]
        pos += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return v, pos


def fill_last_segment(module: bytes, address: int, data: bytes) -> bytes:
    """``module`` with its last data segment, an empty placeholder ``(data (i32.const address) "")``,
    holding ``data`` instead: the bytes ``assemble`` gives for the segment written out in the
    text, without escaping megabytes of data into text and parsing them back.

    Binary format (the WebAssembly Core Specification 2.0, §5.5.12 data section, §5.2.2 LEB128):
    the section (id 11) is a ``vec`` of segments; an active segment of memory 0 is ``0x00``, the
    expression ``i32.const address end`` (``0x41 <sleb> 0x0B``) and a ``vec(byte)``. The segment
    count does not change, so a data count section (id 12) stays valid.

    Raises:
        CodegenError: the module's last data segment is not that placeholder.
    """
    from auto_runtime.wasm_sections import encode_uleb, parse

    sections = parse(module).sections
    at = next((i for i, sec in enumerate(sections) if sec.id == 11), None)
    if at is None:
        raise CodegenError("assembled module has no data section to fill")
    sec = sections[at]
    start = sections[at - 1].offset + sections[at - 1].size if at else 8
    payload = module[sec.offset:sec.offset + sec.size]
    count, pos = _uleb(payload, 0)
    last = None
    for _ in range(count):
        seg = pos
        if payload[pos:pos + 2] != b"\x00\x41":
            raise CodegenError("assembled module: a data segment that is not active in memory 0 at a constant")
        _, end = _uleb(payload, pos + 2)  # the i32.const immediate (its bytes are compared below)
        if payload[end:end + 1] != b"\x0b":
            raise CodegenError("assembled module: a data segment's offset is not one i32.const")
        n, pos = _uleb(payload, end + 1)
        last = (seg, payload[seg + 2:end], n)
        pos += n
    placeholder = b"\x00\x41" + _sleb32(address) + b"\x0b\x00"
    if last is None or pos != len(payload) or last[1] != _sleb32(address) or last[2] != 0 \
            or not payload.endswith(placeholder):
        raise CodegenError(f"assembled module: its last data segment is not an empty placeholder at {address}")
    body = payload[:-1] + encode_uleb(len(data)) + data
    return module[:start] + b"\x0b" + encode_uleb(len(body)) + body + module[sec.offset + sec.size:]


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
