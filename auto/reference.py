"""The reference agent a user names as ``module:function`` (``auto run --reference``,
``auto serve --reference``): imported once, called with an input's fields as keyword arguments
on every input the artifact declines (tier-0).
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any, Callable

from auto.canonical import canonical_json
from auto.errors import ArgumentError, ReferenceFailed


def first_line(e: BaseException) -> str:
    """``"<ExceptionType>: <first line of its message>"`` (the type alone when it has none)."""
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0]}" if text else type(e).__name__


def load_reference(spec: str, cwd: str | os.PathLike | None = None,
                   option: str = "--reference") -> Callable[[dict[str, Any]], Any]:
    """``module:function`` as a reference ``f(input) -> answer`` calling ``function(**input)``.

    The module is imported with ``cwd`` (default: the current folder) on ``sys.path``, as
    ``python -m`` would find it.

    Args:
        spec: ``module:function`` (a dotted module path, then the function's name).
        cwd: the folder the module is imported from.
        option: the option named in a usage message.

    Returns:
        ``f(input dict)``: the function's answer, checked to be a JSON value.

    Raises:
        ArgumentError: ``spec`` is not ``module:function``, the module is not found, it has no
            such name, or it is not callable.
        ReferenceFailed: importing the module raised (any error but the module itself missing);
            later, from ``f``: the function raised, or answered a value that is not JSON.
    """
    mod, _, name = spec.partition(":")
    if not mod or not name:
        raise ArgumentError(f"{option} must be module:function, got {spec!r}")
    where = os.fspath(cwd) if cwd else os.getcwd()
    if where not in sys.path and (cwd or "" not in sys.path):
        sys.path.insert(0, where)
    try:
        module = importlib.import_module(mod)
    except ModuleNotFoundError as e:
        if e.name is not None and (mod == e.name or mod.startswith(e.name + ".")):
            raise ArgumentError(f"cannot load reference {spec!r}: {e}") from None
        raise ReferenceFailed(f"importing the reference module {mod} failed: {first_line(e)}") from None
    except Exception as e:  # noqa: BLE001 - the user's module failing on import becomes one clear line
        raise ReferenceFailed(f"importing the reference module {mod} raised {first_line(e)}") from None
    f = getattr(module, name, None)
    if f is None:
        raise ArgumentError(f"cannot load reference {spec!r}: module {mod!r} has no attribute {name!r}")
    if not callable(f):
        raise ArgumentError(f"reference {spec!r} is not callable")

    def call(inp: dict[str, Any]) -> Any:
        try:
            out = f(**inp)
        except Exception as e:  # noqa: BLE001 - any failure of the user's agent becomes one clear line
            raise ReferenceFailed(f"the reference {spec} raised {type(e).__name__}: "
                                  f"{str(e).splitlines()[0] if str(e) else ''}") from None
        try:
            canonical_json(out)
        except (TypeError, ValueError) as e:
            raise ReferenceFailed(f"the reference {spec} returned a value that is not JSON "
                                  f"({type(out).__name__}: {first_line(e)})") from None
        return out

    return call
