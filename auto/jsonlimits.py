"""How deep a JSON text from outside may nest: checked on its bytes before it is decoded.

Python's JSON decoder recurses once per nested array or object and fails with ``RecursionError``
(not ``ValueError``) near the interpreter's recursion limit (1,000 frames by default); every
later walk of a decoded value (canonical encoding, redaction, digests) recurses as deep. So a
body from a client (``auto serve``, ``auto proxy``) or an input file (``auto run --input``) is
scanned first and refused, in one line, when it nests deeper than :data:`MAX_JSON_DEPTH`.
"""

from __future__ import annotations

import re

MAX_JSON_DEPTH = 64
"""Deepest nesting of arrays and objects accepted from outside; no task input or chat request
of the OpenAI API is that deep (a chat request nests about 8 levels: body, messages, a message,
its content parts, a part, tool calls, a call, its function)."""


_TOKENS = re.compile(rb'\\.|["\[\]{}]', re.DOTALL)


def json_depth_ok(raw: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether the JSON text ``raw`` nests arrays/objects at most ``limit`` deep (brackets inside
    strings do not count). Costs a byte count when ``raw`` has at most ``limit`` opening brackets
    in all (the usual case, whatever its size), else one regex scan over its quotes, escapes and
    brackets."""
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return True
    depth = 0
    in_str = False
    for m in _TOKENS.finditer(raw):
        tok = m.group()
        if tok[0] == 0x5C:  # an escape pair: never a quote or a bracket
            continue
        if tok == b'"':
            in_str = not in_str
        elif in_str:
            continue
        elif tok in (b"[", b"{"):
            depth += 1
            if depth > limit:
                return False
        else:
            depth -= 1
    return True
