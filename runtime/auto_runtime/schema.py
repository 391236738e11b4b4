"""A minimal JSON-Schema subset validator, compiled to closures so tiny schemas cost ~1 µs.

Supported validation keywords (JSON Schema 2020-12 semantics, https://json-schema.org/):
``type`` (a name or a list of: object, string, integer, number, boolean, array, null),
``properties``, ``required``, ``additionalProperties`` (boolean or schema), ``enum``, ``const``,
``maxLength`` / ``minLength`` (Unicode code points), ``items`` (one schema for every element),
``minItems`` / ``maxItems``, ``minimum`` / ``maximum``.

Annotations are ignored: ``title``, ``description``, ``default``, ``examples``, ``$schema``,
``$id``, ``$comment``, ``format``. Any other keyword is refused when the schema is compiled
(:class:`SchemaDefinitionError`), so a schema is never silently weakened.

Per JSON Schema, ``integer`` accepts a float with a zero fractional part (``1.0``), and booleans
are neither integers nor numbers. Strings are measured in code points (Python ``len``).

Violations raise :class:`~auto_runtime.errors.InputSchemaError` whose message starts with the
JSON path of the violation (``$`` is the root, ``$.ticket``, ``$.items[2]``); the path is also
available as the error's ``path`` attribute.
"""

from __future__ import annotations

import math
from typing import Any, Callable

from auto_runtime.errors import AutoError, InputSchemaError

Validator = Callable[[Any], None]

_ANNOTATIONS = frozenset(
    {"title", "description", "default", "examples", "$schema", "$id", "$comment", "format"}
)
_KEYWORDS = frozenset(
    {"type", "properties", "required", "additionalProperties", "enum", "const", "maxLength",
     "minLength", "items", "minItems", "maxItems", "minimum", "maximum"}
)
_TYPES = ("object", "string", "integer", "number", "boolean", "array", "null")


class SchemaDefinitionError(AutoError):
    """The schema itself is not something this validator supports (raised at compile time)."""


class _Violation(Exception):
    """Internal: carries the message and the path parts collected while unwinding."""

    __slots__ = ("msg", "parts")

    def __init__(self, msg: str) -> None:
        self.msg = msg
        self.parts: list[str] = []


def json_type_name(v: Any) -> str:
    """The JSON-schema type name of a decoded JSON value (``null``, ``boolean``, ``integer``, ...)."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, (list, tuple)):
        return "array"
    if isinstance(v, dict):
        return "object"
    return type(v).__name__


def _is_type(name: str) -> Callable[[Any], bool]:
    if name == "object":
        return lambda v: isinstance(v, dict)
    if name == "string":
        return lambda v: isinstance(v, str)
    if name == "integer":
        return lambda v: (isinstance(v, int) and not isinstance(v, bool)) or (
            isinstance(v, float) and math.isfinite(v) and v.is_integer()
        )
    if name == "number":
        return lambda v: (isinstance(v, (int, float)) and not isinstance(v, bool))
    if name == "boolean":
        return lambda v: isinstance(v, bool)
    if name == "array":
        return lambda v: isinstance(v, (list, tuple))
    if name == "null":
        return lambda v: v is None
    raise SchemaDefinitionError(f"unknown type {name!r}")


def _json_equal(a: Any, b: Any) -> bool:
    """Equality in the JSON data model (``True`` is not ``1``)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def _compile(schema: Any, where: str) -> Validator:
    if schema is True or schema == {}:
        return _accept
    if schema is False:
        def reject(v: Any) -> None:
            raise _Violation("no value is allowed here")
        return reject
    if not isinstance(schema, dict):
        raise SchemaDefinitionError(f"{where}: a schema must be an object or a boolean")
    for key in schema:
        if key not in _KEYWORDS and key not in _ANNOTATIONS:
            raise SchemaDefinitionError(f"{where}: unsupported JSON-schema keyword {key!r}")

    checks: list[Validator] = []
    single: str | None = None
    max_len = _nonneg_int(schema, "maxLength", where)
    min_len = _nonneg_int(schema, "minLength", where)

    if "type" in schema:
        single, check = _type_check(schema["type"], where, max_len, min_len)
        if check is not None:
            checks.append(check)
        if single == "string" and (max_len is not None or min_len is not None):
            max_len = min_len = None  # fused into the string check

    if "enum" in schema or "const" in schema:
        checks.append(_enum_check(schema, where))

    if max_len is not None or min_len is not None:
        checks.append(_length_check(max_len, min_len))

    minimum = _number(schema, "minimum", where)
    maximum = _number(schema, "maximum", where)
    if minimum is not None or maximum is not None:
        checks.append(_range_check(minimum, maximum))

    if single == "object" or "properties" in schema or "required" in schema \
            or "additionalProperties" in schema:
        checks.append(_compile_object(schema, where, strict=single == "object"))

    if "items" in schema or "minItems" in schema or "maxItems" in schema:
        checks.append(_compile_array(schema, where))
    return _conjunction(checks)


