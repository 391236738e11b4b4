"""Artifact.load / call / call_batch: the ABI, verification at load, and the sandbox limits."""

from __future__ import annotations

import hashlib
import json
import random
import time

import pytest
import wasmtime

from auto_runtime import Artifact, Limits
from auto_runtime.errors import (
    ArtifactError,
    ArtifactIdMismatch,
    CallTimeout,
    CapabilityError,
    FuelExhausted,
    InputSchemaError,
    LimitError,
    MalformedArtifact,
    ManifestError,
    MemoryLimitExceeded,
    OutputError,
    TrapError,
)

from .wasm_fixtures import (
    BAD_LENGTH_WAT,
    BAD_POINTER_WAT,
    COUNTER_WAT,
    DELETE,
    GROW_BOMB_WAT,
    LOOP_WAT,
    UNREACHABLE_WAT,
    abi_wat,
    build,
    canonical,
    const_output_wat,
    custom_section,
    echo_wat,
    manifest,
)

PATHS = ["fast", "checked"]
SMALL = Limits(fuel=2_000_000, memory_bytes=4 * 1024 * 1024, timeout_ms=2000)


@pytest.fixture(scope="module")
def echo_bytes() -> bytes:
    return build(echo_wat())


# ------------------------------------------------------------------------------ happy path


@pytest.mark.parametrize("path", PATHS)
def test_echo_follows_the_abi(echo_bytes, path):
    art = Artifact.load(echo_bytes, call_path=path)
    assert art.call_path == path
    assert art.id == "sha256:" + hashlib.sha256(echo_bytes).hexdigest()
    assert art.task == "echo" and art.generation == 1
    out = art.call({"ticket": "héllo \"world\" ✓"})
    assert out == {"answer": {"ticket": "héllo \"world\" ✓"}, "margin": 1.0, "nonconformity": 0.5}
    # repeated calls reuse the instance
    for i in range(50):
        assert art.call({"ticket": str(i)})["answer"] == {"ticket": str(i)}
    assert art.instantiations == 1


@pytest.mark.parametrize("path", PATHS)
def test_call_batch(echo_bytes, path):
    art = Artifact.load(echo_bytes, call_path=path)
    inputs = [{"ticket": t} for t in ["a", "b,]}", 'q"uote\\', "", "x" * 1000]]
    outs = art.call_batch(inputs)
    assert [o["answer"] for o in outs] == inputs
    assert art.call_batch([]) == []
    texts = [json.dumps(x, sort_keys=True, separators=(",", ":"), ensure_ascii=False) for x in inputs]
    assert art.call_batch_texts(texts) == outs and art.call_batch_texts([]) == []
    with pytest.raises(OutputError):  # one text that is not JSON: the batch itself is malformed
        art.call_batch_texts(texts[:2] + ['{"ticket":'])
    keys = [t.encode("utf-8") for t in texts]  # the same inputs as their canonical bytes
    assert art.call_batch_encoded(keys) == outs
    with pytest.raises(OutputError):
        art.call_batch_encoded(keys[:2] + [b'{"ticket":'])


def test_large_input_grows_memory(echo_bytes):
    art = Artifact.load(echo_bytes)
    big = {"ticket": "z" * 300_000}
    assert art.call(big)["answer"] == big


def test_load_from_path_and_expected_id(tmp_path, echo_bytes):
    p = tmp_path / "echo.wasm"
    p.write_bytes(echo_bytes)
    aid = "sha256:" + hashlib.sha256(echo_bytes).hexdigest()
    art = Artifact.load(p, expected_id=aid)
    assert art.id == aid
    assert art.describe()["exports"] == ["memory", "alloc", "run", "run_batch"]
    with pytest.raises(ArtifactIdMismatch, match="expected sha256:0000"):
        Artifact.load(str(p), expected_id="sha256:" + "0" * 64)
    with pytest.raises(ArtifactError, match="cannot read"):
        Artifact.load(tmp_path / "missing.wasm")


