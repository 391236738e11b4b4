"""Reading a JSONL file of input objects (anchor inputs, a user's stream).

One object per non-blank line; each must carry a string under the task's text field. Errors
name the file and the line number, in one line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from auto.errors import ArgumentError


def read_objects(path: str | Path, field: str) -> list[dict[str, Any]]:
    """The JSON objects of ``path``, one per non-blank line, in file order.

    Raises:
        ArgumentError: the file cannot be read as UTF-8 text, a line is not JSON, or a line is
            not an object with a string ``field``.
    """
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise ArgumentError(f"{path}: cannot read it as UTF-8 text ({e})") from None
    rows: list[dict[str, Any]] = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as e:
            raise ArgumentError(f"{path}:{n}: not JSON ({e})") from None
        if not isinstance(obj, dict) or not isinstance(obj.get(field), str):
            raise ArgumentError(f"{path}:{n}: expected an object with a string field {field!r}")
        rows.append(obj)
    return rows
