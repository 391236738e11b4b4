"""auto.emit: what the compiler writes, the runtime loads (the section's own tests are in
runtime/tests/test_manifest.py)."""

from __future__ import annotations

import pytest

from auto.canonical import canonical_bytes, canonical_json, digest
from auto.codegen.program_lower import compile_program
from auto.emit import emit, read_manifest
from auto.models.program import ast as A
from auto_runtime import Artifact
from auto_runtime.manifest import manifest_digest

MANIFEST = {"format": "auto.artifact/1", "task": "t", "compiled_as": "program",
            "interface": {"input": {"type": "object", "properties": {"t": {"type": "string"}},
                                    "required": ["t"]}},
            "guard": {"method": "program"}}


def test_emitted_artifacts_load_in_the_runtime():
    art = emit(compile_program(A.Upper(A.Field("t"))), MANIFEST)
    stored = read_manifest(art)
    assert stored == {**MANIFEST, "manifest_digest": manifest_digest(MANIFEST)}
    loaded = Artifact.load(art)
    assert loaded.manifest == stored
    assert loaded.call({"t": "abc"})["answer"] == "ABC"


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
