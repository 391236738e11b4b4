"""Signed artifacts: ed25519 signatures over an artifact's exact bytes, and the trust policy the
loader enforces.

A *signature record* (JSON) says that one key signed one artifact::

    {"format": "auto.signature/1", "algorithm": "ed25519",
     "artifact_id": "sha256:<hex of the file's bytes>",
     "key_id": "ed25519:<first 16 hex digits of sha-256 of the 32-byte public key>",
     "public_key": "<base64 of the 32-byte raw public key>",
     "signature": "<base64 of the 64-byte signature>"}

The signed message is the artifact file, byte for byte (Ed25519 as specified in RFC 8032: the
message is hashed inside the algorithm, with SHA-512). A changed byte, including a manifest whose
digests were recomputed, gives another artifact id and a signature that no longer verifies.
Signatures travel beside the artifact: the file ``<artifact>.sig`` holds a JSON list of records
(:data:`SIDECAR_SUFFIX`; a registry keeps them the same way).

A :class:`TrustPolicy` is a set of trusted public keys. When the loader is given one
(``Artifact.load(..., trust=policy)``) it refuses, with :class:`~auto_runtime.errors.UntrustedArtifact`
and one line saying why, an artifact that has no signature record, whose records are for
other bytes or do not verify, or that is signed only by keys the policy does not trust.
``AUTO_TRUST_KEYS`` (:data:`TRUST_ENV`, public-key files separated by ``os.pathsep``) is the
setting deploy commands read (:meth:`TrustPolicy.from_env`).

Key files: a PEM ``PUBLIC KEY`` (SubjectPublicKeyInfo) or one line ``ed25519:<base64 of the 32
raw bytes>``. Verification uses the ``cryptography`` package (the ``signatures`` extra of
``auto-runtime``); it is imported only when a signature is checked, so a host that configures no
trust key needs only wasmtime and numpy, and one that does gets a clear error when the package
is missing.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from auto_runtime.digest import digest_bytes
from auto_runtime.errors import UntrustedArtifact

SIGNATURE_FORMAT = "auto.signature/1"
"""``format`` of a signature record."""

ALGORITHM = "ed25519"

SIDECAR_SUFFIX = ".sig"
"""The signatures of ``triage.wasm`` are in ``triage.wasm.sig`` (a JSON list of records)."""

TRUST_ENV = "AUTO_TRUST_KEYS"
"""Environment variable naming the trusted public-key files (``os.pathsep``-separated)."""

PUBLIC_KEY_BYTES = 32
SIGNATURE_BYTES = 64

MISSING_LIBRARY = ("verifying artifact signatures needs the 'cryptography' package "
                   "(pip install 'auto-runtime[signatures]')")


def _ed25519() -> Any:
    try:
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError:
        raise UntrustedArtifact(MISSING_LIBRARY) from None
    return ed25519


def key_id(public_key: bytes) -> str:
    """``"ed25519:<first 16 hex digits of sha-256(public_key)>"`` for a 32-byte raw public key."""
    return f"{ALGORITHM}:{hashlib.sha256(public_key).hexdigest()[:16]}"


def parse_public_key(text: str, where: str = "public key") -> bytes:
    """The 32 raw bytes of a public key given as PEM (``PUBLIC KEY``) or ``ed25519:<base64>``.

    Raises:
        UntrustedArtifact: the text is neither, or not an Ed25519 key (or ``cryptography`` is
            missing for a PEM key).
    """
    text = text.strip()
    if text.startswith(f"{ALGORITHM}:"):
        try:
            raw = base64.b64decode(text.split(":", 1)[1].strip(), validate=True)
        except (binascii.Error, ValueError):
            raise UntrustedArtifact(f"{where}: not base64 after 'ed25519:'") from None
        if len(raw) != PUBLIC_KEY_BYTES:
            raise UntrustedArtifact(f"{where}: an Ed25519 public key has 32 bytes, got {len(raw)}")
        return raw
    if "-----BEGIN PUBLIC KEY-----" in text:
        ed = _ed25519()
        from cryptography.hazmat.primitives import serialization

        try:
            key = serialization.load_pem_public_key(text.encode("ascii"))
        except (ValueError, TypeError, UnicodeEncodeError) as e:
            raise UntrustedArtifact(f"{where}: not a readable PEM public key ({e})") from None
        if not isinstance(key, ed.Ed25519PublicKey):
            raise UntrustedArtifact(f"{where}: not an Ed25519 public key")
        return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    raise UntrustedArtifact(f"{where}: expected a PEM PUBLIC KEY or a line 'ed25519:<base64>'")


def read_signatures(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The signature records in a sidecar file (``[]`` when the file does not exist).

    Raises:
        UntrustedArtifact: the file exists but is not a JSON list (or object) of records.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as e:
        raise UntrustedArtifact(f"{p}: cannot read the signatures: {e}") from None
    try:
        obj = json.loads(text)
    except ValueError:
        raise UntrustedArtifact(f"{p}: the signatures are not JSON") from None
    if isinstance(obj, dict):
        obj = [obj]
    if not isinstance(obj, list) or not all(isinstance(r, dict) for r in obj):
        raise UntrustedArtifact(f"{p}: expected a JSON list of signature records")
    return obj


def sidecar_path(artifact_path: str | os.PathLike) -> Path:
    """Where the signatures of the artifact file at ``artifact_path`` are kept."""
    return Path(str(artifact_path) + SIDECAR_SUFFIX)


def check_record(record: Any, data: bytes, artifact_id: str | None = None) -> str:
    """Check one signature record against the artifact bytes ``data``; returns its key id.

    Raises:
        UntrustedArtifact: the record is malformed, names other bytes, or does not verify.
    """
    if not isinstance(record, dict) or record.get("format") != SIGNATURE_FORMAT:
        raise UntrustedArtifact(f"not a {SIGNATURE_FORMAT} signature record")
    if record.get("algorithm") != ALGORITHM:
        raise UntrustedArtifact(f"unsupported signature algorithm {record.get('algorithm')!r}")
    aid = artifact_id or digest_bytes(data)
    if record.get("artifact_id") != aid:
        raise UntrustedArtifact(f"the signature is for {record.get('artifact_id')}, these bytes are {aid}")
    try:
        pub = base64.b64decode(str(record.get("public_key")), validate=True)
        sig = base64.b64decode(str(record.get("signature")), validate=True)
    except (binascii.Error, ValueError):
        raise UntrustedArtifact("the signature record's key or signature is not base64") from None
    if len(pub) != PUBLIC_KEY_BYTES or len(sig) != SIGNATURE_BYTES:
        raise UntrustedArtifact("the signature record's key or signature has the wrong length")
    if record.get("key_id") != key_id(pub):
        raise UntrustedArtifact("the signature record's key_id does not name its public key")
    ed = _ed25519()
    from cryptography.exceptions import InvalidSignature

    try:
        ed.Ed25519PublicKey.from_public_bytes(pub).verify(sig, data)
    except InvalidSignature:
        raise UntrustedArtifact(f"the signature by {record['key_id']} does not match the bytes "
                                "(altered after signing)") from None
    return str(record["key_id"])


@dataclass(frozen=True)
class TrustPolicy:
    """The public keys an artifact must be signed by (any one of them).

    Attributes:
        keys: the trusted 32-byte raw Ed25519 public keys.
        sources: where each key was read from (for messages).
    """

    keys: tuple[bytes, ...]
    sources: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.keys:
            raise UntrustedArtifact("a trust policy needs at least one public key")
        for k in self.keys:
            if len(k) != PUBLIC_KEY_BYTES:
                raise UntrustedArtifact(f"an Ed25519 public key has 32 bytes, got {len(k)}")

    @classmethod
    def from_files(cls, paths: Iterable[str | os.PathLike]) -> "TrustPolicy":
        """The policy trusting the public keys in ``paths`` (see the module docstring).

        Raises:
            UntrustedArtifact: a file cannot be read or holds no Ed25519 public key.
        """
        keys, sources = [], []
        for p in paths:
            try:
                text = Path(p).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as e:
                raise UntrustedArtifact(f"trust key {p}: cannot read it: {getattr(e, 'strerror', None) or e}") from None
            keys.append(parse_public_key(text, f"trust key {p}"))
            sources.append(str(p))
        return cls(tuple(keys), tuple(sources))

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> "TrustPolicy | None":
        """The policy named by ``AUTO_TRUST_KEYS``, or None when it is unset or empty.

        Raises:
            UntrustedArtifact: a named file cannot be used.
        """
        value = (os.environ if environ is None else environ).get(TRUST_ENV, "")
        paths = [p for p in value.split(os.pathsep) if p.strip()]
        return cls.from_files(paths) if paths else None

    @property
    def key_ids(self) -> list[str]:
        """The trusted keys' ids."""
        return [key_id(k) for k in self.keys]

    def verify(self, data: bytes, signatures: Iterable[Any], where: str = "artifact") -> str:
        """The id of a trusted key whose signature verifies over ``data``.

        Raises:
            UntrustedArtifact: one line: unsigned; every record fails (the first reason); or
                valid signatures only by untrusted keys.
        """
        records = list(signatures or [])
        if not records:
            raise UntrustedArtifact(f"{where}: refused: unsigned (a trust key is configured: "
                                    f"{', '.join(self.key_ids)})")
        aid = digest_bytes(data)
        trusted = set(self.key_ids)
        failures: list[str] = []
        signed_by: list[str] = []
        for r in records:
            try:
                kid = check_record(r, data, aid)
            except UntrustedArtifact as e:
                if str(e) == MISSING_LIBRARY:
                    raise
                failures.append(str(e))
                continue
            if kid in trusted:
                return kid
            signed_by.append(kid)
        if signed_by:
            raise UntrustedArtifact(f"{where}: refused: signed by {', '.join(signed_by)}, which is not a trusted key "
                                    f"(trusted: {', '.join(self.key_ids)})")
        raise UntrustedArtifact(f"{where}: refused: {failures[0]}")