# ------------------------------------------------------------------------------ refused at load


def test_missing_manifest():
    with pytest.raises(ManifestError, match="no auto.manifest"):
        Artifact.load(build(echo_wat(), with_manifest=False))


@pytest.mark.parametrize("payload, what", [
    (b"not json", "not valid JSON"),
    (b"\xff\xfe", "not valid JSON"),
    (b"[1,2]", "must be a JSON object"),
    (b'"str"', "must be a JSON object"),
    (b'{"task":"echo"}', "lacks required key"),
    (b"NaN", "not valid JSON"),
    (b"[" * 100_000, "not valid JSON"),
])
def test_corrupt_manifest(payload, what):
    with pytest.raises(ManifestError, match=what):
        Artifact.load(build(echo_wat(), raw_manifest=payload))


def test_non_canonical_manifest():
    m = manifest()
    pretty = __import__("json").dumps(m, indent=1).encode()
    with pytest.raises(ManifestError, match="not canonical"):
        Artifact.load(build(echo_wat(), raw_manifest=pretty))
    dup = canonical(m)[:-1] + b',"task":"other"}'
    with pytest.raises(ManifestError, match="not canonical|'task' twice"):
        Artifact.load(build(echo_wat(), raw_manifest=dup))


@pytest.mark.parametrize("overrides, what", [
    ({"guard": DELETE}, "guard"),
    ({"interface": DELETE}, "interface"),
    ({"format": "auto.artifact/2"}, "unsupported manifest format"),
    ({"task": ""}, "task"),
    ({"generation": "one"}, "generation"),
    ({"interface": {"output": {}}}, "lacks 'input'"),
    ({"interface": {"input": {"type": "object", "pattern": "x"}}}, "unsupported JSON-schema keyword"),
    ({"capabilities": "none"}, "capabilities"),
    ({"capabilities": [{"module": "env"}]}, "capabilities\\[0\\]"),
])
def test_manifest_structure(overrides, what):
    with pytest.raises(ManifestError, match=what):
        Artifact.load(build(echo_wat(), manifest(**overrides)))


def test_two_manifests_refused(echo_bytes):
    with pytest.raises(ManifestError, match="2 auto.manifest"):
        Artifact.load(echo_bytes + custom_section("auto.manifest", canonical(manifest())))


