"""The noise probe: paid re-asks that give the excess certificate its re-asked inputs.

The specialist's certificate bounds the *excess* over the reference's self-disagreement once the
store holds ``noise_min_reasked`` re-asked inputs (:mod:`auto.guards.noise`). A ratchet whose
table overlay answers every repeat from its first witness, and whose repeat audits stay inside
the repeat budget (:mod:`auto_runtime.audit`), never re-asks anything on a stream where no
generation derives answers: the noise is never estimated, and a specialist a noise allowance
would certify is refused at every attempt.

:class:`NoiseProbe` re-asks a bounded number of such inputs, only while that can change a
decision:

- **Condition** (:meth:`NoiseProbe.update`, after every compile): the last specialist attempt was
  refused with a smallest certifiable epsilon at most ``epsilon + noise_probe_margin`` (the
  contract's; the excess certificate lowers that level by at most the reference's
  self-disagreement, so a refusal farther off cannot be turned by noise evidence), and the
  contract estimates noise at all (``noise_min_reasked`` not None).
- **Cap**: at most ``noise_probe_max`` probes per ratchet, and at most ``noise_probe_share`` of
  the calls answered so far (each probe is one reference call, counted like any audit).
- **Choice**: the next exact-match tier-1 answers (table hits, overlay answers) of inputs with a
  single witness, in stream order, each input at most once. The rule reads whether and how often
  an input was witnessed, never what was answered, which is the assumption the noise bound rests
  on (the decision to re-ask does not depend on the first answer).

A probe is a shadow audit queued outside the seeded selection (:meth:`auto_runtime.audit.ShadowAudit.probe`);
its answer is captured like any audit: a second witness of the input, hence re-asked evidence for
the next compile, and an audit of the answer it re-checks (the overlay's risk monitor for an
overlay answer). :meth:`NoiseProbe.describe` reports the count, what they found (inputs whose
two answers disagreed) and why the probe runs or not.
"""

from __future__ import annotations

import math
import threading
from typing import Any

from auto.canonical import canonical_json


class NoiseProbe:
    """The host ratchet's noise probe (see the module docstring).

    Args:
        host: the :class:`~auto.ratchet.core.Ratchet` (its contract, state, capture, runtime).
    """

    def __init__(self, host: Any) -> None:
        self.host = host
        c = host.contract
        self.max = c.noise_probe_max
        self.share = c.noise_probe_share
        self.margin = c.noise_probe_margin
        self.armed: str | None = None
        """Why the probe runs now (None: it does not)."""
        self.why_not: str = "no specialist attempt refused yet"
        self.probes = 0
        self.answered = 0
        self.disagreeing = 0
        self._keys: set[str] = set()
        self._lock = threading.Lock()

    def cap(self, calls: int) -> int:
        """Probes allowed after ``calls`` answered calls: ``min(noise_probe_max,
        floor(noise_probe_share * calls))``."""
        return min(self.max, int(math.floor(self.share * calls + 1e-9)))

    def update(self, refusal: dict[str, Any] | None) -> None:
        """Re-decide whether the probe runs, from the last refusals (``PolicyState.refusal``)."""
        c = self.host.contract
        spec = (refusal or {}).get("specialist")
        eps_min = (spec or {}).get("smallest_certifiable_epsilon")
        if c.noise_min_reasked is None or self.max == 0 or self.share == 0:
            self.armed, self.why_not = None, "the contract turns it off"
        elif spec is None:
            self.armed, self.why_not = None, "no refused specialist attempt to turn"
        elif not isinstance(eps_min, (int, float)):
            self.armed, self.why_not = None, "the refused specialist certified no epsilon at all"
        elif eps_min > c.epsilon + self.margin:
            self.armed, self.why_not = None, (f"the refused specialist's smallest certifiable epsilon {eps_min:.3g} "
                                              f"is beyond epsilon {c.epsilon:g} + margin {self.margin:g}")
        else:
            self.armed = (f"the refused specialist's smallest certifiable epsilon {eps_min:.3g} is within "
                          f"epsilon {c.epsilon:g} + margin {self.margin:g}")

    def offer(self, input_obj: Any, res: Any) -> bool:
        """After an exact-match tier-1 answer (request path; nothing to do unless armed): probe
        it when the cap allows and its input has one witness and was never probed. Returns
        whether a probe was queued."""
        if self.armed is None:
            return False
        h = self.host
        if self.probes >= self.cap(h.calls):
            return False
        try:
            key = canonical_json(input_obj)
        except (TypeError, ValueError):
            return False
        cap = h.capture
        with self._lock:
            if key in self._keys or key in cap.reasked or key not in cap.seen:
                return False
            self._keys.add(key)
            self.probes += 1
        queued = h.tiered.audit.probe(input_obj, res.answer, task=h.task, artifact_id=res.artifact_id,
                                      generation=res.generation, score=res.score,
                                      origin="overlay" if res.reason == "overlay" else None)
        if not queued:
            with self._lock:
                self.probes -= 1
                self._keys.discard(key)
        return queued

    def observed(self, rec: dict[str, Any]) -> None:
        """One probe's captured record (audit thread)."""
        with self._lock:
            self.answered += 1
            self.disagreeing += int(not rec.get("agree", True))

    def describe(self) -> dict[str, Any]:
        """``{"probes", "answered", "disagreeing", "max", "share", "margin", "armed", "why_not"}``."""
        with self._lock:
            return {"probes": self.probes, "answered": self.answered, "disagreeing": self.disagreeing,
                    "max": self.max, "share": self.share, "margin": self.margin, "armed": self.armed,
                    "why_not": None if self.armed else self.why_not}


__all__ = ["NoiseProbe"]
