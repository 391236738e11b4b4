"""The JSON-schema subset validator."""

from __future__ import annotations

import pytest

from auto_runtime.errors import InputSchemaError
from auto_runtime.schema import SchemaDefinitionError, compile_schema, validate

SCHEMA = {
    "type": "object",
    "properties": {
        "ticket": {"type": "string", "maxLength": 10},
        "priority": {"type": "integer", "minimum": 0, "maximum": 5},
        "score": {"type": "number"},
        "urgent": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "maxItems": 3},
        "note": {"type": ["string", "null"]},
        "meta": {"type": "object", "additionalProperties": {"type": "integer"}},
        "kind": {"enum": [1, "one", None]},
    },
    "required": ["ticket"],
    "additionalProperties": False,
}


@pytest.mark.parametrize("value", [
    {"ticket": "hi"},
    {"ticket": "0123456789"},
    {"ticket": "✓" * 10},  # code points, not bytes
    {"ticket": "x", "priority": 3, "score": 1.5, "urgent": False, "tags": ["a", "b"], "note": None},
    {"ticket": "x", "priority": 2.0},  # JSON Schema: 2.0 is an integer
    {"ticket": "x", "score": 3},
    {"ticket": "x", "meta": {"a": 1, "b": 2}},
    {"ticket": "x", "kind": None}, {"ticket": "x", "kind": 1}, {"ticket": "x", "kind": "one"},
])
def test_valid(value):
    compile_schema(SCHEMA)(value)


@pytest.mark.parametrize("value, path, what", [
    ("str", "$", "expected object, got string"),
    ([], "$", "expected object, got array"),
    ({}, "$", "missing required property 'ticket'"),
    ({"ticket": 5}, "$.ticket", "expected string, got integer"),
    ({"ticket": "x" * 11}, "$.ticket", "exceeds maxLength 10"),
    ({"ticket": "x", "extra": 1}, "$", "additional property 'extra'"),
    ({"ticket": "x", "priority": True}, "$.priority", "expected integer, got boolean"),
    ({"ticket": "x", "priority": 1.5}, "$.priority", "expected integer"),
    ({"ticket": "x", "priority": 9}, "$.priority", "greater than maximum"),
    ({"ticket": "x", "score": "1"}, "$.score", "expected number"),
    ({"ticket": "x", "urgent": 1}, "$.urgent", "expected boolean"),
    ({"ticket": "x", "tags": ["a", "c"]}, "$.tags[1]", "not one of"),
    ({"ticket": "x", "tags": ["a"] * 4}, "$.tags", "exceeds maxItems"),
    ({"ticket": "x", "note": 3}, "$.note", "expected string or null"),
    ({"ticket": "x", "meta": {"a": "b"}}, "$.meta.a", "expected integer"),
    ({"ticket": "x", "kind": True}, "$.kind", "not one of"),  # True is not 1 in JSON
    ({"ticket": "x", "kind": 2}, "$.kind", "not one of"),
])
def test_violations_name_the_path(value, path, what):
    with pytest.raises(InputSchemaError) as ei:
        compile_schema(SCHEMA)(value)
    assert ei.value.path == path
    assert str(ei.value).startswith(path + ": ")
    assert what in str(ei.value)


def test_trivial_schemas():
    for s in ({}, True):
        compile_schema(s)({"anything": [1, 2]})
    with pytest.raises(InputSchemaError):
        validate(False, 1)
    validate({"title": "t", "description": "d", "$schema": "x"}, 5)


@pytest.mark.parametrize("bad", [
    {"type": "objekt"},
    {"type": []},
    {"pattern": "^a"},
    {"properties": []},
    {"required": "ticket"},
    {"maxLength": -1},
    {"enum": "a"},
    {"minimum": "0"},
    "schema",
])
def test_unsupported_schema_refused_at_compile(bad):
    with pytest.raises(SchemaDefinitionError):
        compile_schema(bad)


def test_deep_input_does_not_crash():
    schema = {"type": "array", "items": {"type": "array", "items": True}}
    deep: list = []
    cur = deep
    for _ in range(10_000):
        nxt: list = []
        cur.append(nxt)
        cur = nxt
    compile_schema(schema)(deep)  # "items": True stops descending
    rec = {"type": "object", "additionalProperties": {"type": "object", "additionalProperties": {"type": "object"}}}
    compile_schema(rec)({"a": {"b": {}}})
