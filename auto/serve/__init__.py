"""``auto serve``: compiled artifacts over HTTP, with the same limits and guards as in process.

Public API::

    ServeConfig(artifacts=[...], store=None, registry=None, trust_keys=[], reference=None, ...)
    ArtifactService(config).app    # the ASGI app of one worker
    run(config)                    # serve in the foreground, config.workers processes

Modules: :mod:`~auto.serve.app` (endpoints, loading), :mod:`~auto.serve.server` (uvicorn).
"""

from auto.serve.app import CONFIG_ENV, DEFAULT_PORT, ArtifactService, ServeConfig, create_app, load_artifacts
from auto.serve.server import run

__all__ = ["CONFIG_ENV", "DEFAULT_PORT", "ArtifactService", "ServeConfig", "create_app", "load_artifacts", "run"]
