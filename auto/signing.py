"""Signing artifacts: Ed25519 key pairs and signature records (the verifying side, the record
format and the trust policy belong to the runtime: :mod:`auto_runtime.signing`).

Keys are made and used with the ``cryptography`` package (pyca/cryptography, Ed25519 as in
RFC 8032). Files:

* private key: PEM ``PRIVATE KEY`` (PKCS #8, unencrypted), written with mode ``0600``; keep it on
  the machine that signs;
* public key: PEM ``PUBLIC KEY`` (SubjectPublicKeyInfo): give it to deploy hosts as their trust
  key (``--trust-key`` or ``AUTO_TRUST_KEYS``).

A signature is over the artifact file's exact bytes; see :mod:`auto_runtime.signing` for the
record.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

from auto_runtime.digest import digest_bytes
from auto_runtime.signing import ALGORITHM, SIGNATURE_FORMAT, key_id

from auto.errors import ArgumentError

try:  # an auto dependency; imported here so a broken install names itself once
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519
except ImportError:  # pragma: no cover - cryptography is an install requirement of auto
    serialization = ed25519 = None  # type: ignore[assignment]


def _need() -> None:
    if ed25519 is None:  # pragma: no cover
        raise ArgumentError("signing needs the 'cryptography' package (pip install cryptography)")


def generate_keypair(prefix: str | os.PathLike) -> tuple[Path, Path, str]:
    """Write a new key pair: ``<prefix>.key`` (private, mode 0600) and ``<prefix>.pub``.

    Returns:
        ``(private key path, public key path, key id)``.

    Raises:
        ArgumentError: either file exists already (nothing is overwritten).
    """
    _need()
    priv_path, pub_path = Path(f"{prefix}.key"), Path(f"{prefix}.pub")
    for p in (priv_path, pub_path):
        if p.exists():
            raise ArgumentError(f"{p} exists; refusing to overwrite a key")
    key = ed25519.Ed25519PrivateKey.generate()
    priv = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())
    pub = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    priv_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(priv_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(priv)
    pub_path.write_bytes(pub)
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return priv_path, pub_path, key_id(raw)


def load_private_key(path: str | os.PathLike) -> Any:
    """The Ed25519 private key in a PEM file.

    Raises:
        ArgumentError: the file cannot be read or is not an unencrypted Ed25519 private key.
    """
    _need()
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise ArgumentError(f"signing key {path}: cannot read it: {e.strerror or e}") from None
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as e:
        raise ArgumentError(f"signing key {path}: not an unencrypted PEM private key ({e})") from None
    if not isinstance(key, ed25519.Ed25519PrivateKey):
        raise ArgumentError(f"signing key {path}: not an Ed25519 key")
    return key


def sign(data: bytes, key: Any) -> dict[str, Any]:
    """The signature record of ``key`` over the artifact bytes ``data`` (see
    :mod:`auto_runtime.signing`)."""
    _need()
    pub = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return {"format": SIGNATURE_FORMAT, "algorithm": ALGORITHM, "artifact_id": digest_bytes(data),
            "key_id": key_id(pub), "public_key": base64.b64encode(pub).decode("ascii"),
            "signature": base64.b64encode(key.sign(bytes(data))).decode("ascii")}