def _type_check(t: Any, where: str, max_len: int | None, min_len: int | None) -> tuple[str | None, Validator | None]:
    """The ``type`` keyword's value ``t`` as ``(the single type name or None, its check)``; the
    check is None for ``"object"`` (fused into the object check) and, for ``"string"`` with a
    length bound, checks the bounds too."""
    names = [t] if isinstance(t, str) else t
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise SchemaDefinitionError(f"{where}: 'type' must be a type name or a list of them")
    preds = [_is_type(n) for n in names]
    expected = " or ".join(names)
    single = names[0] if len(names) == 1 else None
    if single == "object":
        return single, None  # fused into the object check
    if single == "string" and (max_len is not None or min_len is not None):
        hi_s = max_len if max_len is not None else math.inf
        lo_s = min_len or 0
        hi_text, lo_text = max_len, min_len

        def check_string(v: Any) -> None:
            if not isinstance(v, str):
                raise _Violation(f"expected string, got {json_type_name(v)}")
            n = len(v)
            if n > hi_s:
                raise _Violation(f"string of length {n} exceeds maxLength {hi_text}")
            if n < lo_s:
                raise _Violation(f"string of length {n} is shorter than minLength {lo_text}")
        return single, check_string
    if len(preds) == 1:
        pred = preds[0]

        def check_type(v: Any) -> None:
            if not pred(v):
                raise _Violation(f"expected {expected}, got {json_type_name(v)}")
        return single, check_type

    def check_types(v: Any) -> None:
        for p in preds:
            if p(v):
                return
        raise _Violation(f"expected {expected}, got {json_type_name(v)}")
    return single, check_types


def _enum_check(schema: dict, where: str) -> Validator:
    """The check of ``enum`` (or ``const``, a one-value enum): a set lookup for string values."""
    if "enum" in schema:
        allowed = schema["enum"]
        if not isinstance(allowed, list):
            raise SchemaDefinitionError(f"{where}: 'enum' must be a list")
    else:
        allowed = [schema["const"]]
    shown = ", ".join(repr(a) for a in allowed[:8]) + (", ..." if len(allowed) > 8 else "")
    if allowed and all(isinstance(a, str) for a in allowed):
        allowed_set = frozenset(allowed)

        def check_enum(v: Any) -> None:
            if not (isinstance(v, str) and v in allowed_set):
                raise _Violation(f"value {v!r:.80} is not one of [{shown}]")
        return check_enum

    def check_any_enum(v: Any) -> None:
        for a in allowed:
            if _json_equal(v, a):
                return
        raise _Violation(f"value {v!r:.80} is not one of [{shown}]")
    return check_any_enum


def _length_check(max_len: int | None, min_len: int | None) -> Validator:
    """The ``maxLength``/``minLength`` check (characters) of a value that may not be a string."""
    hi = max_len if max_len is not None else math.inf
    lo = min_len or 0

    def check_len(v: Any) -> None:
        if isinstance(v, str):
            n = len(v)
            if n > hi:
                raise _Violation(f"string of length {n} exceeds maxLength {max_len}")
            if n < lo:
                raise _Violation(f"string of length {n} is shorter than minLength {min_len}")
    return check_len


def _range_check(minimum: float | None, maximum: float | None) -> Validator:
    """The ``minimum``/``maximum`` check (inclusive) of a value that may not be a number."""
    def check_range(v: Any) -> None:
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            if minimum is not None and v < minimum:
                raise _Violation(f"{v} is less than minimum {minimum}")
            if maximum is not None and v > maximum:
                raise _Violation(f"{v} is greater than maximum {maximum}")
    return check_range