def test_truncated_file(echo_bytes):
    for cut in (0, 4, 8, 9, len(echo_bytes) // 2, len(echo_bytes) - 1):
        with pytest.raises((MalformedArtifact, ManifestError)):
            Artifact.load(echo_bytes[:cut])


def test_random_bytes():
    rng = random.Random(7)
    for n in (0, 3, 8, 100, 5000):
        with pytest.raises(MalformedArtifact):
            Artifact.load(bytes(rng.randrange(256) for _ in range(n)))
    # a valid header and garbage after it
    with pytest.raises(MalformedArtifact):
        Artifact.load(b"\x00asm\x01\x00\x00\x00" + bytes(rng.randrange(256) for _ in range(500)))


def test_invalid_code_with_valid_framing():
    wasm = bytearray(bytes(wasmtime.wat2wasm(echo_wat())))
    # corrupt the code section's body but keep the framing: wasmtime's validator refuses it
    info = __import__("auto_runtime.wasm_sections", fromlist=["parse"]).parse(bytes(wasm))
    code = next(s for s in info.sections if s.kind == "code")
    for i in range(code.offset + 4, code.offset + code.size - 1):
        wasm[i] = 0xFF
    with pytest.raises(MalformedArtifact, match="not a valid WebAssembly module"):
        Artifact.load(bytes(wasm) + custom_section("auto.manifest", canonical(manifest())))


def test_undeclared_import_is_named():
    wat = abi_wat("(i64.const 0)", imports='(import "env" "read_file" (func (param i32)))')
    with pytest.raises(CapabilityError, match="env.read_file"):
        Artifact.load(build(wat))


def test_declared_capability_not_imported():
    m = manifest(capabilities=[{"module": "env", "name": "clock"}])
    with pytest.raises(CapabilityError, match="does not import"):
        Artifact.load(build(echo_wat(), m), host_functions={"env.clock": lambda: 0})


def test_memory_import_cannot_be_a_capability():
    wat = abi_wat("(i64.const 0)", imports='(import "env" "mem" (memory 1))',
                  memory='(memory (export "memory") 1)')
    # the module imports a memory and defines another; the import is refused first
    m = manifest(capabilities=[{"module": "env", "name": "mem"}])
    with pytest.raises((CapabilityError, MalformedArtifact)):
        Artifact.load(build(wat, m))


def test_capability_with_host_function():
    wat = abi_wat(
        "(call $seen (local.get $n))\n"
        "    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 13))",
        imports='(import "host" "seen" (func $seen (param i32)))',
        extra='(data (i32.const 16) "{\\"error\\":\\"x\\"}")',
    )
    m = manifest(capabilities=[{"module": "host", "name": "seen"}])
    with pytest.raises(CapabilityError, match="provides no function"):
        Artifact.load(build(wat, m))
    seen: list[int] = []
    art = Artifact.load(build(wat, m), host_functions={("host", "seen"): seen.append})
    assert art.call({"ticket": "abc"}) == {"error": "x"}
    assert seen == [len(b'{"ticket":"abc"}')]
    assert art.describe()["imports"] == ["host.seen"]

    def boom(n):
        raise RuntimeError("host failure")

    art = Artifact.load(build(wat, m), host_functions={"host.seen": boom})
    with pytest.raises(TrapError, match="host"):
        art.call({"ticket": "abc"})
    with pytest.raises(TrapError, match="RuntimeError"):  # fresh instance, host still raises
        art.call({"ticket": "again"})


def test_huge_initial_memory_refused_at_load():
    wat = echo_wat().replace('(memory (export "memory") 1)', '(memory (export "memory") 2000)')
    with pytest.raises(MemoryLimitExceeded, match="initial memory of 131072000 bytes"):
        Artifact.load(build(wat))
    small = Limits(memory_bytes=1 << 20)
    wat2 = echo_wat().replace('(memory (export "memory") 1)', '(memory (export "memory") 17)')
    with pytest.raises(MemoryLimitExceeded):
        Artifact.load(build(wat2), limits=small)


@pytest.mark.parametrize("wat, what", [
    ("(module (memory (export \"memory\") 1))", "no export 'alloc'"),
    ("(module (memory (export \"memory\") 1) (func (export \"alloc\") (param i32) (result i32) i32.const 0)"
     " (func (export \"run\") (param i32) (result i64) i64.const 0))", "export 'run' must be"),
    ("(module (func (export \"alloc\") (param i32) (result i32) i32.const 0)"
     " (func (export \"run\") (param i32 i32) (result i64) i64.const 0))", "no export 'memory'"),
])
def test_abi_exports_checked(wat, what):
    with pytest.raises(MalformedArtifact, match=what):
        Artifact.load(build(wat))


def test_run_batch_optional_when_not_promised():
    wat = ("(module (memory (export \"memory\") 1)"
           " (data (i32.const 16) \"{\\\"answer\\\":1,\\\"nonconformity\\\":0.5}\")"
           " (func (export \"alloc\") (param i32) (result i32) i32.const 1024)"
           " (func (export \"run\") (param i32 i32) (result i64)"
           "   (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 32))))")
    m = manifest(abi={"exports": ["memory", "alloc", "run"], "encoding": "canonical-json"})
    art = Artifact.load(build(wat, m))
    assert not art.has_run_batch
    assert art.call_batch([{"ticket": "a"}, {"ticket": "b"}]) == [{"answer": 1, "nonconformity": 0.5}] * 2
    assert art.call_batch_texts(['{"ticket":"a"}']) == [{"answer": 1, "nonconformity": 0.5}]
    with pytest.raises(InputSchemaError, match=r"\$\[1\]"):
        art.call_batch_texts(['{"ticket":"a"}', "{"])
    with pytest.raises(MalformedArtifact, match="no export 'run_batch'"):
        Artifact.load(build(wat))


def test_start_function_runs_under_limits():
    wat = abi_wat("(i64.const 0)", extra="(func $start (loop $l (br $l))) (start $start)")
    t = time.monotonic()
    with pytest.raises(FuelExhausted):
        Artifact.load(build(wat), limits=SMALL)
    assert time.monotonic() - t < 5


# ------------------------------------------------------------------------------ limits and traps


@pytest.mark.parametrize("path", PATHS)
def test_infinite_loop_runs_out_of_fuel(path):
    art = Artifact.load(build(LOOP_WAT), limits=SMALL, call_path=path)
    t = time.monotonic()
    with pytest.raises(FuelExhausted, match="2000000 units"):
        art.call({"ticket": "x"})
    assert time.monotonic() - t < 2.0


@pytest.mark.parametrize("path", PATHS)
def test_wall_clock_deadline(path):
    art = Artifact.load(build(LOOP_WAT), limits=Limits(fuel=10**15, timeout_ms=50), call_path=path)
    t = time.monotonic()
    with pytest.raises(CallTimeout):
        art.call({"ticket": "x"})
    elapsed = time.monotonic() - t
    assert 0.045 <= elapsed < 1.5, elapsed
    # the batch deadline scales with the number of items but still ends
    t = time.monotonic()
    with pytest.raises(CallTimeout):
        art.call_batch([{"ticket": "x"}] * 3)
    assert time.monotonic() - t < 2.0


@pytest.mark.parametrize("path", PATHS)
def test_memory_grow_bomb(path):
    art = Artifact.load(build(GROW_BOMB_WAT), limits=SMALL, call_path=path)
    with pytest.raises(MemoryLimitExceeded, match="4194304"):
        art.call({"ticket": "x"})


def test_input_larger_than_memory_limit(echo_bytes):
    art = Artifact.load(echo_bytes, limits=Limits(memory_bytes=1 << 20))
    with pytest.raises(MemoryLimitExceeded):
        art.call({"ticket": "y" * (2 << 20)})
    # a smaller input still works (on a fresh instance)
    assert art.call({"ticket": "ok"})["answer"] == {"ticket": "ok"}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("wat, what", [
    (BAD_POINTER_WAT, "outside memory"),
    (BAD_LENGTH_WAT, "outside memory"),
    (const_output_wat("not json"), "not valid JSON"),
    (const_output_wat("\xff\xfe"), "not valid JSON"),
    (const_output_wat('{"answer":1} trailing'), "not valid JSON"),
    (const_output_wat("[1,2,3]"), "expected a JSON object"),
    (const_output_wat('{"margin":1}'), "neither 'answer' nor an 'error'"),
    (const_output_wat('{"answer":1,"nonconformity":"high"}'), "must be a number"),
    (const_output_wat('{"answer":1,"nonconformity":NaN}'), "not valid JSON"),
])
def test_bad_output(path, wat, what):
    art = Artifact.load(build(wat), limits=SMALL, call_path=path)
    with pytest.raises(OutputError, match=what):
        art.call({"ticket": "x"})


def test_bad_batch_output():
    art = Artifact.load(build(const_output_wat('[{"answer":1,"nonconformity":0.5}]')), limits=SMALL)
    with pytest.raises(OutputError, match="array of 2"):
        art.call_batch([{"ticket": "a"}, {"ticket": "b"}])
    assert art.call_batch([{"ticket": "a"}]) == [{"answer": 1, "nonconformity": 0.5}]


def test_error_output_is_returned():
    art = Artifact.load(build(const_output_wat('{"error":"missing_field"}')))
    assert art.call({"ticket": "x"}) == {"error": "missing_field"}


@pytest.mark.parametrize("path", PATHS)
def test_trap_then_fresh_instance(path):
    art = Artifact.load(build(COUNTER_WAT), call_path=path)
    assert art.call({"ticket": "x"})["answer"] == 1
    assert art.call({"ticket": "x"})["answer"] == 2
    with pytest.raises(TrapError, match="unreachable"):
        art.call({"ticket": "x"})
    # state does not leak across the failure: a fresh Store starts counting from zero
    assert art.call({"ticket": "x"})["answer"] == 1
    assert art.instantiations == 2


def test_limit_error_also_resets_state():
    wat = COUNTER_WAT.replace("(then unreachable)", "(then (loop $l (br $l)))")
    art = Artifact.load(build(wat), limits=SMALL)
    assert art.call({})["answer"] == 1
    assert art.call({})["answer"] == 2
    with pytest.raises(LimitError):
        art.call({})
    assert art.call({})["answer"] == 1


def test_unreachable_is_a_trap():
    art = Artifact.load(build(UNREACHABLE_WAT))
    with pytest.raises(TrapError):
        art.call({"ticket": "x"})


def test_unencodable_input(echo_bytes):
    art = Artifact.load(echo_bytes)
    for bad in ({"ticket": float("nan")}, {"ticket": {1, 2}}, {"ticket": b"bytes"}):
        with pytest.raises(InputSchemaError, match="not JSON-encodable"):
            art.call(bad)
    cyc: dict = {}
    cyc["self"] = cyc
    with pytest.raises(InputSchemaError):
        art.call(cyc)
    assert art.call({"ticket": "fine"})["answer"] == {"ticket": "fine"}


def test_limits_validation():
    for bad in (dict(fuel=0), dict(fuel=1.5), dict(memory_bytes=100), dict(timeout_ms=0),
                dict(timeout_ms=float("inf")), dict(fuel=True)):
        with pytest.raises(ValueError):
            Limits(**bad)
    lim = Limits(fuel=10, timeout_ms=10)
    assert lim.fuel_for(3) == 30
    assert lim.epoch_ticks(1) >= 2


def test_code_digest_catches_corrupted_code_without_an_id():
    import hashlib

    import wasmtime

    from auto_runtime import Artifact
    from auto_runtime.errors import ManifestError
    from tests.wasm_fixtures import build, echo_wat, manifest

    code = bytes(wasmtime.wat2wasm(echo_wat()))
    digest = "sha256:" + hashlib.sha256(code).hexdigest()
    good = build(echo_wat(), manifest(model={"kind": "test", "code_digest": digest}))
    Artifact.load(good)
    # flip one byte inside the code (the last byte of the code section's body)
    bad = bytearray(good)
    bad[len(code) - 2] ^= 0x01
    with pytest.raises((ManifestError,)) as e:
        Artifact.load(bytes(bad))
    assert "code_digest" in str(e.value) or "code does not match" in str(e.value)
    wrong = build(echo_wat(), manifest(model={"kind": "test", "code_digest": "sha256:" + "0" * 64}))
    with pytest.raises(ManifestError, match="code does not match"):
        Artifact.load(wrong)


def test_manifest_digest_catches_an_edited_manifest():
    import hashlib

    from auto_runtime import Artifact
    from auto_runtime.errors import ManifestError
    from auto_runtime.jsonio import canonical_bytes
    from tests.wasm_fixtures import build, echo_wat, manifest

    body = manifest()
    signed = {**body, "manifest_digest": "sha256:" + hashlib.sha256(canonical_bytes(body)).hexdigest()}
    Artifact.load(build(echo_wat(), signed))
    edited = {**signed, "generation": 99}  # content changed, digest kept
    with pytest.raises(ManifestError, match="manifest_digest"):
        Artifact.load(build(echo_wat(), edited))
