"""The auto.manifest custom section: encoding, its digest, determinism, reading back, refusals."""

from __future__ import annotations

import hashlib

import pytest
import wasmtime

from auto_runtime import Artifact
from auto_runtime.digest import digest_bytes
from auto_runtime.errors import MalformedArtifact, ManifestError
from auto_runtime.jsonio import canonical_bytes
from auto_runtime.manifest import (
    append_manifest,
    encode_manifest,
    manifest_digest,
    manifest_payload,
    read_manifest,
)
from auto_runtime.wasm_sections import custom_section, encode_uleb, parse

from .wasm_fixtures import echo_wat, manifest

CODE = bytes(wasmtime.wat2wasm('(module (memory (export "memory") 1) (func (export "f") (result i32) i32.const 7))'))
MANIFEST = {"format": "auto.artifact/1", "task": "triage", "generation": 1, "interface": {"input": True},
            "model": {"classes": ["b", "a", "ü"], "prototypes": 3},
            "guard": {"alpha": 0.05, "calibration_scores": [0.1, 0.25]}, "latency_us": None}


def test_digests():
    assert digest_bytes(b"") == "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    expected = "sha256:" + hashlib.sha256(canonical_bytes(MANIFEST)).hexdigest()
    assert manifest_digest(MANIFEST) == expected
    assert manifest_digest({**MANIFEST, "manifest_digest": "sha256:stale"}) == expected
    assert manifest_digest({**MANIFEST, "generation": 2}) != expected


def test_append_layout_and_roundtrip():
    art = append_manifest(CODE, MANIFEST)
    assert art.startswith(CODE)
    stored = {**MANIFEST, "manifest_digest": manifest_digest(MANIFEST)}
    payload = canonical_bytes(stored)
    assert encode_manifest(MANIFEST) == payload
    name = b"auto.manifest"
    assert art[len(CODE):] == b"\x00" + encode_uleb(1 + len(name) + len(payload)) + bytes([len(name)]) + name + payload
    assert read_manifest(art) == stored
    assert manifest_payload(parse(art)) == payload
    assert append_manifest(CODE, stored) == art  # re-emitting a stored manifest recomputes the same digest
    assert append_manifest(CODE, MANIFEST) == art  # deterministic
    assert append_manifest(CODE, dict(reversed(list(MANIFEST.items())))) == art  # key order does not matter
    # still a valid module that wasmtime loads and runs
    store = wasmtime.Store()
    inst = wasmtime.Instance(store, wasmtime.Module(store.engine, art), [])
    assert inst.exports(store)["f"](store) == 7


def test_the_loader_accepts_what_append_writes():
    art = append_manifest(bytes(wasmtime.wat2wasm(echo_wat())), manifest())
    loaded = Artifact.load(art)
    assert loaded.manifest == read_manifest(art)


def test_large_manifest_multibyte_size():
    m = {**MANIFEST, "calibration_scores": [i / 7 for i in range(2000)]}
    art = append_manifest(CODE, m)
    assert {k: v for k, v in read_manifest(art).items() if k != "manifest_digest"} == m
    assert parse(art).custom_sections[-1][0] == "auto.manifest"
    assert parse(art).sections[-1].size > 127  # a size of more than one LEB128 byte


def test_refusals():
    art = append_manifest(CODE, MANIFEST)
    with pytest.raises(ManifestError, match="already"):
        append_manifest(art, MANIFEST)
    with pytest.raises(ManifestError):
        append_manifest(CODE, {"x": float("nan")})
    with pytest.raises(ManifestError):
        append_manifest(CODE, {"x": object()})
    with pytest.raises(ManifestError):
        append_manifest(CODE, ["not", "an", "object"])  # type: ignore[arg-type]
    with pytest.raises(MalformedArtifact):
        append_manifest(b"\x00asm\x02\x00\x00\x00", MANIFEST)
    with pytest.raises(MalformedArtifact):
        read_manifest(b"not wasm")
    with pytest.raises(MalformedArtifact):
        read_manifest(art[:-3])  # truncated section
    with pytest.raises(ManifestError, match="no auto.manifest"):
        read_manifest(CODE)
    with pytest.raises(ManifestError, match="2 auto.manifest sections"):
        read_manifest(art + custom_section("auto.manifest", b"{}"))
    with pytest.raises(ManifestError, match="canonical"):
        read_manifest(CODE + custom_section("auto.manifest", b'{"b": 1, "a": 2}'))
    with pytest.raises(ManifestError):
        read_manifest(CODE + custom_section("auto.manifest", b"\xff"))
    with pytest.raises(ManifestError):
        read_manifest(CODE + custom_section("auto.manifest", b"NaN"))
    with pytest.raises(ManifestError, match="lacks required"):
        read_manifest(CODE + custom_section("auto.manifest", canonical_bytes({"a": 1})))
    edited = CODE + custom_section("auto.manifest", canonical_bytes({**read_manifest(art), "generation": 9}))
    with pytest.raises(ManifestError, match="manifest_digest"):
        read_manifest(edited)
    other = CODE + custom_section("name-ish", b"\x01\x02") + custom_section("auto.manifest", canonical_bytes(MANIFEST))
    assert read_manifest(other) == MANIFEST
