"""Content digests of the artifact contract: ``"sha256:" + hexdigest`` (SHA-256, FIPS 180-4).

- the artifact id: of the whole ``.wasm`` file (kept outside it);
- ``model.code_digest``: of the code, every byte before the ``auto.manifest`` section;
- ``manifest_digest``: of the canonical JSON of the manifest without that key
  (:func:`auto_runtime.manifest.manifest_digest`).
"""

from __future__ import annotations

import hashlib

PREFIX = "sha256:"


def digest_bytes(data: bytes | bytearray | memoryview) -> str:
    """``"sha256:"`` + the lowercase hex SHA-256 of ``data`` (71 characters)."""
    return PREFIX + hashlib.sha256(data).hexdigest()
