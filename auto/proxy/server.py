"""Running the proxy: in the foreground (``auto proxy``) or on a background thread (tests, benchmarks).

Both serve :class:`auto.proxy.app.Proxy`'s app with uvicorn (:func:`auto.asgi.uvicorn_config`).
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Callable

import uvicorn

from auto.asgi import listen_socket, uvicorn_config
from auto.errors import ArgumentError
from auto.proxy.app import Proxy, ProxyConfig


SWITCH_INTERVAL_S = 0.0005
"""The interpreter's thread switch interval in a serving proxy process (Python's default is 5 ms):
the store writer and the ratchets' threads hold the GIL for at most this long before the event
loop may run, so background work adds at most about this much to a request's latency."""


def run(config: ProxyConfig, announce: Callable[[int], None] | None = None) -> None:
    """Serve in the foreground until interrupted (SIGINT/SIGTERM), then write what is queued;
    ``announce(port)`` is called once the address is bound (``port``: the one bound, the
    system's pick for ``config.port`` 0) and the proxy is built, just before serving.

    Raises:
        ListenError: the address cannot be listened on.
    """
    sock = listen_socket(config.host, config.port)
    try:
        sys.setswitchinterval(SWITCH_INTERVAL_S)
        proxy = Proxy(config)
        if announce is not None:
            announce(sock.getsockname()[1])
        try:
            uvicorn.Server(uvicorn_config(proxy.app, config.host, config.port)).run(sockets=[sock])
        finally:
            proxy.close()
    finally:
        sock.close()


class ProxyServer:
    """The proxy on a background thread (context manager).

    Attributes:
        proxy: the :class:`Proxy`; url: ``http://host:port``; base_url: ``url + "/v1"``.

    Raises:
        ArgumentError: the server did not start within 30 s (e.g. the port is taken).
    """

    def __init__(self, config: ProxyConfig) -> None:
        self.config = config
        self.proxy = Proxy(config)
        self._server = uvicorn.Server(uvicorn_config(self.proxy.app, config.host, config.port))
        self._thread: threading.Thread | None = None
        self.port = config.port

    @property
    def url(self) -> str:
        return f"http://{self.config.host}:{self.port}"

    @property
    def base_url(self) -> str:
        return self.url + "/v1"

    def start(self) -> "ProxyServer":
        self._thread = threading.Thread(target=self._server.run, name="auto-proxy", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise ArgumentError(f"the proxy did not start on {self.config.host}:{self.config.port}")
            time.sleep(0.01)
        self.port = self._server.servers[0].sockets[0].getsockname()[1]
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=30)
        self.proxy.close()

    def __enter__(self) -> "ProxyServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
