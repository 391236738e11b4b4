"""Regex text for synthesis: literals of the safe subset (:mod:`auto.models.program.regex`), their Python
``re`` equivalents, and a cache of compiled patterns."""

from __future__ import annotations

import re

_RX_SPECIAL = set("()[]{}|*+?.^$\\")


def _lit(s: str) -> str:
    """``s`` as a literal pattern of the safe subset (and of Python's ``re``)."""
    out = []
    for ch in s:
        if ch in _RX_SPECIAL:
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ch in "\f\v":
            out.append("\\f" if ch == "\f" else "\\v")
        else:
            out.append(ch)
    return "".join(out)


def py_pattern(pattern: str) -> str:
    """The Python ``re`` pattern equivalent to a safe-subset ``pattern``: an unescaped ``$``
    outside a class (end of text only) becomes ``\\Z``; everything else is kept."""
    out = []
    i, in_class = 0, False
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            out.append(pattern[i:i + 2])
            i += 2
            continue
        if in_class:
            if ch == "]":
                in_class = False
        elif ch == "[":
            in_class = True
            if pattern[i + 1:i + 2] == "^":
                out.append("[^")
                i += 2
                if pattern[i:i + 1] == "]":
                    out.append("]")
                    i += 1
                continue
            if pattern[i + 1:i + 2] == "]":
                out.append("[]")
                i += 2
                continue
        elif ch == "$":
            out.append("\\Z")
            i += 1
            continue
        out.append(ch)
        i += 1
    return "".join(out)


_RE_CACHE: dict[str, re.Pattern] = {}


def _rx(pattern: str) -> re.Pattern:
    r = _RE_CACHE.get(pattern)
    if r is None:
        if len(_RE_CACHE) > 20000:
            _RE_CACHE.clear()
        r = _RE_CACHE[pattern] = re.compile(py_pattern(pattern), re.ASCII)
    return r
