"""auto.emit: the compiler writes what the runtime reads (the section's own tests are in
runtime/tests/test_manifest.py)."""

from __future__ import annotations

import pytest
import wasmtime

from auto.canonical import canonical_bytes, canonical_json, digest
from auto.emit import emit, read_manifest
from auto_runtime import Artifact
from auto_runtime.manifest import manifest_digest

ECHO = """(module (memory (export "memory") 1)
  (data (i32.const 16) "{\\"answer\\":1,\\"nonconformity\\":0.5}")
  (func (export "alloc") (param i32) (result i32) i32.const 1024)
  (func (export "run") (param i32 i32) (result i64)
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 32)))
  (func (export "run_batch") (param i32 i32) (result i64) unreachable))"""
MANIFEST = {"format": "auto.artifact/1", "task": "t", "interface": {"input": {"type": "object"}},
            "guard": {"method": "conformal-novelty", "alpha": 0.1, "calibration_scores": [0.9] * 19}}


def test_emitted_artifacts_load_in_the_runtime():
    art = emit(bytes(wasmtime.wat2wasm(ECHO)), MANIFEST)
    stored = read_manifest(art)
    assert stored == {**MANIFEST, "manifest_digest": manifest_digest(MANIFEST)}
    assert Artifact.load(art).manifest == stored
    assert Artifact.load(art).call({"q": 1})["answer"] == 1


def test_canonical_json_is_the_runtimes():
    obj = {"b": [1, 2.5, None, True], "a": "é", "c": {"z": 0, "y": -0.0}}
    assert canonical_json(obj) == '{"a":"é","b":[1,2.5,null,true],"c":{"y":-0.0,"z":0}}'
    assert canonical_bytes(obj) == canonical_json(obj).encode("utf-8")
    assert digest({}) == "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
    with pytest.raises(ValueError):
        canonical_json({"x": float("nan")})
    with pytest.raises(TypeError):
        canonical_json({"x": object()})
    loop: list = []
    loop.append(loop)
    with pytest.raises(ValueError):
        canonical_json(loop)
