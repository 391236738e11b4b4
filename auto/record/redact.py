"""Redaction: what of a model call's credentials never reaches the store.

* Headers whose name contains ``authorization``, ``api-key``/``api_key`` or ``cookie`` are dropped
  (:func:`sanitize_headers`).
* The values of those request headers (and the bearer token inside ``Bearer <token>``) and the
  client's ``api_key`` are the call's *secrets* (:func:`secrets_of`); :func:`scrub` replaces each
  occurrence of one, anywhere in a span (keys included), by ``[REDACTED]``. Secrets shorter than
  6 characters are not scrubbed (they would redact ordinary text).
"""

from __future__ import annotations

import marshal
import re
from typing import Any

REDACTED = "[REDACTED]"
SECRET_HEADER = re.compile(r"authorization|api-key|api_key|cookie", re.I)
"""Header names that carry credentials."""

MIN_SECRET_LEN = 6
"""Shorter secret values are not scrubbed."""


def sanitize_headers(headers: Any) -> dict[str, str]:
    """Headers (a mapping or ``(name, value)`` pairs) as a lower-cased dict without any whose
    name carries credentials (:data:`SECRET_HEADER`)."""
    out: dict[str, str] = {}
    items = headers.items() if hasattr(headers, "items") else headers
    for k, v in items:
        k = str(k).lower()
        if SECRET_HEADER.search(k):
            continue
        out[k] = str(v)
    return out


def secrets_of(request: Any, client: Any) -> list[str]:
    """The secrets of one HTTP request (an ``httpx`` request) sent by ``client`` (an ``openai``
    client): longest first, so a token is scrubbed before a prefix of it."""
    found: list[str] = []
    for k, v in request.headers.items():
        if SECRET_HEADER.search(k) and v:
            v = str(v)
            found.append(v)
            if " " in v:
                found.append(v.split(" ", 1)[1].strip())
    key = getattr(client, "__dict__", {}).get("api_key")
    if isinstance(key, str) and key:
        found.append(key)
    return sorted({s for s in found if len(s) >= MIN_SECRET_LEN}, key=len, reverse=True)


def scrub(obj: Any, secrets: list[str]) -> Any:
    """``obj`` (a JSON value) with every occurrence of each secret in its strings replaced by
    ``[REDACTED]``.

    Fast path: ``marshal`` writes every string of a JSON value (keys included) as its UTF-8 bytes,
    so when no secret's UTF-8 bytes occur in ``marshal.dumps(obj)`` — the usual case, one C pass
    — no string contains a secret and ``obj`` is returned as it is, without walking it."""
    if not secrets:
        return obj
    if isinstance(obj, (dict, list)):
        try:
            blob = marshal.dumps(obj)
        except ValueError:  # not plain data: walk it
            blob = None
        if blob is not None and not any(s.encode("utf-8", "surrogatepass") in blob for s in secrets):
            return obj
    return _scrub(obj, secrets)


def _scrub(obj: Any, secrets: list[str]) -> Any:
    if isinstance(obj, str):
        for s in secrets:
            if s in obj:
                obj = obj.replace(s, REDACTED)
        return obj
    if isinstance(obj, list):
        return [_scrub(v, secrets) for v in obj]
    if isinstance(obj, dict):
        return {_scrub(k, secrets): _scrub(v, secrets) for k, v in obj.items()}
    return obj
