"""Canonical JSON and content digests: the identity of everything Auto stores.

Both are the runtime's (the artifact contract is defined once, in ``auto_runtime``): canonical
JSON is :func:`auto_runtime.jsonio.canonical_text` (``json.dumps(obj, sort_keys=True,
separators=(",", ":"), ensure_ascii=False, allow_nan=False)``, UTF-8), a digest is
:func:`auto_runtime.digest.digest_bytes` (``"sha256:" + hexdigest``) of those bytes. This module
only maps the encoder's ``RecursionError`` (a structure nested too deeply, or circular) to the
``ValueError`` the compiler's callers handle.
"""

from __future__ import annotations

from typing import Any

from auto_runtime.digest import digest_bytes
from auto_runtime.jsonio import canonical_text


def canonical_json(obj: Any) -> str:
    """Return the canonical JSON text of ``obj``.

    Raises:
        ValueError: ``obj`` holds NaN or infinity, or is nested too deeply or circular.
        TypeError: ``obj`` holds a value JSON cannot represent.
    """
    try:
        return canonical_text(obj)
    except RecursionError:
        raise ValueError("the value is nested too deeply or is circular") from None


def canonical_bytes(obj: Any) -> bytes:
    """UTF-8 bytes of :func:`canonical_json` (raises as it does)."""
    return canonical_json(obj).encode("utf-8")


def digest(obj: Any) -> str:
    """``sha256:<hex>`` of the canonical JSON of ``obj`` (raises as :func:`canonical_json`)."""
    return digest_bytes(canonical_bytes(obj))


__all__ = ["canonical_bytes", "canonical_json", "digest", "digest_bytes"]
