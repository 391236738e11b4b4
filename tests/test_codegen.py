"""The generated WebAssembly against the Python reference (differential), and its robustness."""

from __future__ import annotations

import json
import os

import pytest
import wasmtime
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from auto.codegen import (MAX_BATCH, MAX_INPUT, compile_model, fixed, lower, reference_run,
                          reference_run_batch)
from auto.models.specialist.train import distill
from auto.models.specialist.features import FeatureSpec
from specialist_corpus import TOPICS, Artifact, tickets, witnesses

FIELD2 = 'the "text" ✓'
# AUTO_FUZZ_EXAMPLES=5000 for a deeper (slow) fuzzing run
SETTINGS = settings(max_examples=int(os.environ.get("AUTO_FUZZ_EXAMPLES", "120")), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _build():
    out = {}
    out["multi"] = distill(witnesses(150, seed=1), [FeatureSpec("ticket", 2, 4, 1024)],
                           models=("logreg",)).model
    two = {k: TOPICS[k] for k in ("bug", "security")}
    out["binary"] = distill(witnesses(80, seed=2, topics=two), [FeatureSpec("ticket", 1, 3, 256)],
                            models=("linsvc",)).model
    out["tree"] = distill(witnesses(150, seed=3), [FeatureSpec("ticket", 3, 5, 512)],
                          models=("tree",), prototypes_per_class=3).model
    lab = {"billing": 1, "bug": [1, "x"], "feature": {"b": 2, "a": None},
           "account": "ünï\"cødé\\\u2028\n", "security": True}
    # idf baked into the weights at fit time: the artifact's arithmetic is unchanged, so it must match too
    out["idf"] = distill(witnesses(150, seed=5), [FeatureSpec("ticket", 2, 5, 1024)], models=("linsvc",),
                         idf=True).model
    # word n-grams after the byte n-grams (words 1-2 at weight 2; words only at weight 3)
    out["words"] = distill(witnesses(150, seed=6), [FeatureSpec("ticket", 3, 5, 1024, word_max=2, word_weight=2)],
                           models=("logreg",)).model
    out["words1"] = distill(witnesses(150, seed=7), [FeatureSpec("ticket", 2, 3, 512, word_max=1, word_weight=3)],
                            models=("linsvc",)).model
    out["json"] = distill(witnesses(150, seed=4, field=FIELD2, label=lambda t: lab[t]),
                          [FeatureSpec(FIELD2, 1, 2, 128)], models=("logreg",)).model
    return out


MODELS = _build()
ARTS = {k: Artifact(compile_model(m)) for k, m in MODELS.items()}


def field(name):
    return MODELS[name].features.field


json_scalars = (st.none() | st.booleans() | st.integers() | st.text(max_size=8)
                | st.floats(allow_nan=False, allow_infinity=False))
json_values = st.recursive(json_scalars, lambda c: st.lists(c, max_size=3)
                           | st.dictionaries(st.text(max_size=4), c, max_size=3), max_leaves=6)
texts = (st.text(max_size=300)
         | st.sampled_from([t for t, _ in tickets(40, seed=99)])
         | st.text(alphabet="AbC \u00e9\u00c9\U0001F600\x00\x1f\"\\/\u2028", max_size=50))


def dumps(obj, ascii_: bool, indent) -> bytes:
    return json.dumps(obj, ensure_ascii=ascii_, indent=indent).encode("utf-8")


@st.composite
def input_objects(draw, name):
    obj = draw(st.dictionaries(st.text(max_size=4), json_values, max_size=3))
    kind = draw(st.sampled_from(["ok", "ok", "ok", "ok", "missing", "wrong"]))
    if kind == "ok":
        obj[field(name)] = draw(texts)
    elif kind == "wrong":
        obj[field(name)] = draw(json_values.filter(lambda v: not isinstance(v, str)))
    else:
        obj.pop(field(name), None)
    return obj


def check(name, data: bytes) -> bytes:
    got = ARTS[name].run(data)
    assert got == reference_run(MODELS[name], data), data[:200]
    json.loads(got)
    return got


# ---- determinism and shape ---------------------------------------------------------------------

def test_deterministic_bytes():
    for m in MODELS.values():
        assert lower(m) == lower(m)
        assert compile_model(m) == compile_model(m)


def test_exports_imports_memory():
    for name, m in MODELS.items():
        mod = ARTS[name].module
        assert [e.name for e in mod.exports] == ["memory", "alloc", "run", "run_batch"]
        assert list(mod.imports) == []
        mem = ARTS[name].memory
        static = 4 * m.features.buckets * (2 + m.n_rows + m.n_prototypes + 2)
        assert mem.size(ARTS[name].store) * 65536 <= static + 3 * 65536


SCALAR = {k: Artifact(compile_model(MODELS[k], simd=False)) for k in ("multi", "tree", "words")}


def test_simd_and_scalar_agree():
    m = MODELS["multi"]
    assert "v128" not in lower(m, simd=False) and "v128" in lower(m)
    for text, _ in tickets(30, seed=12):
        d = dumps({"ticket": text}, False, None)
        assert SCALAR["multi"].run(d) == ARTS["multi"].run(d) == reference_run(m, d)


@SETTINGS
@given(st.data())
def test_scalar_build_matches_reference(data):
    name = data.draw(st.sampled_from(sorted(SCALAR)))
    d = data.draw(st.binary(max_size=100) | input_objects(name).map(lambda o: dumps(o, True, None)))
    assert SCALAR[name].run(d) == reference_run(MODELS[name], d)
    assert SCALAR[name].run_batch(b"[" + d + b"]") == reference_run_batch(MODELS[name], b"[" + d + b"]")


# ---- differential: valid and invalid task inputs -------------------------------------------------

@pytest.mark.parametrize("name", sorted(MODELS))
@SETTINGS
@given(data=st.data())
def test_run_matches_reference(name, data):
    obj = data.draw(input_objects(name))
    d = dumps(obj, data.draw(st.booleans()), data.draw(st.sampled_from([None, 0, 2])))
    out = check(name, d)
    if field(name) in obj and isinstance(obj[field(name)], str):
        res = json.loads(out)
        p = MODELS[name].predict(obj)
        assert res["answer"] == p.answer
        assert out.endswith(b',"margin":' + fixed(p.margin).encode() + b',"nonconformity":'
                            + fixed(p.nonconformity).encode() + b"}")


@SETTINGS
@given(st.text(max_size=80))
def test_escapes_and_case_fold(text):
    a = ARTS["multi"]
    ascii_ = a.run(dumps({"ticket": text}, True, None))
    raw = a.run(dumps({"ticket": text}, False, None))
    assert ascii_ == raw  # \uXXXX escapes (incl. surrogate pairs) decode to the same UTF-8
    upper = "".join(c.upper() if "a" <= c <= "z" else c for c in text)
    assert a.run(dumps({"ticket": upper}, False, None)) == raw  # ASCII-only case folding


CASES = {
    b"": "bad_json", b"   ": "bad_json", b"{": "bad_json", b'{"ticket":"a"} x': "bad_json",
    b'{"ticket":"a",}': "bad_json", b'{"ticket":"a\x01"}': "bad_json", b'{"ticket":"\\x"}': "bad_json",
    b'{"ticket":"\\u12"}': "bad_json", b'{"ticket":"\\udc00"}': "bad_json",
    b'{"ticket":"\\ud800"}': "bad_json", b'{"ticket":"\\ud800\\u0041"}': "bad_json",
    b'{"ticket":"\xff"}': "bad_json", b'{"ticket":"\xc0\xaf"}': "bad_json",
    b'{"ticket":"\xed\xa0\x80"}': "bad_json", b'{"ticket":"\xf4\x90\x80\x80"}': "bad_json",
    b'{"ticket":"\xe2\x82"}': "bad_json", b'{"ticket":NaN}': "bad_json",
    b'{"ticket":"a","n":Infinity}': "bad_json", b'{"ticket":"a","n":01}': "bad_json",
    b'{"ticket":"a","n":1.}': "bad_json", b'{"ticket":"a","n":-}': "bad_json",
    b'{"ticket":"a","n":1e}': "bad_json", b'{"ticket":"a","n":tru}': "bad_json",
    b'{"ticket":"a" "n":1}': "bad_json", b'{"ticket" "a"}': "bad_json", b"{'ticket':'a'}": "bad_json",
    b'\xef\xbb\xbf{"ticket":"a"}': "bad_json", b'{"ticket":"a"}\x00': "bad_json",
    b'{"a":[1,2}': "bad_json", b'{"a":{"b":1]}': "bad_json", b'{"ticket":"a"}}': "bad_json",
    b"[]": "wrong_type", b'"ticket"': "wrong_type", b"1": "wrong_type", b" null ": "wrong_type",
    b"{}": "missing_field", b'{"Ticket":"a"}': "missing_field", b'{"x":{"ticket":"a"}}': "missing_field",
    b'{"ticket":1}': "wrong_type", b'{"ticket":null}': "wrong_type", b'{"ticket":["a"]}': "wrong_type",
    b'{"ticket":"a","ticket":1}': "wrong_type",
}


@pytest.mark.parametrize("data,code", sorted(CASES.items()))
def test_error_cases(data, code):
    assert check("multi", data) == b'{"error":"%s"}' % code.encode()


@pytest.mark.parametrize("data", [
    b'{"ticket":1,"ticket":"refund"}', b' \t\r\n{ "tick\\u0065t" : "refund" }\n',
    b'{"a":[1,{"b":[true,false,null,-0.5e+3,"\\"\\\\\\/\\b\\f\\n\\r\\t"]}],"ticket":"refund"}',
    b'{"ticket":"\\ud83d\\ude00\\u00e9\\u0000"}', b'{"ticket":""}', b'{"ticket":"\xf0\x9f\x98\x80"}'])
def test_valid_edge_inputs(data):
    assert b'"answer"' in check("multi", data)


def test_escaped_field_name():
    m = MODELS["json"]
    d1 = dumps({FIELD2: "refund please"}, True, None)  # key written with \" and \u2713
    d2 = dumps({FIELD2: "refund please"}, False, None)
    assert b"\\u2713" in d1
    assert check("json", d1) == check("json", d2)
    assert json.loads(check("json", d1))["answer"] in m.answers


# ---- fuzzing: arbitrary bytes never trap --------------------------------------------------------

@SETTINGS
@given(st.binary(max_size=300))
def test_fuzz_bytes(data):
    for name in ("multi", "tree"):
        check(name, data)
        assert json.loads(ARTS[name].run_batch(data)) is not None
        assert ARTS[name].run_batch(data) == reference_run_batch(MODELS[name], data)


@SETTINGS
@given(st.text(alphabet='{}[]",:\\/ u0123456789abcdefABCDEFtrnl.-+eE\n\x01\u00e9\U0001F600',
               max_size=60))
def test_fuzz_jsonish(text):
    d = text.encode("utf-8")
    check("multi", d)
    check("multi", b'{"ticket":"' + d + b'"}')
    check("multi", b'{"ticket":"x",' + d)


@SETTINGS
@given(st.data())
def test_fuzz_mutations(data):
    obj = data.draw(input_objects("multi"))
    d = bytearray(dumps(obj, data.draw(st.booleans()), None))
    for _ in range(data.draw(st.integers(1, 4))):
        op = data.draw(st.sampled_from(["flip", "del", "ins", "cut"]))
        i = data.draw(st.integers(0, max(0, len(d) - 1)))
        if op == "flip" and d:
            d[i] = data.draw(st.integers(0, 255))
        elif op == "del" and d:
            del d[i]
        elif op == "ins":
            d.insert(i, data.draw(st.sampled_from(b'"\\{}[],:u\x00\xff\xc3 ')))
        else:
            d = d[:i]
    check("multi", bytes(d))


# ---- batch -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["multi", "tree", "json"])
@SETTINGS
@given(data=st.data())
def test_batch_equals_items(name, data):
    items = data.draw(st.lists(input_objects(name) | json_scalars, max_size=6))
    ascii_ = data.draw(st.booleans())
    per = [ARTS[name].run(dumps(it, ascii_, None)) for it in items]
    d = dumps(items, ascii_, None)
    got = ARTS[name].run_batch(d)
    assert got == b"[" + b",".join(per) + b"]"
    assert got == reference_run_batch(MODELS[name], d)
    json.loads(got)


@pytest.mark.parametrize("data,out", [
    (b"[]", b"[]"), (b" [ ] ", b"[]"), (b"[1", b'{"error":"bad_json"}'),
    (b'[{"ticket":"a"},]', b'{"error":"bad_json"}'), (b'[{"ticket":"a"}] ]', b'{"error":"bad_json"}'),
    (b'{"ticket":"a"}', b'{"error":"wrong_type"}'), (b"", b'{"error":"bad_json"}'),
    (b'[{"ticket":"\\ud800"}]', b'{"error":"bad_json"}'),
    (b'[1, {}, {"ticket":2}]', b'[{"error":"wrong_type"},{"error":"missing_field"},{"error":"wrong_type"}]')])
def test_batch_cases(data, out):
    assert ARTS["multi"].run_batch(data) == out == reference_run_batch(MODELS["multi"], data)


def test_large_batch_grows_memory():
    texts = [t for t, _ in tickets(3000, seed=21)]
    items = [{"ticket": t} for t in texts]
    d = dumps(items, False, None)
    got = ARTS["multi"].run_batch(d)
    outs = json.loads(got)
    assert len(outs) == 3000
    for i in (0, 1234, 2999):
        assert ARTS["multi"].run(dumps(items[i], False, None)) in got


# ---- limits and hostile hosts ---------------------------------------------------------------------

def test_nesting_is_not_recursive():
    D = 150_000
    deep = b'{"a":' + b"[" * D + b"]" * D + b',"ticket":"refund invoice"}'
    want = check("multi", b'{"ticket":"refund invoice"}')
    assert ARTS["multi"].run(deep) == want
    objs = b'{"a":' + b'{"b":' * D + b"1" + b"}" * D + b',"ticket":"refund invoice"}'
    assert ARTS["multi"].run(objs) == want
    assert ARTS["multi"].run(b'{"a":' + b"[" * D + b"}") == b'{"error":"bad_json"}'
    assert ARTS["multi"].run(b"[" * D + b"]" * D) == b'{"error":"wrong_type"}'
    assert ARTS["multi"].run_batch(b"[" + b"[" * D + b"]" * D + b"]") == b'[{"error":"wrong_type"}]'


def test_huge_strings_and_too_large():
    big = ("Refund my ÉNORME invoice 🙂 " * 20000)[: MAX_INPUT - 300]
    d = dumps({"ticket": big}, False, None)
    assert len(d) <= MAX_INPUT
    assert b'"answer"' in check("multi", d)
    over = dumps({"ticket": "x" * MAX_INPUT}, False, None)
    assert ARTS["multi"].run(over) == b'{"error":"too_large"}'
    pad = b" " * (MAX_INPUT + 1)
    assert ARTS["multi"].run(pad) == b'{"error":"too_large"}'
    batch = b'[{"ticket":"a"},' + over + b"]"
    want = b"[" + ARTS["multi"].run(b'{"ticket":"a"}') + b',{"error":"too_large"}]'
    assert ARTS["multi"].run_batch(batch) == want == reference_run_batch(MODELS["multi"], batch)


def test_hostile_pointers_and_lengths():
    a = ARTS["multi"]
    good = b'{"ticket":"refund"}'
    want = a.run(good)
    size = a.memory.data_len(a.store)
    assert a.raw("alloc", MAX_BATCH + 1) == size  # past the end: the host's bounds check refuses
    assert a.raw("alloc", -1) == size
    for f in ("run", "run_batch"):
        for ptr, n in [(size - 4, 100), (-8, 16), (size, 0), (0, 0), (0, 4096), (16, 300)]:
            r = a.raw(f, ptr, n)
            p, ln = (r >> 32) & 0xFFFFFFFF, r & 0xFFFFFFFF
            json.loads(bytes(a.memory.read(a.store, p, p + ln)))
        r = a.raw(f, 0, -1)
        p, ln = (r >> 32) & 0xFFFFFFFF, r & 0xFFFFFFFF
        assert bytes(a.memory.read(a.store, p, p + ln)) == b'{"error":"too_large"}'
    assert a.run(good) == want  # static data (weights, counts) untouched


def test_memory_limit_gives_too_large_not_a_trap():
    m = MODELS["multi"]
    wasm = compile_model(m)
    fresh = Artifact(wasm)
    size = fresh.memory.data_len(fresh.store)  # the declared initial memory
    a = Artifact(wasm, memory_limit=size + 2 * 65536)
    good = b'{"ticket":"refund"}'
    assert a.run(good) == reference_run(m, good)
    big = dumps({"ticket": "refund " * 20000}, False, None)  # fits alloc, not its scratch
    p = a.raw("alloc", len(big))
    assert p + len(big) <= a.memory.data_len(a.store)
    a.memory.write(a.store, big, p)
    r = a.raw("run", p, len(big))
    q, n = (r >> 32) & 0xFFFFFFFF, r & 0xFFFFFFFF
    assert bytes(a.memory.read(a.store, q, q + n)) == b'{"error":"too_large"}'
    huge = 10 * 65536
    assert a.raw("alloc", huge) == a.memory.data_len(a.store)  # refused: past the end
    assert a.run(good) == reference_run(m, good)


def test_state_is_clean_between_calls_and_after_interruption():
    m = MODELS["multi"]
    a = Artifact(compile_model(m), fuel=True)
    x, y = (dumps({"ticket": t}, False, None) for t, _ in tickets(2, seed=30))
    rx, ry = reference_run(m, x), reference_run(m, y)
    assert (a.run(x), a.run(y), a.run(x)) == (rx, ry, rx)
    interrupted = 0
    for fuel in range(500, 40000, 1500):
        a.store.set_fuel(fuel)
        try:
            a.run(x)
        except (wasmtime.Trap, wasmtime.WasmtimeError):
            interrupted += 1
        a.store.set_fuel(10**12)
        assert a.run(y) == ry
    assert interrupted >= 5


# ---- the fixed-number format ------------------------------------------------------------------------

@pytest.mark.parametrize("x,s", [(0.0, "0.000000000"), (-0.0, "0.000000000"), (1.0, "1.000000000"),
                                 (-1.5, "-1.500000000"), (1e-10, "0.000000000"),
                                 (-1e-10, "0.000000000"), (0.1234567899, "0.123456789"),
                                 (123.000000001, "123.000000001"), (float("nan"), "0.000000000"),
                                 (1e30, "9223372036.854775807"), (-1e30, "-9223372036.854775808")])
def test_fixed(x, s):
    assert fixed(x) == s


@pytest.mark.parametrize("name", sorted(MODELS))
def test_an_input_longer_than_every_training_text_has_the_largest_nonconformity(name):
    m = MODELS[name]
    text, _t = tickets(1, seed=12)[0]
    assert m.max_bytes is not None and len(text.encode()) + 2 <= m.max_bytes
    short = json.loads(check(name, json.dumps({field(name): text}).encode()))
    assert short["nonconformity"] < 1.0
    # the same ticket repeated: the normalized vector points where the ticket's does
    long_text = (text + " ") * (m.max_bytes // len(text) + 2)
    out = json.loads(check(name, json.dumps({field(name): long_text}).encode()))
    top = MODELS[name].top_score
    assert out["nonconformity"] == top and MODELS[name].predict({field(name): long_text}).nonconformity == top
    edge = "é" * ((m.max_bytes - 2) // 2)  # at the bound (in UTF-8 bytes), then one byte past it
    for t in (edge, edge + "a"):
        check(name, json.dumps({field(name): t}, ensure_ascii=False).encode())
