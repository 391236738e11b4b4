"""Serving an ASGI app with uvicorn, as ``auto proxy`` and ``auto serve`` both do.

:func:`uvicorn_config` picks the ``uvloop`` event loop and the ``httptools`` HTTP parser when they
are installed (else asyncio and h11), no access log, warnings only. :func:`listen_socket` binds the
address before the server starts, so a command can announce the port it got (``--port 0``).
"""

from __future__ import annotations

import importlib.util
import socket
from typing import Any

import uvicorn

from auto.errors import ListenError


def loop_and_parser() -> tuple[str, str]:
    """``(loop, http)`` uvicorn settings: the fastest installed."""
    loop = "uvloop" if importlib.util.find_spec("uvloop") else "asyncio"
    http = "httptools" if importlib.util.find_spec("httptools") else "h11"
    return loop, http


def uvicorn_config(app: Any, host: str, port: int, **extra: Any) -> uvicorn.Config:
    """A quiet uvicorn configuration of ``app`` (an ASGI app, or an import string with
    ``factory=True``) on ``host:port``."""
    loop, http = loop_and_parser()
    return uvicorn.Config(app, host=host, port=port, loop=loop, http=http, log_level="warning", access_log=False,
                          lifespan="on", **extra)


def check_listen(host: str, port: int) -> None:
    """Bind ``host:port`` once and let it go, as uvicorn will bind it (``SO_REUSEADDR``), so a
    busy or forbidden address is one line before anything starts.

    Raises:
        ListenError: the address cannot be bound (the operating system's reason).
    """
    listen_socket(host, port).close()


def listen_socket(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` (``SO_REUSEADDR``, as uvicorn binds), for
    ``uvicorn.Server.run(sockets=[sock])``; with ``port`` 0 the system picks a free port, which
    ``sock.getsockname()[1]`` gives.

    Raises:
        ListenError: the address cannot be bound (the operating system's reason).
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        raise ListenError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
    family, kind, proto, _, addr = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(addr)
    except OSError as e:
        sock.close()
        raise ListenError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
    sock.set_inheritable(True)
    return sock
