"""Running ``auto serve``: one process, or ``workers`` processes under uvicorn's supervisor.

The configuration is checked in the serving process first (every artifact loaded under its
limits and trust policy, the reference imported), so a bad artifact, key or reference is one
clear error before anything listens; worker processes then load the same configuration from
:data:`auto.serve.app.CONFIG_ENV`.
"""

from __future__ import annotations

import os
from typing import Callable

import uvicorn

from auto.asgi import check_listen, loop_and_parser, uvicorn_config
from auto.serve.app import CONFIG_ENV, ArtifactService, ServeConfig, check_auth, load_artifacts


def run(config: ServeConfig, announce: Callable[[], None] | None = None) -> None:
    """Serve until interrupted; ``announce`` is called once the address is free and the
    artifacts are loaded, just before listening.

    Raises:
        ListenError: the address cannot be listened on.
        ArgumentError: off loopback without a token (:func:`auto.serve.app.check_auth`).
        ArtifactError, ArgumentError, StoreError: the configuration cannot be served (see
            :func:`auto.serve.app.load_artifacts`).
    """
    check_auth(config)
    check_listen(config.host, config.port)
    arts = load_artifacts(config)
    if config.workers <= 1:
        service = ArtifactService(config, arts)  # tools, reference and store checked here
        if announce is not None:
            announce()
        try:
            uvicorn.Server(uvicorn_config(service.app, config.host, config.port)).run()
        finally:
            service.close()
        return
    ArtifactService(config, arts).close()  # the reference imports and the store opens here too
    if announce is not None:
        announce()
    os.environ[CONFIG_ENV] = config.to_env()
    loop, http = loop_and_parser()
    uvicorn.run("auto.serve.app:create_app", factory=True, host=config.host, port=config.port, workers=config.workers,
                loop=loop, http=http, log_level="warning", access_log=False)
