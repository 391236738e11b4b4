"""The exact-match table artifact ("memo"), table-only and memo-first: wasm against the Python
reference (differential), real FNV-1a 64 collisions, near misses, batches, and the runtime's
exact-match guard end to end."""

from __future__ import annotations

import json
import random

import pytest
import wasmtime
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from auto.canonical import canonical_json
from auto.codegen import (MAX_INPUT, TableModel, assemble, canonical_key, compile_model, fnv1a64, lower,
                          reference_run, reference_run_batch)
from auto.codegen.table import HIT_MARGIN, VECTOR_MIN_KEYS, fnv1a64_many
from auto.codegen.wat import fill_last_segment
from auto.errors import CodegenError
from auto.codegen.table_lower import ENTRY, EQ_FUNC, HASH_FUNC, MISS, table_blob
from auto.models.specialist.train import Prediction, distill
from auto.emit import emit
from auto.errors import InputSchemaError
from auto.models.specialist.features import FeatureSpec
from specialist_corpus import Artifact, tickets, witnesses

SETTINGS = settings(max_examples=80, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# Two pairs of distinct canonical JSON objects with equal FNV-1a 64 hashes, found offline with a
# parallel distinguished-point (van Oorschot–Wiener) collision search over {"k":"<11 chars>"}.
COLLISIONS = [(b'{"k":"CXjC7EUX8BU"}', b'{"k":"Eha9MLrlA65"}', 0x980CF677C0BAD304),
              (b'{"k":"Ej0g9UEmBcb"}', b'{"k":"F19Y9rmGnCX"}', 0x181EDBD26C82273B)]

HIT_TAIL = b',"margin":1000000.000000000,"nonconformity":0.000000000}'


def ck(obj) -> bytes:
    return canonical_key(obj)


def hit(answer) -> bytes:
    return b'{"answer":' + canonical_json(answer).encode() + HIT_TAIL


# ---- fixtures -----------------------------------------------------------------------------------

def kt_workload(i: int) -> dict:
    ops = ["gemm", "rmsnorm", "softmax", "swiglu"]
    return {"op": ops[i % 4], "M": 1 << (i % 13), "N": 128 * (1 + i % 37), "K": 64 * (1 + i % 29),
            "dtype": ["bf16", "fp16", "fp32"][i % 3], "bias": i % 5 == 0, "eps": 1e-6 if i % 4 == 1 else None}


def kt_config(i: int):
    if i % 11 == 0:
        return None  # a null answer is still a hit (nonconformity 0)
    return {"family": ["tc_gemm", "gemv_splitk", "vendor"][i % 3],
            "config": {"BM": 64 << (i % 3), "BN": 128, "BK": 32 * (1 + i % 2), "warps": 4,
                       "stages": [3, 4][i % 2], "split_k": i % 4 or None},
            "notes": ["é✓", f"#{i}", 0.5, [True, {}]]}


KT = [(kt_workload(i), kt_config(i)) for i in range(200)]
UNI = [({"ключ": "значение", "emoji 😀": i, "q\"\\/": "\u2028\n\t\x00", "日本": [i, "ü"]},
        {"ответ": f"✓{i}", "n": i}) for i in range(20)]


def _spec():
    return distill(witnesses(150, seed=1), [FeatureSpec("ticket", 2, 4, 1024)],
                   models=("logreg",)).model


SPEC = _spec()
SPEC_ART = Artifact(compile_model(SPEC))
MEMO_TICKETS = [t for t, _ in tickets(60, seed=41)]
# table answers that the specialist would not give (not even one of its classes)
MEMO_ENTRIES = [({"ticket": t, **({"extra": [i, "x"]} if i % 3 == 0 else {})}, {"memo": i})
                for i, t in enumerate(MEMO_TICKETS)]

MODELS = {
    "kt": TableModel(KT),
    "uni": TableModel(UNI),
    "coll": TableModel([(json.loads(a), f"a{j}") for j, (a, b, _) in enumerate(COLLISIONS)]
                       + [(json.loads(b), {"b": j}) for j, (a, b, _) in enumerate(COLLISIONS)]
                       + [({"k": "other"}, 3)]),
    "memo": TableModel(MEMO_ENTRIES, fallback=SPEC),
}
ARTS = {k: Artifact(compile_model(m)) for k, m in MODELS.items()}


def check(name: str, data: bytes) -> bytes:
    got = ARTS[name].run(data)
    assert got == reference_run(MODELS[name], data), data[:200]
    json.loads(got)
    return got


def check_batch(name: str, data: bytes) -> bytes:
    got = ARTS[name].run_batch(data)
    assert got == reference_run_batch(MODELS[name], data), data[:200]
    json.loads(got)
    return got


# ---- the hash ---------------------------------------------------------------------------------------

def test_fnv1a64_reference_vectors():
    # published FNV-1a 64 test vectors (Fowler–Noll–Vo)
    assert fnv1a64(b"") == 0xCBF29CE484222325 == 14695981039346656037
    assert fnv1a64(b"a") == 0xAF63DC4C8601EC8C
    assert fnv1a64(b"foobar") == 0x85944171F73967E8


def test_fnv1a64_many_equals_one_at_a_time():
    rng = random.Random(5)
    lengths = [0, 1, 7, 8, 9, 90, 91, 300, 2000]
    keys = [bytes(rng.randrange(256) for _ in range(rng.choice(lengths))) for _ in range(3 * VECTOR_MIN_KEYS)]
    for extra in ([], [b"x" * 5000], [b"y" * 5000] * (VECTOR_MIN_KEYS + 1), [b""] * VECTOR_MIN_KEYS):
        ks = keys + extra  # a few keys longer than the rest are finished one by one
        assert fnv1a64_many(ks) == [fnv1a64(k) for k in ks]
    assert fnv1a64_many(keys[:5]) == [fnv1a64(k) for k in keys[:5]]
    assert fnv1a64_many([a for a, _, _ in COLLISIONS]) == [h for _, _, h in COLLISIONS]


def test_table_data_placed_in_the_binary_equals_the_assembled_text():
    # compile_model puts the table into the assembled module directly; the bytes must be those
    # of the text with the table written out (table-only and memo-first)
    for name in ("kt", "memo", "coll"):
        assert compile_model(MODELS[name]) == assemble(lower(MODELS[name]))
    # i32.const immediates whose LEB128 bytes include 0x0B (the `end` opcode) and a multi-byte one
    for base in (0x0B, 0x0B << 7, 1035, (1 << 31) - 1):
        text = '(module (memory 1) (data (i32.const 5) "ab") (data (i32.const %d) %s))'
        assert fill_last_segment(assemble(text % (base, '""')), base, b"xyz\x00") == assemble(text % (base, '"xyz\\00"'))
    with pytest.raises(CodegenError, match="placeholder"):
        fill_last_segment(assemble('(module (memory 1) (data (i32.const 8) "ab"))'), 8, b"x")
    with pytest.raises(CodegenError, match="no data section"):
        fill_last_segment(assemble("(module (memory 1))"), 8, b"x")


def _helpers():
    wat = ('(module (memory (export "memory") 1)' + HASH_FUNC + EQ_FUNC
           + '(export "fnv64" (func $fnv64)) (export "eq" (func $eq)))')
    store = wasmtime.Store()
    ex = wasmtime.Instance(store, wasmtime.Module(store.engine, wasmtime.wat2wasm(wat)), []).exports(store)
    return store, ex["memory"], ex["fnv64"], ex["eq"]


def test_wasm_hash_and_compare_directly():
    store, mem, fnv, eq = _helpers()
    rng = random.Random(2)
    for n in range(0, 41):
        for off in (16, 21):  # aligned and unaligned
            data = bytes(rng.randrange(256) for _ in range(n))
            mem.write(store, data, off)
            assert fnv(store, off, off + n) & (2**64 - 1) == fnv1a64(data)
            mem.write(store, data, 1000 + off)
            assert eq(store, off, 1000 + off, n) == 1
            for i in range(n):  # one byte different anywhere: 8-byte chunks and the tail
                mem.write(store, bytes([data[i] ^ (1 << rng.randrange(8))]), 1000 + off + i)
                assert eq(store, off, 1000 + off, n) == 0, (n, i)
                mem.write(store, data[i:i + 1], 1000 + off + i)
    for a, b, h in COLLISIONS:
        mem.write(store, a + b, 64)
        assert fnv(store, 64, 64 + len(a)) & (2**64 - 1) == fnv(store, 64 + len(a), 64 + 2 * len(a)) & (2**64 - 1) == h
        assert eq(store, 64, 64 + len(a), len(a)) == 0


def test_collision_pairs_are_real():
    for a, b, h in COLLISIONS:
        assert a != b and fnv1a64(a) == fnv1a64(b) == h
        assert ck(json.loads(a)) == a and ck(json.loads(b)) == b  # canonical inputs


# ---- data model -----------------------------------------------------------------------------------

def test_table_model_predict_and_errors():
    t = MODELS["kt"]
    assert len(t) == 200 and t.compiled_as == "memo" and t.kind == "memo"
    p = t.predict(KT[3][0])
    assert p == Prediction(canonical_json(KT[3][1]), HIT_MARGIN, 0.0) and p.answer == KT[3][1]
    assert t.predict({"op": "nope"}) == Prediction("null", 0.0, 1.0)
    # key order in the dict does not matter (keys are canonical), types do
    assert t.predict(dict(reversed(list(KT[3][0].items())))).nonconformity == 0.0
    assert t.predict({**KT[3][0], "M": float(KT[3][0]["M"])}).nonconformity == 1.0
    with pytest.raises(InputSchemaError):
        t.predict([1])
    with pytest.raises(InputSchemaError):
        t.predict({"x": float("nan")})
    m = MODELS["memo"]
    assert m.compiled_as == "memo-first"
    assert m.predict(MEMO_ENTRIES[0][0]) == Prediction('{"memo":0}', HIT_MARGIN, 0.0)
    assert m.predict({"ticket": "never seen refund"}) == SPEC.predict({"ticket": "never seen refund"})
    with pytest.raises(InputSchemaError):
        m.predict({"other": 1})  # a miss goes to the specialist, which needs its field
    assert t.manifest_model() == {"kind": "memo", "entries": 200, "hash": "fnv1a64", "fallback": None}
    assert m.manifest_model()["fallback"] == SPEC.manifest_model()
    assert t.digest() == TableModel(list(reversed(KT))).digest() != TableModel(KT[:-1]).digest()


def test_table_model_refusals():
    with pytest.raises(ValueError, match="different answers"):
        TableModel([({"a": 1, "b": 2}, 1), ({"b": 2, "a": 1}, 2)])  # same canonical key
    assert len(TableModel([({"a": 1}, [1]), ({"a": 1}, [1])])) == 1  # same answer: merged
    with pytest.raises(ValueError, match="at least one entry"):
        TableModel([])
    with pytest.raises(ValueError, match="not an object"):
        TableModel([([1], 1)])
    with pytest.raises(ValueError, match="not JSON-encodable"):
        TableModel([({"a": float("inf")}, 1)])
    assert len(TableModel([({"a": "\ud800"}, 1)])) == 1  # a lone surrogate is encoded as its escape (stored, not lost)
    with pytest.raises(ValueError, match="answer is not JSON"):
        TableModel([({"a": 1}, {1, 2})])
    with pytest.raises(ValueError, match="pair"):
        TableModel([({"a": 1},)])
    with pytest.raises(ValueError, match="MAX_INPUT"):
        TableModel([({"a": "x" * MAX_INPUT}, 1)])
    with pytest.raises(ValueError, match="string field 'ticket'"):
        TableModel([({"ticket": 1}, 1)], fallback=SPEC)
    with pytest.raises(TypeError):
        TableModel([({"a": 1}, 1)], fallback=MODELS["kt"])


# ---- determinism and shape ---------------------------------------------------------------------------

def test_deterministic_and_order_independent():
    shuffled = KT[:]
    random.Random(3).shuffle(shuffled)
    assert lower(MODELS["kt"]) == lower(TableModel(shuffled))
    assert compile_model(MODELS["kt"]) == compile_model(TableModel(shuffled))
    assert compile_model(MODELS["memo"]) == compile_model(TableModel(MEMO_ENTRIES[::-1], SPEC))


def test_exports_imports_and_layout():
    for name in ARTS:
        mod = ARTS[name].module
        assert [e.name for e in mod.exports] == ["memory", "alloc", "run", "run_batch"]
        assert list(mod.imports) == []
    t = MODELS["coll"]
    blob, at, _ = table_blob(t, 1024)
    hashes = [int.from_bytes(blob[i * ENTRY:i * ENTRY + 8], "little") for i in range(len(t))]
    assert hashes == sorted(hashes) == list(t.hashes)
    assert len(set(hashes)) == len(t) - 2  # both collision pairs share an index hash


def test_simd_and_scalar_agree():
    for name in ("kt", "memo"):
        scalar = Artifact(compile_model(MODELS[name], simd=False))
        assert "v128" not in lower(MODELS[name], simd=False)
        for inp, _ in (KT[:20] if name == "kt" else MEMO_ENTRIES[:20]):
            d = ck(inp)
            assert scalar.run(d) == ARTS[name].run(d) == reference_run(MODELS[name], d)


# ---- table-only: hits, misses, near misses, collisions ---------------------------------------------

@pytest.mark.parametrize("name,entries", [("kt", KT), ("uni", UNI)])
def test_every_entry_hits(name, entries):
    for inp, ans in entries:
        assert check(name, ck(inp)) == hit(ans)


def test_misses_and_non_canonical_inputs():
    base = KT[7][0]
    d = ck(base)
    variants = [
        json.dumps(base).encode(),  # ", " and ": " separators
        json.dumps(base, sort_keys=True).encode(),
        json.dumps(dict(reversed(list(base.items()))), separators=(",", ":")).encode(),
        ck({**base, "M": float(base["M"])}),  # 1 vs 1.0
        ck({**base, "extra": 1}), ck({k: v for k, v in base.items() if k != "bias"}),
        d.replace(b"{", b"{ ", 1), d.replace(b":", b" :", 1),
        b'{"op":"gemm"}', b"{}",
    ]
    for v in variants:
        assert v != d
        assert check("kt", v) == MISS
    # whitespace around the object is not part of the key
    assert check("kt", b" \n\t" + d + b"\r ") == hit(KT[7][1])
    # a unicode key written with \u escapes is valid JSON but not canonical: a miss
    u = UNI[2][0]
    assert check("uni", json.dumps(u, sort_keys=True, separators=(",", ":")).encode()) == MISS
    assert check("uni", ck(u)) == hit(UNI[2][1])


def test_near_misses_one_byte_different():
    rng = random.Random(8)
    keys = set(MODELS["kt"].keys) | set(MODELS["uni"].keys)
    n_hits = 0
    for name, entries in (("kt", KT[:6]), ("uni", UNI[:3])):
        for inp, ans in entries:
            d = ck(inp)
            for i in range(len(d)):
                for b in {d[i] ^ 1, d[i] ^ 0x20, rng.randrange(256)} - {d[i]}:
                    v = d[:i] + bytes([b]) + d[i + 1:]
                    got = check(name, v)
                    n_hits += got.endswith(HIT_TAIL)
                    assert got.endswith(HIT_TAIL) == (v in keys)
                check(name, d[:i] + d[i + 1:])  # one byte dropped
                check(name, d[:i] + b"0" + d[i:])  # one byte inserted
            assert check(name, d) == hit(ans)
    assert n_hits == 0


def test_real_hash_collisions_never_answer_wrong():
    # both members of each pair are in the table with different answers: each finds its own
    for j, (a, b, _) in enumerate(COLLISIONS):
        assert check("coll", a) == hit(f"a{j}")
        assert check("coll", b) == hit({"b": j})
    assert check("coll", b'{"k":"other"}') == hit(3)
    # only one member present: the other shares its hash (the index bucket) and still misses
    for a, b, _ in COLLISIONS:
        for present, absent in ((a, b), (b, a)):
            t = TableModel([(json.loads(present), "here")])
            art = Artifact(compile_model(t))
            assert art.run(present) == hit("here") == reference_run(t, present)
            assert art.run(absent) == MISS == reference_run(t, absent)
            batch = b"[" + absent + b"," + present + b"," + absent + b"]"
            assert art.run_batch(batch) == b"[" + MISS + b"," + hit("here") + b"," + MISS + b"]"


def test_large_table():
    entries = [({"op": "gemm", "M": i, "N": (i * 7919) % 65536, "dtype": ["bf16", "fp8"][i % 2]},
                {"BM": 16 << (i % 4), "i": i}) for i in range(5000)]
    t = TableModel(entries)
    art = Artifact(compile_model(t))
    keys = [ck(inp) for inp, _ in entries]
    data = b"[" + b",".join(keys + [b'{"op":"gemm","M":5000}']) + b"]"
    got = art.run_batch(data)
    assert got == b"[" + b",".join([hit(a) for _, a in entries] + [MISS]) + b"]"
    assert got == reference_run_batch(t, data)
    for i in (0, 1, 2499, 4998, 4999):
        assert art.run(keys[i]) == hit(entries[i][1])
    assert art.run(ck({**entries[10][0], "M": 5001})) == MISS


def test_nested_and_long_answers_grow_output():
    long = {"s": "é" * 100_000, "nested": [[[{"a": None}]]]}
    t = TableModel([({"q": 1}, long), ({"q": 2}, [1, [2, [3, {"x": "y"}]]])])
    art = Artifact(compile_model(t))
    assert art.run(b'{"q":1}') == hit(long)
    data = b"[" + b",".join([b'{"q":1}', b'{"q":2}', b'{"q":3}'] * 40) + b"]"
    got = art.run_batch(data)
    assert got == reference_run_batch(t, data) and len(json.loads(got)) == 120


TABLE_ERRORS = {
    b"": "bad_json", b"{": "bad_json", b'{"M":1,}': "bad_json", b'{"a":"\\ud800"}': "bad_json",
    b'{"a":"\xff"}': "bad_json", b'{"a":NaN}': "bad_json", b'{"a":1} x': "bad_json",
    b"[]": "wrong_type", b'"s"': "wrong_type", b"1": "wrong_type", b" null ": "wrong_type",
    b"[" + ck(KT[0][0]) + b"]": "wrong_type",
}


@pytest.mark.parametrize("data,code", sorted(TABLE_ERRORS.items()))
def test_table_only_error_cases(data, code):
    assert check("kt", data) == b'{"error":"%s"}' % code.encode()


def test_table_only_has_no_missing_field_and_too_large():
    assert check("kt", b"{}") == MISS
    assert check("kt", b'{"anything":[1,{"x":2}]}') == MISS
    over = ck({"x": "y" * MAX_INPUT})
    assert ARTS["kt"].run(over) == b'{"error":"too_large"}'
    batch = b"[" + ck(KT[1][0]) + b"," + over + b"]"
    assert check_batch("kt", batch) == b"[" + hit(KT[1][1]) + b',{"error":"too_large"}]'


json_scalars = (st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=4)
                | st.sampled_from([0.5, 1.0, -2.25]))
