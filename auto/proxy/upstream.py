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
normally ends in ``/v1`` itself). A path without ``/v1`` is appended as it is. A path with a
``.`` or ``..`` segment, a backslash or a NUL — after percent-decoding, as often as it decodes
(``/v1/../admin``, ``/v1/%2e%2e/admin``, ``/v1/models/..%2f..%2fadmin``, ``%252e%252e``) — is
refused (:class:`PathRefused`) rather than resolved: a request never reaches a path outside the
upstream's base path. The rest is appended as a path (``?`` and ``#`` in it stay in the path,
percent-encoded), so the URL the upstream gets is always ``<base path><rest>``.

The upstream URL may carry a user and password (``http://svc:PW@host/v1``): they are sent as
HTTP Basic credentials (RFC 7617) on requests that carry no ``Authorization`` of their own (a
client's own ``Authorization`` is forwarded as it is), and the password is shown only as :attr:`Upstream.label` (the password replaced by ``***``) in logs, responses and
records.
"""

from __future__ import annotations

import base64
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Mapping

import aiohttp
from yarl import URL

from auto.errors import ArgumentError, AutoError

HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection",
                        "te", "trailer", "trailers", "transfer-encoding", "upgrade", "host", "content-length"})
"""Headers never forwarded (either way)."""

DEFAULT_TIMEOUT_S = 600.0
"""A forwarded request (until its whole response arrived) may take this long (model calls are slow)."""

DEFAULT_CONNECT_TIMEOUT_S = 10.0
"""Connecting to the upstream may take this long."""


MASK = "***"

URL_CACHE = 1024
"""How many ``(path, query)`` pairs :meth:`Upstream.url_for` remembers (then it forgets them all)."""


class PathRefused(AutoError):
    """A request path that would leave the upstream's base path (answered ``400``)."""


def mask_url(url: URL | str) -> str:
    """``url`` with its password replaced by :data:`MASK` (unchanged without one)."""
    u = URL(str(url)) if not isinstance(url, URL) else url
    return str(u.with_password(MASK)) if u.password else str(u)


def _decoded_forms(segment: str) -> list[str]:
    out = [segment]
    for _ in range(4):  # %25 nesting deeper than this is refused below
        nxt = urllib.parse.unquote(out[-1])
        if nxt == out[-1]:
            return out
        out.append(nxt)
    out.append("%")  # still decoding after 4 rounds: treat as refused
    return out


def safe_rest(path: str) -> str:
    """``path`` (already percent-decoded once, as the ASGI server gives it) checked as a path
    below the upstream's base path (see the module docstring).

    Raises:
        PathRefused: a ``.``/``..`` segment, a backslash or a NUL in any decoded form.
    """
    for seg in path.split("/"):
        for form in _decoded_forms(seg):
            if form == "%" or "\\" in form or "\x00" in form or any(p in (".", "..") for p in form.split("/")):
                raise PathRefused(f"auto proxy: the path {path[:200]!r} leaves the upstream's base path; refused")
    return path


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
        self.label = mask_url(url)
        """The base URL as shown anywhere (its password masked)."""
        self.timeout = aiohttp.ClientTimeout(total=timeout_s, sock_connect=connect_timeout_s)
        self.timeout_s = timeout_s
        self._session: aiohttp.ClientSession | None = None
        self._urls: dict[tuple[str, str], URL] = {}  # (path, query) -> url_for's answer

    def url_for(self, path: str, query: str = "") -> URL:
        """The upstream URL of a client path (see the module docstring); remembered per path
        and query (at most :data:`URL_CACHE` of them, then forgotten at once): a forwarded call
        asks for its URL more than once, and clients ask for the same few paths (working one out
        costs tens of µs of ``yarl``).

        Raises:
            PathRefused: the path would leave the base path (never remembered).
        """
        key = (path, query)
        url = self._urls.get(key)
        if url is not None:
            return url
        rest = safe_rest(path[3:] if path == "/v1" or path.startswith("/v1/") else path)
        if rest and not rest.startswith("/"):
            rest = "/" + rest
        url = self.base.with_path(self.base.path.rstrip("/") + rest)
        if query:
            url = url.with_query(query)
        if len(self._urls) >= URL_CACHE:
            self._urls.clear()
        self._urls[key] = url
        return url

    def _target(self, url: URL, headers: list[tuple[str, str]]) -> tuple[URL, list[tuple[str, str]]]:
        """The URL without user info, and the headers with the base URL's Basic credentials
        added when they carry no ``Authorization`` (see the module docstring)."""
        if url.user is None and url.password is None:
            return url, headers
        bare = url.with_user(None)
        if any(k.lower() == "authorization" for k, _ in headers):
            return bare, headers
        basic = "Basic " + base64.b64encode(f"{url.user or ''}:{url.password or ''}".encode("utf-8")).decode("ascii")
        return bare, [*headers, ("Authorization", basic)]

    def scrub(self, text: str) -> str:
        """``text`` with the base URL's password (also percent-encoded) replaced by ``***``."""
        pw = self.base.password
        if pw:
            for form in {pw, self.base.raw_password or pw, urllib.parse.quote(pw, safe="")}:
                text = text.replace(form, MASK)
        return text

    def label_for(self, path: str) -> str:
        """:meth:`url_for` as shown anywhere (its password masked)."""
        return mask_url(self.url_for(path))

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
        url, hdrs = self._target(self.url_for(path, query), forwardable(headers))
        return await self._session.request(
            method, url, data=body if body else None, headers=hdrs,
            skip_auto_headers=("User-Agent", "Accept-Encoding", "Accept", "Content-Type"), allow_redirects=False)

    def post_json_sync(self, path: str, data: bytes, headers: Mapping[str, str]) -> tuple[int, str, dict[str, str], bytes]:
        """POST a JSON body (``data``) and read the whole response, blocking (used off the event loop: the
        shadow audit re-asks a tier-1 answer from its own thread).

        Returns:
            ``(status, reason, response headers, body bytes)``.

        Raises:
            OSError: the upstream cannot be reached (``urllib.error.URLError``).
        """
        url, pairs = self._target(self.url_for(path), forwardable(headers))
        hdrs = {k: v for k, v in pairs}
        hdrs["Content-Type"] = "application/json"
        req = urllib.request.Request(str(url), data=data, headers=hdrs, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                return resp.status, resp.reason, {k.lower(): v for k, v in resp.headers.items()}, resp.read()
        except urllib.error.HTTPError as e:
            return e.code, str(e.reason), {k.lower(): v for k, v in e.headers.items()}, e.read()
