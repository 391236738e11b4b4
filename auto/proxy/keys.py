"""Who may get a tier-1 answer from ``auto proxy``: the callers whose key the upstream would accept.

A tier-1 answer replaces an upstream call, so it must require what the upstream requires. A
request's *key* is the token of its ``Authorization: Bearer <token>`` header, else the value of
its ``api-key`` header (Azure OpenAI), else none. A request is *admitted* to tier-1 when its key

* is one of the operator's client keys (``auto proxy --client-key``), or
* was accepted by the upstream within the last ``ttl_s`` seconds: a forwarded model call carrying
  it answered 2xx (:meth:`KeyGate.saw`). A 401 or 403 for a key forgets it at once, so a revoked
  key stops being answered as soon as the upstream refuses one of its calls.

A request with no key, or a key neither listed nor recently accepted, is never answered at
tier-1: it is forwarded and the upstream decides (and a 2xx then admits its key).

Keys are held only as digests: HMAC-SHA-256 under a random salt made at start (RFC 2104), so
neither a listed key nor an accepted one is kept in memory or written anywhere in clear, and the
digests of one process cannot be matched against another's.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import threading
import time
from collections import OrderedDict
from typing import Any, Iterable

DEFAULT_KEY_TTL_S = 300.0
"""How long a key the upstream accepted stays admitted without another accepted call (s). A
revoked key is refused by the upstream on its next forwarded call; this bounds how long tier-1
answers may outlive a revocation when every call of that key is answered at tier-1."""

MAX_ACCEPTED = 100_000
"""At most this many accepted keys are remembered (the oldest is forgotten first)."""


def request_key(headers: Any) -> str | None:
    """The key of a request (see the module docstring), or None.

    Args:
        headers: a mapping with case-insensitive ``get`` (Starlette's headers) or a plain dict.
    """
    get = headers.get
    auth = get("authorization") or get("Authorization")
    if auth:
        scheme, _, token = str(auth).strip().partition(" ")
        token = token.strip()
        if scheme.lower() == "bearer" and token:
            return token
        return str(auth).strip() or None
    api = get("api-key") or get("Api-Key")
    return (str(api).strip() or None) if api else None


class KeyGate:
    """The admitted keys of one proxy (see the module docstring). Thread-safe.

    Args:
        client_keys: keys always admitted (the operator's list).
        ttl_s: how long an upstream-accepted key stays admitted (s); 0: only ``client_keys``.
        clock: a monotonic clock in seconds (tests).
    """

    def __init__(self, client_keys: Iterable[str] = (), ttl_s: float = DEFAULT_KEY_TTL_S,
                 clock: Any = time.monotonic) -> None:
        self._salt = os.urandom(32)
        self.ttl_s = float(ttl_s)
        self._clock = clock
        self._listed = frozenset(self._digest(k) for k in client_keys if k)
        self._accepted: OrderedDict[bytes, float] = OrderedDict()
        self._lock = threading.Lock()

    def _digest(self, key: str) -> bytes:
        return hmac.new(self._salt, key.encode("utf-8", "surrogatepass"), hashlib.sha256).digest()

    def admits(self, key: str | None) -> bool:
        """Whether a request carrying ``key`` may be answered at tier-1."""
        if not key:
            return False
        d = self._digest(key)
        if d in self._listed:
            return True
        with self._lock:
            expiry = self._accepted.get(d)
            if expiry is None:
                return False
            if self._clock() >= expiry:
                del self._accepted[d]
                return False
        return True

    def saw(self, key: str | None, status: int) -> None:
        """The upstream answered ``status`` to a forwarded model call carrying ``key``: a 2xx
        admits the key for :attr:`ttl_s` seconds, a 401/403 forgets it."""
        if not key:
            return
        d = self._digest(key)
        with self._lock:
            if 200 <= status < 300 and self.ttl_s > 0:
                self._accepted[d] = self._clock() + self.ttl_s
                self._accepted.move_to_end(d)
                while len(self._accepted) > MAX_ACCEPTED:
                    self._accepted.popitem(last=False)
            elif status in (401, 403):
                self._accepted.pop(d, None)

    def digests(self) -> list[bytes]:
        """Every digest held (tests: no key is held in clear)."""
        with self._lock:
            return [*self._listed, *self._accepted]