def _conjunction(checks: list[Validator]) -> Validator:
    """One validator that runs ``checks`` in order (none: accept everything)."""
    if not checks:
        return _accept
    if len(checks) == 1:
        return checks[0]
    if len(checks) == 2:
        c0, c1 = checks

        def both(v: Any) -> None:
            c0(v)
            c1(v)
        return both

    def all_checks(v: Any) -> None:
        for c in checks:
            c(v)
    return all_checks

def _accept(v: Any) -> None:
    return None


def _nonneg_int(schema: dict, key: str, where: str) -> int | None:
    if key not in schema:
        return None
    v = schema[key]
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise SchemaDefinitionError(f"{where}: {key!r} must be a non-negative integer")
    return v


def _number(schema: dict, key: str, where: str) -> float | int | None:
    if key not in schema:
        return None
    v = schema[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise SchemaDefinitionError(f"{where}: {key!r} must be a number")
    return v


def _compile_object(schema: dict, where: str, strict: bool) -> Validator:
    props_schema = schema.get("properties", {})
    if not isinstance(props_schema, dict):
        raise SchemaDefinitionError(f"{where}: 'properties' must be an object")
    props = {k: _compile(s, f"{where}.properties.{k}") for k, s in props_schema.items()}
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(k, str) for k in required):
        raise SchemaDefinitionError(f"{where}: 'required' must be a list of strings")
    required_t = tuple(required)
    additional = schema.get("additionalProperties", True)
    if additional is True:
        extra: Validator | None = None
        forbid_extra = False
    elif additional is False:
        extra = None
        forbid_extra = True
    else:
        extra = _compile(additional, f"{where}.additionalProperties")
        forbid_extra = False
    props_get = props.get

    def check_object(v: Any) -> None:
        if not isinstance(v, dict):
            if strict:
                raise _Violation(f"expected object, got {json_type_name(v)}")
            return  # these keywords apply to objects only
        for k in required_t:
            if k not in v:
                raise _Violation(f"missing required property {k!r}")
        for k, val in v.items():
            sub = props_get(k)
            if sub is None:
                if forbid_extra:
                    raise _Violation(f"additional property {k!r} is not allowed")
                if extra is None:
                    continue
                sub = extra
            try:
                sub(val)
            except _Violation as e:
                e.parts.append(f".{k}" if isinstance(k, str) and k.isidentifier() else f"[{k!r}]")
                raise
    return check_object


def _compile_array(schema: dict, where: str) -> Validator:
    items = _compile(schema["items"], f"{where}.items") if "items" in schema else None
    min_items = _nonneg_int(schema, "minItems", where)
    max_items = _nonneg_int(schema, "maxItems", where)

    def check_array(v: Any) -> None:
        if not isinstance(v, (list, tuple)):
            return
        n = len(v)
        if max_items is not None and n > max_items:
            raise _Violation(f"array of {n} items exceeds maxItems {max_items}")
        if min_items is not None and n < min_items:
            raise _Violation(f"array of {n} items is shorter than minItems {min_items}")
        if items is not None and items is not _accept:
            for i, x in enumerate(v):
                try:
                    items(x)
                except _Violation as e:
                    e.parts.append(f"[{i}]")
                    raise
    return check_array


def compile_schema(schema: Any) -> Callable[[Any], None]:
    """Compile ``schema`` into ``validate(value) -> None``.

    The returned function raises :class:`~auto_runtime.errors.InputSchemaError` with a message
    ``"<path>: <what is wrong>"`` and a ``path`` attribute on the first violation found.

    Raises:
        SchemaDefinitionError: the schema uses an unsupported keyword or is malformed.
    """
    check = _compile(schema, "$")
    if check is _accept:
        return _accept

    def validate(value: Any) -> None:
        try:
            check(value)
        except _Violation as e:
            path = "$" + "".join(reversed(e.parts))
            err = InputSchemaError(f"{path}: {e.msg}")
            err.path = path  # type: ignore[attr-defined]
            raise err from None
        except RecursionError:
            err = InputSchemaError("$: value nested too deeply to validate")
            err.path = "$"  # type: ignore[attr-defined]
            raise err from None
    return validate


def validate(schema: Any, value: Any) -> None:
    """Validate ``value`` against ``schema`` (compiles every time; prefer :func:`compile_schema`).

    Raises:
        InputSchemaError: ``value`` violates ``schema``.
        SchemaDefinitionError: ``schema`` is unsupported or malformed.
    """
    compile_schema(schema)(value)
