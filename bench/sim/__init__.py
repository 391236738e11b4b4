"""The simulated reference model (``auto-sim-1``): an OpenAI-compatible server on loopback.

Everything it answers is marked simulated (header ``x-auto-reference-model: simulated``; Auto
records ``auto.reference_model.simulated = true``). See :mod:`bench.sim.server` for the endpoint
and seeding rules, :mod:`bench.sim.responders` for how a request's answer is chosen, and each
family's ``oracle`` module (e.g. :mod:`bench.triage.oracle`, whose noise model is the
simulator's calibration) for what it answers.

Public API::

    SimServer(port=0, seed=0, error_rate=0.02, sleep=False, ...)   context manager; .base_url
    SimModel(...)                                                  the logic without HTTP
    prompt_tokens(body), estimate_tokens(text)                     the usage estimate

``python -m bench.sim --port N`` serves it until interrupted.
"""

from bench.sim.server import MODEL, SimModel, SimServer, estimate_tokens, prompt_tokens

__all__ = ["MODEL", "SimModel", "SimServer", "estimate_tokens", "prompt_tokens"]
