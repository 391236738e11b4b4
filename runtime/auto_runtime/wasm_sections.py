"""A small, defensive parser of the WebAssembly binary container.

It reads the 8-byte header, walks the section list (LEB128 sizes), and extracts:

- every custom section (id 0) as ``(name, payload)``, in file order;
- the import section (id 2) as :class:`Import` entries (module, name, kind);
- the memory declarations: memories defined in the memory section (id 5) and imported memories,
  as :class:`MemoryDecl` (initial/maximum pages, 64-bit, shared, page size);
- on request (:func:`data_segments`), where each data segment (id 11) lies and what it holds.

It does not validate code; that is wasmtime's job when the module is compiled. Its purpose is to
read what the loader needs *before* compiling (the manifest, the declared memory) and to reject
hostile input cheaply.

Binary format source: the WebAssembly Core Specification 2.0, §5 "Binary Format" (modules §5.5,
LEB128 integers §5.2.2), plus the limits flags of the threads / memory64 / custom-page-sizes
proposals.

Every failure is :class:`~auto_runtime.errors.MalformedArtifact` with the byte offset at fault:
truncated input, garbage, sizes that run past the end, overlong or out-of-range LEB128 values.
The parser never reads past the buffer, never allocates more than the input's size, and runs in
time linear in the input's size (every loop consumes at least one byte per iteration).
"""

from __future__ import annotations

from dataclasses import dataclass

from auto_runtime.errors import MalformedArtifact

WASM_MAGIC = b"\x00asm"
WASM_VERSION_1 = b"\x01\x00\x00\x00"
PAGE_SIZE = 65536
"""Default WebAssembly page size in bytes."""

SECTION_NAMES = {
    0: "custom", 1: "type", 2: "import", 3: "function", 4: "table", 5: "memory", 6: "global",
    7: "export", 8: "start", 9: "element", 10: "code", 11: "data", 12: "datacount", 13: "tag",
}

KIND_FUNC, KIND_TABLE, KIND_MEMORY, KIND_GLOBAL, KIND_TAG = 0, 1, 2, 3, 4
KIND_NAMES = {0: "func", 1: "table", 2: "memory", 3: "global", 4: "tag"}


@dataclass(frozen=True, slots=True)
class Section:
    """One section: ``id``, the offset of its payload in the file and its size (bytes)."""

    id: int
    offset: int
    size: int

    @property
    def kind(self) -> str:
        return SECTION_NAMES.get(self.id, f"unknown-{self.id}")


@dataclass(frozen=True, slots=True)
class Import:
    """One import entry: ``module``, ``name``, ``kind`` ("func", "table", "memory", "global", "tag")."""

    module: str
    name: str
    kind: str


@dataclass(frozen=True, slots=True)
class MemoryDecl:
    """A declared linear memory.

    ``min_pages`` / ``max_pages`` are in pages of ``page_size`` bytes (65536 unless the
    custom-page-sizes proposal is used); ``max_pages`` is ``None`` when unbounded.
    """

    min_pages: int
    max_pages: int | None
    is_64: bool
    shared: bool
    page_size: int
    imported: bool

    @property
    def min_bytes(self) -> int:
        """Initial size in bytes."""
        return self.min_pages * self.page_size


@dataclass(frozen=True, slots=True)
class WasmModuleInfo:
    """What :func:`parse` read from a module's bytes."""

    sections: tuple[Section, ...]
    custom_sections: tuple[tuple[str, bytes], ...]
    imports: tuple[Import, ...]
    memories: tuple[MemoryDecl, ...]

    def custom(self, name: str) -> list[bytes]:
        """Payloads of every custom section called ``name``, in file order."""
        return [payload for n, payload in self.custom_sections if n == name]


class _Reader:
    """Cursor over ``data[pos:end]``; every read is bounds-checked."""

    __slots__ = ("data", "pos", "end", "what")

    def __init__(self, data: bytes, pos: int, end: int, what: str) -> None:
        self.data = data
        self.pos = pos
        self.end = end
        self.what = what

    def fail(self, msg: str, at: int | None = None) -> MalformedArtifact:
        return MalformedArtifact(
            f"malformed WebAssembly ({self.what}) at byte {self.pos if at is None else at}: {msg}"
        )

    def byte(self) -> int:
        if self.pos >= self.end:
            raise self.fail("unexpected end of data")
        b = self.data[self.pos]
        self.pos += 1
        return b

    def uleb(self, bits: int = 32) -> int:
        """Unsigned LEB128 of at most ``ceil(bits / 7)`` bytes whose value fits in ``bits`` bits."""
        return self._leb(bits, signed=False)

    def sleb(self, bits: int) -> int:
        """Signed LEB128 of at most ``ceil(bits / 7)`` bytes."""
        return self._leb(bits, signed=True)

    def _leb(self, bits: int, signed: bool) -> int:
        start = self.pos
        max_bytes = (bits + 6) // 7
        result = 0
        shift = 0
        for _ in range(max_bytes):
            b = self.byte()
            result |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                if signed:
                    if b & 0x40:
                        result -= 1 << shift
                    ok = -(1 << (bits - 1)) <= result < (1 << (bits - 1))
                else:
                    ok = not result >> bits
                if not ok:
                    raise self.fail(f"LEB128 value out of range for {'s' if signed else 'u'}{bits}", start)
                return result
        raise self.fail(f"LEB128 integer longer than {max_bytes} bytes ({'s' if signed else 'u'}{bits})", start)

    def take(self, n: int) -> bytes:
        if n < 0 or n > self.end - self.pos:
            raise self.fail(f"length {n} runs past the end ({self.end - self.pos} bytes left)")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return bytes(out)

    def name(self) -> str:
        at = self.pos
        raw = self.take(self.uleb())
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail("name is not valid UTF-8", at) from None


