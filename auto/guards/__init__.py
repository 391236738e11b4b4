"""The compiler side of the guard stack: calibration of the per-input tier-1/tier-0 decision.

Modules:

* :mod:`auto.guards.novelty` — conformal novelty (deopt inputs unlike the calibration inputs).
* :mod:`auto.guards.risk` — selective risk: a confidence threshold certified by Learn-then-Test
  (``mapie.risk_control``): P(tier-1 answer != reference | tier-1) <= epsilon w.p. >= 1 - delta.
* :mod:`auto.guards.stack` — the manifest entry ``{"method": "stack", ...}`` and its statement.
* :mod:`auto.guards.shift` — online exchangeability monitor (``mapie.exchangeability_testing``).
* :mod:`auto.guards.audit` — summary of the runtime's shadow audit (silent-wrong rate with CI).
* :mod:`auto.guards.semantic` — the host-side semantic novelty guard (a conformal novelty test on
  a sentence embedding, run by the host beside or in place of the artifact's novelty test; the
  ``semantic`` extra).

The runtime (``auto_runtime.guard``) evaluates what these write; it never imports this package.
"""

from auto.guards.audit import audit_summary
from auto.guards.novelty import calibrate_novelty
from auto.guards.risk import calibrate_selective_risk, smallest_certifiable_epsilon
from auto.guards.shift import ShiftMonitor
from auto.guards.stack import build_stack

__all__ = ["ShiftMonitor", "audit_summary", "build_stack", "calibrate_novelty", "calibrate_selective_risk",
           "smallest_certifiable_epsilon"]
