"""Description length: the size term of the ranking's two-part code (minimum description length,
J. Rissanen, 1978)."""

from __future__ import annotations

import math

from auto.models.program import ast as A


def description_length(node: A.Node) -> float:
    """The ranking's description length of a program: 1 per node, plus 0.25 per character of a
    regex pattern, 0.125 per character of other text payloads (keywords, constants, separators)
    and 0.1 per significant digit of a numeric constant (so ``20000`` is simpler than ``19873``).
    """
    t = type(node)
    if t is A.Const:
        v = node.value
        if isinstance(v, str):
            return 1 + len(v) / 8
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return 1 + 0.1 * _sig_digits(v)
        return 1.0
    n = 1.0
    if t is A.Search:
        n += len(node.pattern) / 4 + (0.25 if node.group else 0)
    elif t in (A.Contains, A.StartsWith, A.EndsWith):
        n += len(node.s) / 8
    elif t in (A.Split, A.Join):
        n += len(node.sep) / 8
    elif t is A.Compare:
        v = node.value
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            n += 0.1 * _sig_digits(v)
        elif isinstance(v, str):
            n += len(v) / 8
    for f in getattr(node, "__dataclass_fields__", {}):
        child = getattr(node, f)
        if type(child) in A.NODE_TYPES:
            n += description_length(child)
        elif isinstance(child, tuple):
            for item in child:
                if type(item) in A.NODE_TYPES:
                    n += description_length(item)
                elif isinstance(item, tuple):
                    for sub in item:
                        if type(sub) in A.NODE_TYPES:
                            n += description_length(sub)
                        elif isinstance(sub, str):
                            n += len(sub) / 8
    return n


def _sig_digits(v: int | float) -> int:
    s = repr(abs(v)).replace(".", "").rstrip("0").lstrip("0")
    return max(1, len(s.rstrip("0")))


def _mdl_ratio(n: int, n_labels: int) -> float:
    """Witnesses one unit of description length is worth: ``log2(#node kinds) / (log2(n) +
    log2(#labels))`` — the bits to name one node against the bits to list one exception (which
    witness, which answer), after the two-part code of minimum description length (J. Rissanen,
    1978; J. R. Quinlan and R. Rivest, 1989)."""
    return math.log2(len(A.NODE_TYPES)) / (math.log2(max(2, n)) + math.log2(max(2, n_labels)))