def _limits(r: _Reader, memory: bool) -> tuple[int, int | None, bool, bool, int]:
    """Limits: (min, max, is_64, shared, page_size_log2)."""
    at = r.pos
    flags = r.uleb()
    if flags > 0x0F:
        raise r.fail(f"unknown limits flags 0x{flags:x}", at)
    has_max = bool(flags & 1)
    shared = bool(flags & 2)
    is_64 = bool(flags & 4)
    custom_page = bool(flags & 8)
    bits = 64 if is_64 else 32
    lo = r.uleb(bits)
    hi = r.uleb(bits) if has_max else None
    page_log2 = 16
    if custom_page:
        if not memory:
            raise r.fail("custom page size on a table", at)
        page_log2 = r.uleb()
        if page_log2 > 16:
            raise r.fail(f"page size 2**{page_log2} is larger than 64 KiB", at)
    return lo, hi, is_64, shared, page_log2


def _reftype_or_valtype(r: _Reader) -> None:
    at = r.pos
    b = r.byte()
    if b in (0x63, 0x64):  # (ref null? ht) with a heap type as s33
        r.sleb(33)
        return
    if 0x68 <= b <= 0x7F:  # number / vector / abstract reference shorthands
        return
    raise r.fail(f"unknown value type 0x{b:02x}", at)


def _parse_imports(data: bytes, sec: Section) -> tuple[list[Import], list[MemoryDecl]]:
    r = _Reader(data, sec.offset, sec.offset + sec.size, "import section")
    count = r.uleb()
    imports: list[Import] = []
    memories: list[MemoryDecl] = []
    for _ in range(count):  # each entry consumes >= 3 bytes, so count is bounded by the size
        module = r.name()
        name = r.name()
        at = r.pos
        kind = r.byte()
        if kind == KIND_FUNC:
            r.uleb()
        elif kind == KIND_TABLE:
            _reftype_or_valtype(r)
            _limits(r, memory=False)
        elif kind == KIND_MEMORY:
            lo, hi, is64, shared, log2 = _limits(r, memory=True)
            memories.append(MemoryDecl(lo, hi, is64, shared, 1 << log2, imported=True))
        elif kind == KIND_GLOBAL:
            _reftype_or_valtype(r)
            mut = r.byte()
            if mut > 1:
                raise r.fail(f"bad global mutability {mut}")
        elif kind == KIND_TAG:
            if r.byte() != 0:
                raise r.fail("bad tag attribute")
            r.uleb()
        else:
            raise r.fail(f"unknown import kind 0x{kind:02x}", at)
        imports.append(Import(module, name, KIND_NAMES[kind]))
    if r.pos != r.end:
        raise r.fail(f"{r.end - r.pos} trailing bytes in the import section")
    return imports, memories


def _parse_memories(data: bytes, sec: Section) -> list[MemoryDecl]:
    r = _Reader(data, sec.offset, sec.offset + sec.size, "memory section")
    count = r.uleb()
    out: list[MemoryDecl] = []
    for _ in range(count):
        lo, hi, is64, shared, log2 = _limits(r, memory=True)
        out.append(MemoryDecl(lo, hi, is64, shared, 1 << log2, imported=False))
    if r.pos != r.end:
        raise r.fail(f"{r.end - r.pos} trailing bytes in the memory section")
    return out


