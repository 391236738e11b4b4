"""The container parser: valid modules, and hostile bytes that must give MalformedArtifact."""

from __future__ import annotations

import random

import pytest
import wasmtime

from auto_runtime.errors import MalformedArtifact
from auto_runtime.wasm_sections import custom_section, encode_uleb, parse

from .wasm_fixtures import build, echo_wat

HEADER = b"\x00asm\x01\x00\x00\x00"


def test_parses_sections_custom_memory_and_imports():
    wasm = bytes(wasmtime.wat2wasm("""
      (module
        (import "env" "log" (func (param i32)))
        (import "env" "mem" (memory 2 10))
        (memory 3)
        (func (export "f")))"""))
    wasm += custom_section("auto.manifest", b"{}") + custom_section("other", b"xyz")
    info = parse(wasm)
    assert info.custom("auto.manifest") == [b"{}"]
    assert info.custom("other") == [b"xyz"]
    assert info.custom("missing") == []
    assert [(i.module, i.name, i.kind) for i in info.imports] == [
        ("env", "log", "func"), ("env", "mem", "memory")]
    mems = sorted((m.min_pages, m.max_pages, m.imported) for m in info.memories)
    assert mems == [(2, 10, True), (3, None, False)]
    assert info.memories[-1].min_bytes == 3 * 65536


def test_echo_artifact_has_one_manifest():
    info = parse(build(echo_wat()))
    assert len(info.custom("auto.manifest")) == 1
    assert {s.kind for s in info.sections} >= {"type", "function", "memory", "export", "code", "custom"}


@pytest.mark.parametrize("data, what", [
    (b"", "shorter than the 8-byte header"),
    (b"\x00as", "shorter than the 8-byte header"),
    (b"\x7fELF\x02\x01\x01\x00" + b"\x00" * 64, "bad magic"),
    (b"\x00asm\x02\x00\x00\x00", "unsupported WebAssembly version"),
    (b"\x00asm\x0d\x00\x01\x00", "component"),
    (HEADER + b"\x01", "unexpected end"),                       # section id, no size
    (HEADER + b"\x01\x05\x00", "only 1 remain"),                 # size past the end
    (HEADER + b"\x01\xff\xff\xff\xff\x0f", "remain"),            # 4 GiB section in a tiny file
    (HEADER + b"\x01\x80\x80\x80\x80\x80\x00", "longer than 5 bytes"),  # overlong LEB
    (HEADER + b"\x01\xff\xff\xff\xff\x7f", "out of range"),      # > u32 in 5 bytes
    (HEADER + b"\x0e\x00", "unknown section id"),
    (HEADER + b"\x01\x00\x01\x00", "duplicate type section"),
    (HEADER + b"\x00\x01\x05", "runs past the end"),             # custom name longer than section
    (HEADER + b"\x00\x02\x01\xff", "not valid UTF-8"),
    (HEADER + b"\x05\x02\x01\x10", "unknown limits flags"),
    (HEADER + b"\x05\x04\x01\x00\x01\x00", "trailing bytes"),
])
def test_hostile_containers(data, what):
    with pytest.raises(MalformedArtifact, match=what):
        parse(data)


def test_random_mutations_never_escape_malformed():
    base = build(echo_wat())
    rng = random.Random(1234)
    for _ in range(1500):
        data = bytearray(base)
        for _ in range(rng.randint(1, 6)):
            op = rng.random()
            pos = rng.randrange(len(data))
            if op < 0.5:
                data[pos] = rng.randrange(256)
            elif op < 0.8:
                del data[pos:pos + rng.randint(1, 40)]
            else:
                data[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        try:
            parse(bytes(data))
        except MalformedArtifact:
            pass
    for _ in range(300):
        junk = HEADER + bytes(rng.randrange(256) for _ in range(rng.randint(0, 200)))
        try:
            parse(junk)
        except MalformedArtifact:
            pass


@pytest.mark.parametrize("n,enc", [(0, b"\x00"), (1, b"\x01"), (127, b"\x7f"), (128, b"\x80\x01"),
                                   (300, b"\xac\x02"), (624485, b"\xe5\x8e\x26"),
                                   (2**32 - 1, b"\xff\xff\xff\xff\x0f")])
def test_encode_uleb(n, enc):
    assert encode_uleb(n) == enc


def test_encode_uleb_refuses_negative():
    with pytest.raises(ValueError):
        encode_uleb(-1)


def test_custom_section_bytes():
    assert custom_section("ab", b"xyz") == b"\x00\x06\x02abxyz"
    big = custom_section("n", b"\x00" * 200)
    assert big[:3] == b"\x00\xca\x01" and big[3:5] == b"\x01n"  # size 202 in two LEB128 bytes


def test_uleb_roundtrip():
    for v in (0, 1, 127, 128, 300, 2**32 - 1):
        raw = b"\x01" + encode_uleb(v)
        # a "type" section of size v: parse must complain about size, not mis-decode it
        if v:
            with pytest.raises(MalformedArtifact, match=f"declares {v} bytes"):
                parse(HEADER + raw)