json_values = st.recursive(json_scalars, lambda c: st.lists(c, max_size=3)
                           | st.dictionaries(st.text(max_size=3), c, max_size=3), max_leaves=5)
items = (st.sampled_from([inp for inp, _ in KT[:30]]) | json_values
         | st.dictionaries(st.text(max_size=3), json_values, max_size=3))


@SETTINGS
@given(st.lists(items, max_size=6), st.booleans())
def test_batch_equals_items(xs, canonical):
    for name in ("kt", "memo"):
        enc = ck if canonical else (lambda o: json.dumps(o).encode())
        per = [ARTS[name].run(enc(x)) for x in xs]
        d = b"[" + b",".join(enc(x) for x in xs) + b"]"
        assert check_batch(name, d) == b"[" + b",".join(per) + b"]"


@SETTINGS
@given(st.binary(max_size=120) | st.text(alphabet='{}[]",:\\ kMNop0129.e-tru\u00e9', max_size=40)
       .map(lambda s: s.encode()))
def test_fuzz_bytes(data):
    for name in ("kt", "coll"):
        check(name, data)
        assert ARTS[name].run_batch(data) == reference_run_batch(MODELS[name], data)


def test_hostile_pointers_and_lengths():
    a = ARTS["kt"]
    good = ck(KT[4][0])
    size = a.memory.data_len(a.store)
    for f in ("run", "run_batch"):
        for ptr, n in [(size - 4, 100), (-8, 16), (size, 0), (0, 0), (0, 4096), (16, 300)]:
            r = a.raw(f, ptr, n)
            p, ln = (r >> 32) & 0xFFFFFFFF, r & 0xFFFFFFFF
            json.loads(bytes(a.memory.read(a.store, p, p + ln)))
    assert a.run(good) == hit(KT[4][1])  # the table data is untouched


