"""Canonical JSON of lone surrogates, and the strict decoder refusing duplicate keys (in an
artifact's output too)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings, strategies as st

from auto_runtime import Artifact, Limits, OutputError
from auto_runtime import jsonio
from auto_runtime.jsonio import canonical_bytes, canonical_text, strict_loads

from .wasm_fixtures import build, const_output_wat

SMALL = Limits(fuel=2_000_000, memory_bytes=4 * 1024 * 1024, timeout_ms=2000)


@pytest.mark.parametrize("value", ["\ud800", "a\udfffb", {"\udc00k": ["x\ud83d"]}, "é\ud800€"])
def test_a_lone_surrogate_has_canonical_bytes_that_decode_back(value):
    raw = canonical_bytes(value)
    raw.decode("utf-8")  # valid UTF-8
    assert strict_loads(raw) == value
    assert canonical_bytes(strict_loads(raw)) == raw
    assert raw == json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode() or not raw.isascii()


def test_text_without_surrogates_is_json_dumps():
    for v in ({"b": [1, 2.5, None, True], "a": "é😀"}, "plain", ["\u2028", "\x00"]):
        assert canonical_text(v) == json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(blacklist_categories=())), st.text(st.characters(blacklist_categories=())))
def test_a_one_string_field_object_is_written_as_the_general_encoder_writes_it(key, value):
    # any key and value, lone surrogates, controls, quotes and U+2028 included
    general = jsonio._escape_surrogates("".join(jsonio._c_encoder({key: value}, 0)))
    assert canonical_text({key: value}) == general
    assert strict_loads(canonical_bytes({key: value})) == {key: value}
    if not any("\ud800" <= c <= "\udfff" for c in key + value):
        assert general == json.dumps({key: value}, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def test_a_str_subclass_field_takes_the_general_encoder():
    class S(str):
        pass
    assert canonical_text({S("k"): "v"}) == canonical_text({"k": S("v")}) == '{"k":"v"}'


def test_duplicate_keys_are_refused():
    with pytest.raises(ValueError, match="twice"):
        strict_loads(b'{"answer":1,"answer":2}')
    with pytest.raises(ValueError, match="twice"):
        strict_loads(b'[{"a":{"k":1,"k":1}}]')
    assert strict_loads(b'{"a":{"a":1},"b":{"a":2}}') == {"a": {"a": 1}, "b": {"a": 2}}


def test_an_artifact_output_with_duplicate_keys_is_refused():
    art = Artifact.load(build(const_output_wat('{"answer":"safe","nonconformity":0.5,"answer":"rm -rf"}')), limits=SMALL)
    with pytest.raises(OutputError, match="twice"):
        art.call({"ticket": "x"})
