"""The auto.manifest custom section: encoding, determinism, reading back, refusals."""

from __future__ import annotations

import hashlib

import pytest
import wasmtime

from auto.canonical import canonical_bytes
from auto.emit import custom_section, emit, leb128, read_manifest, sections
from auto.errors import MalformedArtifact, ManifestError

CODE = wasmtime.wat2wasm('(module (memory (export "memory") 1) (func (export "f") (result i32) i32.const 7))')
MANIFEST = {"format": "auto.artifact/1", "task": "triage", "generation": 1,
            "model": {"classes": ["b", "a", "ü"], "prototypes": 3},
            "guard": {"alpha": 0.05, "calibration_scores": [0.1, 0.25]}, "latency_us": None}


@pytest.mark.parametrize("n,enc", [(0, b"\x00"), (1, b"\x01"), (127, b"\x7f"), (128, b"\x80\x01"),
                                   (300, b"\xac\x02"), (624485, b"\xe5\x8e\x26"),
                                   (2**32 - 1, b"\xff\xff\xff\xff\x0f")])
def test_leb128(n, enc):
    assert leb128(n) == enc


def test_emit_layout_and_roundtrip():
    art = emit(CODE, MANIFEST)
    assert art.startswith(bytes(CODE))
    stored = {**MANIFEST, "manifest_digest": "sha256:" + hashlib.sha256(canonical_bytes(MANIFEST)).hexdigest()}
    payload = canonical_bytes(stored)
    tail = art[len(CODE):]
    name = b"auto.manifest"
    assert tail == b"\x00" + leb128(1 + len(name) + len(payload)) + bytes([len(name)]) + name + payload
    assert read_manifest(art) == stored
    assert emit(CODE, stored) == art  # re-emitting a stored manifest recomputes the same digest
    assert emit(CODE, MANIFEST) == art  # deterministic
    assert emit(CODE, dict(reversed(list(MANIFEST.items())))) == art  # key order does not matter
    # still a valid module that wasmtime loads and runs
    store = wasmtime.Store()
    inst = wasmtime.Instance(store, wasmtime.Module(store.engine, art), [])
    assert inst.exports(store)["f"](store) == 7


def test_large_manifest_multibyte_size():
    m = {"calibration_scores": [i / 7 for i in range(2000)]}
    art = emit(CODE, m)
    assert {k: v for k, v in read_manifest(art).items() if k != "manifest_digest"} == m
    kinds = [(sid, name) for sid, name, _, _ in sections(art)]
    assert kinds[-1] == (0, "auto.manifest")


def test_refusals():
    art = emit(CODE, MANIFEST)
    with pytest.raises(ManifestError, match="already"):
        emit(art, MANIFEST)
    with pytest.raises(ManifestError):
        emit(CODE, {"x": float("nan")})
    with pytest.raises(ManifestError):
        emit(CODE, {"x": object()})
    with pytest.raises(ManifestError):
        emit(CODE, ["not", "an", "object"])
    with pytest.raises(MalformedArtifact):
        emit(b"\x00asm\x02\x00\x00\x00", MANIFEST)
    with pytest.raises(MalformedArtifact):
        read_manifest(b"not wasm")
    with pytest.raises(MalformedArtifact):
        read_manifest(art[:-3])  # truncated section
    with pytest.raises(ManifestError, match="found 0"):
        read_manifest(bytes(CODE))
    with pytest.raises(ManifestError, match="found 2"):
        read_manifest(art + custom_section("auto.manifest", b"{}"))
    with pytest.raises(ManifestError, match="canonical"):
        read_manifest(bytes(CODE) + custom_section("auto.manifest", b'{"b": 1, "a": 2}'))
    with pytest.raises(ManifestError):
        read_manifest(bytes(CODE) + custom_section("auto.manifest", b"\xff"))
    with pytest.raises(ManifestError):
        read_manifest(bytes(CODE) + custom_section("auto.manifest", b"NaN"))
    other = bytes(CODE) + custom_section("name-ish", b"\x01\x02") + custom_section(
        "auto.manifest", canonical_bytes({"a": 1}))
    assert read_manifest(other) == {"a": 1}