def parse(data: bytes | bytearray | memoryview) -> WasmModuleInfo:
    """Parse a core WebAssembly module's container.

    Args:
        data: the whole module (bytes).

    Returns:
        :class:`WasmModuleInfo` with sections, custom sections, imports and memory declarations.

    Raises:
        MalformedArtifact: not a core WebAssembly module (bad magic, a component, an unknown
            version), truncated, a section running past the end, an overlong or out-of-range
            LEB128, a non-custom section repeated, or an undecodable import/memory section.
    """
    data = bytes(data)
    n = len(data)
    if n < 8:
        raise MalformedArtifact(f"not a WebAssembly module: {n} bytes is shorter than the 8-byte header")
    if data[:4] != WASM_MAGIC:
        raise MalformedArtifact("not a WebAssembly module: bad magic (expected \\0asm)")
    if data[4:8] != WASM_VERSION_1:
        if data[6:8] == b"\x01\x00":
            raise MalformedArtifact("a WebAssembly component, not a core module")
        raise MalformedArtifact(f"unsupported WebAssembly version {data[4:8].hex()}")
    r = _Reader(data, 8, n, "section list")
    sections: list[Section] = []
    customs: list[tuple[str, bytes]] = []
    seen: set[int] = set()
    while r.pos < n:
        at = r.pos
        sid = r.byte()
        if sid not in SECTION_NAMES:
            raise r.fail(f"unknown section id {sid}", at)
        size = r.uleb()
        if size > n - r.pos:
            raise r.fail(
                f"{SECTION_NAMES[sid]} section declares {size} bytes but only {n - r.pos} remain", at
            )
        sec = Section(sid, r.pos, size)
        if sid == 0:
            cr = _Reader(data, sec.offset, sec.offset + size, "custom section")
            name = cr.name()
            customs.append((name, data[cr.pos:sec.offset + size]))
        else:
            if sid in seen:
                raise r.fail(f"duplicate {SECTION_NAMES[sid]} section", at)
            seen.add(sid)
        sections.append(sec)
        r.pos += size
    imports: list[Import] = []
    memories: list[MemoryDecl] = []
    for sec in sections:
        if sec.id == 2:
            imp, mems = _parse_imports(data, sec)
            imports.extend(imp)
            memories.extend(mems)
    for sec in sections:
        if sec.id == 5:
            memories.extend(_parse_memories(data, sec))
    return WasmModuleInfo(tuple(sections), tuple(customs), tuple(imports), tuple(memories))


@dataclass(frozen=True, slots=True)
class DataSegment:
    """One data segment: ``address`` in memory 0 of an active segment whose offset is one
    ``i32.const`` (None for a passive segment), and ``offset`` / ``size`` of its bytes in the file."""

    address: int | None
    offset: int
    size: int


def data_segments(data: bytes | bytearray | memoryview, info: WasmModuleInfo) -> list[DataSegment]:
    """The data segments of the module's data section (id 11), in order; empty without one.

    Binary format (Core Specification 2.0, §5.5.12): a ``vec`` of segments, each ``0`` expr
    vec(byte) (active, memory 0), ``1`` vec(byte) (passive) or ``2`` memidx expr vec(byte)
    (active, explicit memory). Only offsets of the form ``i32.const n end`` (``0x41 sleb32 0x0B``)
    are read: the loader needs no more.

    Raises:
        MalformedArtifact: a truncated segment, an unknown segment flag, an active segment of a
            memory other than 0, or an offset expression other than one ``i32.const``.
    """
    sec = next((s for s in info.sections if s.id == 11), None)
    if sec is None:
        return []
    data = bytes(data) if not isinstance(data, bytes) else data
    r = _Reader(data, sec.offset, sec.offset + sec.size, "data section")
    out: list[DataSegment] = []
    for _ in range(r.uleb()):
        at = r.pos
        flag = r.uleb()
        address: int | None = None
        if flag in (0, 2):
            if flag == 2 and r.uleb() != 0:
                raise r.fail("a data segment of a memory other than 0", at)
            if r.byte() != 0x41:
                raise r.fail("a data segment offset that is not an i32.const", at)
            address = r.sleb(32) & 0xFFFFFFFF
            if r.byte() != 0x0B:
                raise r.fail("a data segment offset that is not one i32.const", at)
        elif flag != 1:
            raise r.fail(f"unknown data segment flag {flag}", at)
        n = r.uleb()
        if n > r.end - r.pos:
            raise r.fail(f"data segment of {n} bytes runs past the end", at)
        out.append(DataSegment(address, r.pos, n))
        r.pos += n
    if r.pos != r.end:
        raise r.fail(f"{r.end - r.pos} trailing bytes in the data section")
    return out


def encode_uleb(value: int) -> bytes:
    """Unsigned LEB128 encoding of ``value`` (>= 0)."""
    if value < 0:
        raise ValueError("uleb128 of a negative number")
    out = bytearray()
    while True:
        b = value & 0x7F
        value >>= 7
        if value:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def custom_section(name: str, payload: bytes) -> bytes:
    """Bytes of a custom section (id 0) called ``name`` holding ``payload``."""
    raw_name = name.encode("utf-8")
    body = encode_uleb(len(raw_name)) + raw_name + payload
    return b"\x00" + encode_uleb(len(body)) + body
