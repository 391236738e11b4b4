"""Canonical JSON and content digests: the identity of everything Auto stores.

Canonical JSON = ``json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)``
encoded as UTF-8; floats must be finite (NaN/Infinity are rejected, they are not JSON).
A digest is ``"sha256:" + hexdigest`` of those bytes.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(obj: Any) -> str:
    """Return the canonical JSON text of ``obj``.

    Raises:
        ValueError: ``obj`` holds NaN or infinity.
        TypeError: ``obj`` holds a value JSON cannot represent.
    """
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def canonical_bytes(obj: Any) -> bytes:
    """UTF-8 bytes of :func:`canonical_json`."""
    return canonical_json(obj).encode("utf-8")


def digest(obj: Any) -> str:
    """``sha256:<hex>`` of the canonical JSON of ``obj``."""
    return "sha256:" + hashlib.sha256(canonical_bytes(obj)).hexdigest()


def digest_bytes(data: bytes) -> str:
    """``sha256:<hex>`` of raw bytes (artifact ids)."""
    return "sha256:" + hashlib.sha256(data).hexdigest()