def test_interrupted_calls_leave_no_state():
    m = MODELS["memo"]
    a = Artifact(compile_model(m), fuel=True)
    x, y = ck(MEMO_ENTRIES[1][0]), ck({"ticket": MEMO_TICKETS[2] + " and more"})
    rx, ry = reference_run(m, x), reference_run(m, y)
    interrupted = 0
    for fuel in range(100, 30000, 1000):
        a.store.set_fuel(fuel)
        for d in (x, y):
            try:
                a.run(d)
            except (wasmtime.Trap, wasmtime.WasmtimeError):
                interrupted += 1
        a.store.set_fuel(10**12)
        assert (a.run(y), a.run(x)) == (ry, rx)
    assert interrupted >= 5


# ---- memo-first -------------------------------------------------------------------------------------

def test_memo_first_hits_come_from_the_table():
    differs = 0
    for inp, ans in MEMO_ENTRIES:
        d = ck(inp)
        assert check("memo", d) == hit(ans)
        spec_out = SPEC_ART.run(d)
        differs += spec_out != hit(ans)
        assert json.loads(spec_out)["answer"] in SPEC.answers  # the specialist says otherwise
    assert differs == len(MEMO_ENTRIES)


def test_memo_first_misses_equal_the_specialist():
    rng = random.Random(4)
    misses = [{"ticket": t} for t, _ in tickets(40, seed=77)]
    misses += [{**inp, "extra": rng.random()} for inp, _ in MEMO_ENTRIES[:10]]
    misses += [{"ticket": inp["ticket"].upper()} for inp, _ in MEMO_ENTRIES[:10]]
    for inp in misses:
        d = ck(inp)
        assert check("memo", d) == SPEC_ART.run(d) == reference_run(SPEC, d)
        nc = json.dumps(inp, ensure_ascii=True, indent=1).encode()  # same object, not canonical
        assert check("memo", nc) == SPEC_ART.run(nc)
    # a witnessed input sent non-canonically misses and is answered by the specialist
    nc = json.dumps(MEMO_ENTRIES[1][0]).encode()
    assert check("memo", nc) == SPEC_ART.run(nc) != hit(MEMO_ENTRIES[1][1])


