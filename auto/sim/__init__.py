"""The simulated reference model (``auto-sim-1``): an OpenAI-compatible server on loopback.

Everything it answers is marked simulated (header ``x-auto-reference-model: simulated``; Auto
records ``auto.reference_model.simulated = true``). See :mod:`auto.sim.server` for the endpoint
and seeding rules, :mod:`auto.sim.families` for response families, :mod:`auto.sim.triage` for
the triage family and its noise model (the simulator's calibration).

Public API::

    SimServer(port=0, seed=0, error_rate=0.02, sleep=False, ...)   context manager; .base_url
    SimModel(...)                                                  the logic without HTTP
    triage_oracle(ticket) -> (label, ambiguous, scores)
    register_family(name, marker, respond)
"""

from auto.sim.families import FAMILIES, Family, find_family, register_family
from auto.sim.server import MODEL, SimModel, SimServer, estimate_tokens, prompt_tokens
from auto.sim.triage import LABELS, flip_probability, format_probability, triage_oracle

__all__ = [
    "FAMILIES", "Family", "LABELS", "MODEL", "SimModel", "SimServer", "estimate_tokens", "find_family",
    "flip_probability", "format_probability", "prompt_tokens", "register_family", "triage_oracle",
]
