"""The guards of DSL program artifacts, whose output is ``{"answer": ..., "deopt": <bool>}``
(with ``"evidence"`` when the program carries its evidence).

* ``program`` (:class:`ProgramGuard`): passes iff ``out["deopt"] is False``; ``True`` deopts with
  ``"program deopt"`` (the program itself declined the input), anything else (missing, not a bool)
  with ``"no-deopt-flag: ..."``. No p-value. The entry needs no other field: ``{"method": "program"}``.
* ``program-evidence`` (:class:`ProgramEvidence`): the deopt flag, then a conformal novelty test of
  every part's evidence and an optional Learn-then-Test confidence threshold (the class docstring).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from typing import Any, Sequence

import numpy as np

from auto_runtime.guard.base import PASS, Guard, GuardDecision


class ProgramGuard(Guard):
    """Guard of DSL program artifacts: pass iff ``out["deopt"] is False`` (see the module
    docstring for the reasons). No p-value. Never raises."""

    method = "program"
    _DEOPT = GuardDecision(False, None, "program deopt")
    _NO_FLAG = GuardDecision(False, None, "no-deopt-flag: artifact output has no boolean 'deopt'")

    def decide_output(self, out: Any) -> tuple[bool, float | None]:
        return (isinstance(out, dict) and out.get("deopt") is False), None

    def evaluate_output(self, out: Any) -> GuardDecision:
        flag = out.get("deopt") if isinstance(out, dict) else None
        if flag is False:
            return PASS
        return self._DEOPT if flag is True else self._NO_FLAG

    def evaluate_batch_outputs(self, outs: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
        return self._batch_or_deopt(outs)


class ProgramEvidence(Guard):
    """``program-evidence``: the guard of a program with a stated meaning (the manifest entry is
    written by the compiler's ``auto.guards.program``).

    The artifact's output carries, beside the answer, ``"evidence": {part: {"rule": int, "kind":
    int}}``: the rule that decided each part and the kind of evidence behind it (an *event*). The
    guard passes iff

    1. ``out["deopt"] is False``;
    2. no part's ``kind`` is one of ``deopt_kinds`` (evidence of an unwitnessed generalization: a contested
       precedence, a split version space);
    3. for every part, the nonconformity ``s = 1 - support / witnesses`` of its event (``support``:
       training witnesses with that event, from the entry's event table; 0 for an event the table
       does not list) has the conformal p-value ``(1 + #{c >= s}) / (n + 1)`` against the part's
       ``n`` calibration scores above the part's ``alpha`` (Vovk, Gammerman, Shafer, *Algorithmic
       Learning in a Random World*, 2005);
    4. with a risk ``threshold``: the smallest part ``precision`` of the events is ``>= threshold``
       (a Learn-then-Test threshold: Angelopoulos et al., 2021).

    The decision's p-value is the smallest part p-value. Declined reasons name the part, its rule,
    the event kind and the numbers. Never raises.

    Args:
        parts: per part ``(name, alpha, witnesses, calibration scores, {(rule, kind): (support,
            precision)}, rule labels)``.
        threshold: the certified confidence threshold, or None (no selective-risk threshold).
        deopt_kinds: the evidence kinds that always deopt.
        kinds: the kind names (reasons), by kind number.
        epsilon, delta: the certificate's levels (quoted in reasons), or None.
        statement: the entry's statement (informational).
    """

    method = "program-evidence"
    _KINDS = ("supported", "contested", "default without evidence", "split", "split at whole words",
              "split at phrases")
    _DEOPT = ProgramGuard._DEOPT
    _NO_FLAG = ProgramGuard._NO_FLAG

    def __init__(self, parts: Sequence[tuple], threshold: float | None, *, deopt_kinds: Sequence[int] = (),
                 kinds: Sequence[str] | None = None, epsilon: float | None = None, delta: float | None = None,
                 statement: str | None = None) -> None:
        self.parts = tuple((name, float(alpha), int(n_w), tuple(sorted(float(c) for c in cal)), dict(events),
                            tuple(labels)) for name, alpha, n_w, cal, events, labels in parts)
        self.threshold = threshold
        self.deopt_kinds = frozenset(int(k) for k in deopt_kinds)
        self._kind_names = tuple(kinds) if kinds else self._KINDS
        self.epsilon = epsilon
        self.delta = delta
        self.statement = statement

    def _part(self, part: tuple, e: Any) -> tuple[float, float, int, int, int] | None:
        """``(p-value, precision, rule, kind, support)`` of one part's evidence, or None if malformed."""
        name, _alpha, n_w, cal, events, _labels = part
        if e.__class__ is not dict:
            return None
        rule, kind = e.get("rule"), e.get("kind")
        if rule.__class__ is not int or kind.__class__ is not int:
            return None
        support, precision = events.get((rule, kind), (0, 0.5))
        s = round(1.0 - support / n_w, 9) if n_w > 0 else 1.0
        p = (1 + len(cal) - bisect_left(cal, s)) / (len(cal) + 1)
        return p, precision, rule, kind, support

    def admits(self, part: int, rule: int, kind: int) -> bool:
        """Whether part ``part`` (its index in :attr:`parts`) passes this guard with the event
        ``(rule, kind)``: its novelty p-value is above the part's alpha, ``kind`` is not a deopt
        kind, and (with a risk threshold) the event's precision reaches it. The decision of a
        whole output is the conjunction over its parts (see the class docstring), so the events a
        part admits say where a program answers without its output being checked here (a region
        runs value programs so).

        Raises:
            IndexError: no such part.
        """
        r = self._part(self.parts[part], {"rule": int(rule), "kind": int(kind)})
        if r is None:
            return False
        p, precision, _rule, k, _sup = r
        return p > self.parts[part][1] and k not in self.deopt_kinds and (
            self.threshold is None or precision >= self.threshold)

    @property
    def kind_count(self) -> int:
        """How many evidence kinds there are (kinds are ``0 .. kind_count - 1``)."""
        return len(self._kind_names)

    def decide_output(self, out: Any) -> tuple[bool, float | None]:
        try:
            if out.__class__ is not dict or out.get("deopt") is not False:
                return False, None
            ev = out.get("evidence")
            if ev.__class__ is not dict:
                return False, None
            p_min, conf, ok = 1.0, math.inf, True
            for part in self.parts:
                r = self._part(part, ev.get(part[0]))
                if r is None:
                    return False, None
                p, precision, _rule, kind, _sup = r
                ok = ok and p > part[1] and kind not in self.deopt_kinds
                p_min = min(p_min, p)
                conf = min(conf, precision)
            if ok and self.threshold is not None and not conf >= self.threshold:
                ok = False
            return ok, p_min
        except Exception:  # noqa: BLE001 - by contract a guard never raises in the request path
            return False, None

    def evaluate_output(self, out: Any) -> GuardDecision:
        return self._decision_of_decide(out)

    def reason_output(self, out: Any, p_value: float | None) -> str:
        try:
            if not isinstance(out, dict) or out.get("deopt") is not False:
                return self._DEOPT.reason if isinstance(out, dict) and out.get("deopt") is True else self._NO_FLAG.reason
            ev = out.get("evidence")
            if not isinstance(ev, dict):
                return "no-evidence: artifact output has no 'evidence' object"
            conf = math.inf
            for part in self.parts:
                name, alpha, n_w, _cal, _events, labels = part
                r = self._part(part, ev.get(name))
                where = f"field {name!r}" if name else "the answer"
                if r is None:
                    return f"no-evidence: artifact output has no rule/kind evidence for {where}"
                p, precision, rule, kind, support = r
                conf = min(conf, precision)
                label = labels[rule] if 0 <= rule < len(labels) else rule
                kname = self._kind_names[kind] if 0 <= kind < len(self._kind_names) else f"kind {kind}"
                if kind in self.deopt_kinds:
                    return f"{where}: rule {rule} ({label!r}) {kname}: a generalization the witnesses did not test"
                if p <= alpha:
                    return (f"{where}: rule {rule} ({label!r}) {kname}, seen on {support} of {n_w} witnesses "
                            f"(novelty p={p:.4g}<=alpha={alpha:.4g})")
            eps = "?" if self.epsilon is None else f"{self.epsilon:.4g}"
            dlt = "?" if self.delta is None else f"{self.delta:.4g}"
            return (f"confidence {conf:.4g} < threshold {self.threshold:.4g} (selective risk eps={eps}, delta={dlt})"
                    if self.threshold is not None else "program-evidence declined")
        except Exception:  # noqa: BLE001
            return "program-evidence declined"

    def evaluate_batch_outputs(self, outs: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
        return self._batch_or_deopt(outs)

    def describe(self) -> dict[str, Any]:
        return {"method": self.method, "usable": True, "parts": [p[0] for p in self.parts],
                "alpha": [p[1] for p in self.parts], "threshold": self.threshold,
                "deopt_kinds": sorted(self.deopt_kinds),
                "epsilon": self.epsilon, "delta": self.delta}
