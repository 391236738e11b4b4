"""The schemas a region declares for its tools: what the host checks before a tool runs and before
its result enters the artifact.

- :func:`declared_schema`: the tool's parameters as the agent declared them to the model (the
  ``tools`` of the request that asked for the call), when the runtime's validator supports that
  schema (:func:`auto_runtime.schema.compile_schema`);
- :func:`recorded_schema`: otherwise, the schema of the recorded values: an object whose keys
  present in every recording are required, each with the JSON types seen; for arguments, no other
  keys, and a string argument that took at most :data:`ENUM_MAX` distinct values, each seen
  :data:`ENUM_MIN_SUPPORT` times on average, is an ``enum`` (a closed set: an argument outside it
  is refused by the host). Results allow other keys.
"""

from __future__ import annotations

from typing import Any, Sequence

from auto_runtime.schema import SchemaDefinitionError, compile_schema, json_type_name

from auto.canonical import canonical_json

ENUM_MAX = 12
"""A string argument with at most this many distinct recorded values may become an enum."""
ENUM_MIN_SUPPORT = 3
"""... when each value was seen at least this many times on average."""


def _types(values: Sequence[Any]) -> list[str]:
    names = {json_type_name(v) for v in values}
    if names == {"integer", "number"}:
        names = {"number"}
    return sorted(names)


def recorded_schema(values: Sequence[Any], *, closed: bool) -> dict[str, Any]:
    """The schema of recorded JSON values (see the module docstring); ``closed``: arguments
    (no other keys, enums for closed string sets), else results."""
    if not values or not all(isinstance(v, dict) for v in values):
        types = _types(values)
        return {"type": types[0] if len(types) == 1 else types} if types else {}
    keys = set(values[0])
    for v in values[1:]:
        keys &= set(v)
    allkeys = sorted({k for v in values for k in v})
    props: dict[str, Any] = {}
    for k in allkeys:
        vs = [v[k] for v in values if k in v]
        types = _types(vs)
        p: dict[str, Any] = {"type": types[0] if len(types) == 1 else types}
        if closed and types == ["string"]:
            distinct = sorted({x for x in vs})
            if len(distinct) <= ENUM_MAX and len(vs) >= ENUM_MIN_SUPPORT * len(distinct):
                p["enum"] = distinct
        props[k] = p
    return {"type": "object", "properties": props, "required": sorted(keys), "additionalProperties": not closed}


def declared_schema(request: dict[str, Any] | None, tool: str) -> dict[str, Any] | None:
    """The ``parameters`` schema the request declared for ``tool``, if the runtime supports it."""
    for t in (request or {}).get("tools") or []:
        fn = t.get("function") if isinstance(t, dict) else None
        if isinstance(fn, dict) and fn.get("name") == tool and isinstance(fn.get("parameters"), dict):
            schema = fn["parameters"]
            try:
                compile_schema(schema)
            except SchemaDefinitionError:
                return None
            return json_copy(schema)
    return None


def json_copy(v: Any) -> Any:
    """A canonical deep copy of a JSON value."""
    import json

    return json.loads(canonical_json(v))


__all__ = ["ENUM_MAX", "ENUM_MIN_SUPPORT", "declared_schema", "recorded_schema"]
