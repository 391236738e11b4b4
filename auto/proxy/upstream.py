"""The upstream: where the proxy forwards what it does not answer (aiohttp client, one connection pool).

Forwarding keeps the request as the client sent it: method, path below the upstream's base URL,
query string, body bytes and headers, credentials included (they are forwarded, never stored),
except the hop-by-hop headers of RFC 9110 §7.6.1 (``Connection``, ``Keep-Alive``, ``TE``,
``Transfer-Encoding``, ``Upgrade``, ``Proxy-*``) and ``Host``/``Content-Length`` (set for the new
connection). The response comes back as the upstream sent it: status, headers (the same
hop-by-hop ones dropped) and body bytes unchanged, compressed or not (the client library
decodes it, as it would without the proxy), passed through chunk by chunk as they arrive.

Paths: a client configured with ``base_url = http://<proxy>/v1`` asks for ``/v1/chat/completions``;
the proxy strips the leading ``/v1`` and appends the rest to the upstream base URL (which
normally ends in ``/v1`` itself). A path without ``/v1`` is appended as it is.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from typing import Any, Mapping

import aiohttp
from yarl import URL

from auto.errors import ArgumentError

HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection",
                        "te", "trailer", "trailers", "transfer-encoding", "upgrade", "host", "content-length"})
"""Headers never forwarded (either way)."""

DEFAULT_TIMEOUT_S = 600.0
"""A forwarded request (until its whole response arrived) may take this long (model calls are slow)."""

DEFAULT_CONNECT_TIMEOUT_S = 10.0
"""Connecting to the upstream may take this long."""


def forwardable(headers: Mapping[str, str] | Any) -> list[tuple[str, str]]:
    """``headers`` without the hop-by-hop ones (order and repeats kept)."""
    items = headers.items() if hasattr(headers, "items") else headers
    return [(k, v) for k, v in items if k.lower() not in HOP_BY_HOP]


class Upstream:
    """The upstream endpoint (an OpenAI-compatible base URL, e.g. ``https://api.openai.com/v1``).

    Args:
        base_url: the upstream base URL (``http`` or ``https``).
        timeout_s, connect_timeout_s: limits of one forwarded request (s).

    Raises:
        ArgumentError: the URL is not an absolute http(s) URL.
    """

    def __init__(self, base_url: str, *, timeout_s: float = DEFAULT_TIMEOUT_S,
                 connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S) -> None:
        url = URL(base_url.rstrip("/"))
        if url.scheme not in ("http", "https") or not url.host:
            raise ArgumentError(f"--upstream must be an http(s) URL such as https://api.openai.com/v1, got {base_url!r}")
        self.base = url
        self.timeout = aiohttp.ClientTimeout(total=timeout_s, sock_connect=connect_timeout_s)
        self.timeout_s = timeout_s
        self._session: aiohttp.ClientSession | None = None

    def url_for(self, path: str, query: str = "") -> URL:
        """The upstream URL of a client path (see the module docstring)."""
        rest = path[3:] if path == "/v1" or path.startswith("/v1/") else path
        url = URL(str(self.base) + rest, encoded=False)
        return url.with_query(query) if query else url

    async def start(self) -> None:
        """Open the connection pool (on the serving event loop)."""
        if self._session is None:
            self._session = aiohttp.ClientSession(
                timeout=self.timeout, auto_decompress=False,
                connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=300, enable_cleanup_closed=True))

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def send(self, method: str, path: str, query: str, headers: Any, body: bytes) -> aiohttp.ClientResponse:
        """Send one request; returns the response with its body not read yet.

        Raises:
            aiohttp.ClientError: connecting or sending failed; asyncio.TimeoutError: too slow.
        """
        assert self._session is not None, "Upstream.start() was not awaited"
        return await self._session.request(
            method, self.url_for(path, query), data=body if body else None, headers=forwardable(headers),
            skip_auto_headers=("User-Agent", "Accept-Encoding", "Accept", "Content-Type"), allow_redirects=False)

    def post_json_sync(self, path: str, data: bytes, headers: Mapping[str, str]) -> tuple[int, str, dict[str, str], bytes]:
        """POST a JSON body (``data``) and read the whole response, blocking (used off the event loop: the
        shadow audit re-asks a tier-1 answer from its own thread).

        Returns:
            ``(status, reason, response headers, body bytes)``.

        Raises:
            OSError: the upstream cannot be reached (``urllib.error.URLError``).
        """
        hdrs = {k: v for k, v in forwardable(headers)}
        hdrs["Content-Type"] = "application/json"
        req = urllib.request.Request(str(self.url_for(path)), data=data, headers=hdrs, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                return resp.status, resp.reason, {k.lower(): v for k, v in resp.headers.items()}, resp.read()
        except urllib.error.HTTPError as e:
            return e.code, str(e.reason), {k.lower(): v for k, v in e.headers.items()}, e.read()
