"""``auto proxy``: an OpenAI-compatible proxy that records every model call and answers compiled
model-call sites at tier-1, so an agent in any language gets cheaper with no code change.

Point the agent's OpenAI base URL at the proxy (``OPENAI_BASE_URL=http://127.0.0.1:8788/v1``);
the proxy forwards to ``--upstream`` with the agent's own credentials (never stored), records each
call in the store as the in-process recorder does, finds the model-call sites in what it
recorded (:mod:`auto.sites`), and runs one ratchet per site (:mod:`auto.ratchet`): a request the
installed generation's guard admits is answered by the artifact, every other one goes upstream
and its answer becomes a witness for the next generation.

Public API::

    ProxyConfig(upstream, store, host="127.0.0.1", port=8788, answer=True, trust=None, ...)
    Proxy(config).app            # the ASGI app
    run(config)                  # serve in the foreground (auto proxy)
    ProxyServer(config)          # on a background thread (tests, benchmarks): .base_url

Modules: :mod:`~auto.proxy.app` (requests), :mod:`~auto.proxy.upstream` (forwarding),
:mod:`~auto.proxy.recording` (spans), :mod:`~auto.proxy.writer` (the store writer process), :mod:`~auto.proxy.sites` (sites and their ratchets),
:mod:`~auto.proxy.answer` (tier-1 completions), :mod:`~auto.proxy.server` (uvicorn).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = ["DEFAULT_PORT", "Proxy", "ProxyConfig", "ProxyServer", "run"]

_LAZY = {"DEFAULT_PORT": "auto.proxy.app", "Proxy": "auto.proxy.app", "ProxyConfig": "auto.proxy.app",
         "ProxyServer": "auto.proxy.server", "run": "auto.proxy.server"}

if TYPE_CHECKING:  # pragma: no cover
    from auto.proxy.app import DEFAULT_PORT, Proxy, ProxyConfig
    from auto.proxy.server import ProxyServer, run


def __getattr__(name: str) -> Any:
    """The public names load on first use, so the store writer child (:mod:`auto.proxy.writer`)
    imports only what it needs."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'auto.proxy' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