@pytest.mark.parametrize("data", [b"{}", b'{"ticket":1}', b'{"ticket":null}', b"[]", b"{",
                                  b'{"Ticket":"a"}', b'{"x":{"ticket":"a"}}'])
def test_memo_first_keeps_the_specialist_contract(data):
    assert check("memo", data) == SPEC_ART.run(data)


def test_memo_first_batch_mixes_table_and_specialist():
    ins = ([ck(inp) for inp, _ in MEMO_ENTRIES[:8]] + [ck({"ticket": t}) for t, _ in tickets(8, seed=5)]
           + [b"{}", b"3", b'{"ticket":2}'])
    random.Random(1).shuffle(ins)
    d = b"[" + b",".join(ins) + b"]"
    assert check_batch("memo", d) == b"[" + b",".join(ARTS["memo"].run(x) for x in ins) + b"]"


def test_memo_first_empty_table_is_the_specialist():
    t = TableModel([], fallback=SPEC)
    art = Artifact(compile_model(t))
    for text, _ in tickets(15, seed=9):
        d = ck({"ticket": text})
        assert art.run(d) == SPEC_ART.run(d) == reference_run(t, d)
    assert art.run(b"{}") == b'{"error":"missing_field"}'


# ---- end to end through the runtime: canonical inputs and the exact-match guard ---------------------

