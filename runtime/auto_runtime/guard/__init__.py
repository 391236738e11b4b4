"""Guards: decide, per input, whether the artifact's answer may be used (tier 1) or the call must
deoptimize to the reference (tier 0).

A guard is built from the manifest's ``guard`` entry by :func:`build_guard`, which looks the
entry's ``method`` up in a registry (:data:`GUARD_METHODS`, extended with :func:`register_guard`)
and never raises (:mod:`auto_runtime.guard.registry`). Every guard decides from the artifact's
whole output object — ``evaluate_output``, ``decide_output``, ``reason_output``,
``evaluate_batch_outputs``, ``describe`` (:mod:`auto_runtime.guard.base`) — which is what
:class:`~auto_runtime.TieredTask` calls.

Methods, one module each:

* ``none`` — the manifest declares no guard: every call deopts (:class:`AlwaysDeopt`);
* ``conformal-novelty`` (:class:`ConformalNovelty`, :mod:`~auto_runtime.guard.novelty`) —
  split-conformal p-value of the ``nonconformity`` score, deopt iff ``p <= alpha``;
* ``exact-match`` (:class:`ExactMatch`, :mod:`~auto_runtime.guard.exact`) — table hits only;
* ``selective-risk`` (:class:`SelectiveRisk`, :mod:`~auto_runtime.guard.risk`) — confidence
  ``>=`` a Learn-then-Test threshold;
* ``program`` (:class:`ProgramGuard`, :mod:`~auto_runtime.guard.program`) — the program's own
  ``deopt`` flag;
* ``program-evidence`` (:class:`ProgramEvidence`, :mod:`~auto_runtime.guard.program`) — the
  deopt flag, a conformal novelty test of each part's evidence (the rule that decided it and the
  kind of evidence behind it) and an optional Learn-then-Test confidence threshold;
* ``region-novelty`` (:class:`RegionNovelty`, :mod:`~auto_runtime.guard.region`) — a region's
  commit: a conformal novelty test of the input's words against the training inputs of the path
  it took;
* ``stack`` (:class:`GuardStack`, :mod:`~auto_runtime.guard.stack`) — every component passes.

Deopt reasons starting with ``"guard-unusable: "`` mean the entry made the guard always deopt:
a broken entry (logged as a warning), or a declared one (method ``none``, a null threshold, a
``fallback_reason``; :attr:`AlwaysDeopt.declared` is true, nothing is logged).

:class:`TightenedGuard` (:mod:`~auto_runtime.guard.tightened`) wraps a guard after a shift alarm
(``TieredTask.tighten``): it always deopts with ``"shift alarm: <reason>"`` but still reports the
wrapped guard's p-value.

To add a method (e.g. conformal risk control), subclass :class:`Guard`, implement
``evaluate_output`` (and optionally the faster ``decide_output`` / ``evaluate_batch_outputs``),
and register a factory that takes the manifest entry and raises :class:`GuardConfigError` when
the entry is unusable.
"""

from auto_runtime.guard.base import AlwaysDeopt, Guard, GuardConfigError, GuardDecision
from auto_runtime.guard.exact import ExactMatch
from auto_runtime.guard.novelty import ConformalNovelty
from auto_runtime.guard.program import ProgramEvidence, ProgramGuard
from auto_runtime.guard.region import RegionNovelty
from auto_runtime.guard.registry import GUARD_METHODS, GuardFactory, build_guard, register_guard
from auto_runtime.guard.risk import SelectiveRisk
from auto_runtime.guard.stack import GuardStack
from auto_runtime.guard.tightened import TightenedGuard

__all__ = [
    "GUARD_METHODS", "AlwaysDeopt", "ConformalNovelty", "ExactMatch", "Guard", "GuardConfigError",
    "GuardDecision", "GuardFactory", "GuardStack", "ProgramEvidence", "ProgramGuard", "RegionNovelty", "SelectiveRisk", "TightenedGuard",
    "build_guard", "register_guard",
]
