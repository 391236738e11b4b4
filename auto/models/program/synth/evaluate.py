"""Search-time evaluation: a candidate's answers under the reference interpreter's semantics with
Python ``re`` for :class:`~auto.models.program.ast.Search`, and the equality that scores them."""

from __future__ import annotations

import re
from typing import Any

from auto.canonical import canonical_json
from auto.errors import AutoError
from auto.models.program import ast as A
from auto.models.program.interp import DeoptSignal, make_evaluator, to_answer

from .patterns import _rx

_DEOPT = object()  # the fast evaluator's "declined" answer


def _same(out: Any, ref: Any) -> bool:
    """Canonical-JSON equality of a JSON answer and a reference (``1`` != ``1.0`` != ``True``)."""
    if out is _DEOPT:
        return False
    if type(out) is not type(ref):
        return False
    if isinstance(out, (dict, list, float)):
        return canonical_json(out) == canonical_json(ref)
    return out == ref


def _re_search(x: str, pattern: str, group: int) -> str | None:
    m = _rx(pattern).search(x)
    if m is None or group > (m.re.groups or 0):
        return None
    return m.group(group)


_fast_ev = make_evaluator(_re_search)
"""The reference interpreter's semantics with Python ``re`` for :class:`Search` (search time only;
the regex subset is defined so the two agree, and the final program is re-checked with the
interpreter's own Pike VM)."""


def _answer(node: A.Node, inp: dict) -> Any:
    """Search-time answer of ``node`` on ``inp`` as a JSON value, or ``_DEOPT``."""
    try:
        return to_answer(_fast_ev(node, inp))
    except DeoptSignal:
        return _DEOPT
    except (AutoError, ValueError, TypeError, re.error, RecursionError):
        return _DEOPT