def test_runtime_exact_match_guard_end_to_end():
    from auto_runtime import Artifact as RtArtifact
    from auto_runtime.jsonio import canonical_text
    from auto_runtime.tiered import TIER_0, TIER_1, TieredTask

    for inp, _ in KT[:20] + UNI:  # what the runtime writes is exactly the table key
        assert canonical_text(inp).encode("utf-8") == ck(inp)
    t = MODELS["kt"]
    manifest = {"format": "auto.artifact/1", "task": "kernel-tuning", "generation": 1,
                "compiled_as": t.compiled_as, "interface": {"input": {"type": "object"}, "output": {}},
                "abi": {"exports": ["memory", "alloc", "run", "run_batch"], "encoding": "canonical-json"},
                "capabilities": [], "model": t.manifest_model(), "guard": {"method": "exact-match"}}
    art = RtArtifact.load(emit(compile_model(t), manifest))
    ref_calls = []

    def reference(x):
        ref_calls.append(x)
        return {"from": "reference"}

    task = TieredTask(art, reference)
    r = task(dict(reversed(list(KT[9][0].items()))))  # key order of the caller does not matter
    assert (r.tier, r.answer, r.reason) == (TIER_1, KT[9][1], "guard-pass")
    r = task({"op": "gemm", "M": 3})
    assert (r.tier, r.answer, r.reason) == (TIER_0, {"from": "reference"}, "unseen input (exact-match guard)")
    rs = task.batch([KT[0][0], {"op": "new"}, KT[5][0]])
    assert [x.tier for x in rs] == [TIER_1, TIER_0, TIER_1]
    assert [x.answer for x in rs] == [KT[0][1], {"from": "reference"}, KT[5][1]]
    assert len(ref_calls) == 2
