"""Serving an ASGI app with uvicorn, as ``auto proxy`` and ``auto serve`` both do.

:func:`uvicorn_config` picks the ``uvloop`` event loop and the ``httptools`` HTTP parser when they
are installed (else asyncio and h11), no access log, warnings only.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import uvicorn


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
