"""Signed artifacts under a trust policy: the loader refuses unsigned, mis-signed, untrusted and
altered artifacts with one line; the signature check needs ``cryptography`` only when it runs."""

from __future__ import annotations

import base64
import json
import sys

import pytest

from auto_runtime import Artifact, TrustPolicy
from auto_runtime.digest import digest_bytes
from auto_runtime.errors import UntrustedArtifact
from auto_runtime.signing import MISSING_LIBRARY, SIGNATURE_FORMAT, TRUST_ENV, key_id, parse_public_key, read_signatures

from .wasm_fixtures import build, echo_wat, manifest


@pytest.fixture(scope="module")
def wasm() -> bytes:
    return build(echo_wat("0.050000000"), manifest())


def _keypair():
    ed = pytest.importorskip("cryptography.hazmat.primitives.asymmetric.ed25519")
    from cryptography.hazmat.primitives import serialization

    key = ed.Ed25519PrivateKey.generate()
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return key, raw


def _record(key, raw: bytes, data: bytes) -> dict:
    return {"format": SIGNATURE_FORMAT, "algorithm": "ed25519", "artifact_id": digest_bytes(data),
            "key_id": key_id(raw), "public_key": base64.b64encode(raw).decode(),
            "signature": base64.b64encode(key.sign(data)).decode()}


def test_unsigned_is_refused_without_needing_cryptography(wasm, tmp_path):
    policy = TrustPolicy((b"\x01" * 32,))
    with pytest.raises(UntrustedArtifact, match="unsigned"):
        Artifact.load(wasm, trust=policy)
    p = tmp_path / "a.wasm"
    p.write_bytes(wasm)
    with pytest.raises(UntrustedArtifact, match="unsigned"):
        Artifact.load(p, trust=policy)
    assert Artifact.load(p).signed_by is None  # no policy: no check


def test_signed_trusted_loads_and_wrong_key_or_altered_bytes_are_refused(wasm, tmp_path):
    key, raw = _keypair()
    other, other_raw = _keypair()
    p = tmp_path / "a.wasm"
    p.write_bytes(wasm)
    (tmp_path / "a.wasm.sig").write_text(json.dumps([_record(key, raw, wasm)]))
    art = Artifact.load(p, trust=TrustPolicy((raw,)))
    assert art.signed_by == key_id(raw) and art.describe()["signed_by"] == key_id(raw)
    with pytest.raises(UntrustedArtifact, match="not a trusted key"):
        Artifact.load(p, trust=TrustPolicy((other_raw,)))
    # the same signature over altered bytes: another artifact id
    altered = bytearray(wasm)
    altered[-3] ^= 1
    q = tmp_path / "b.wasm"
    q.write_bytes(bytes(altered))
    (tmp_path / "b.wasm.sig").write_text(json.dumps([_record(key, raw, wasm)]))
    with pytest.raises(UntrustedArtifact, match="the signature is for"):
        Artifact.load(q, trust=TrustPolicy((raw,)))
    # a record rewritten to name the altered bytes no longer verifies
    forged = _record(key, raw, wasm)
    forged["artifact_id"] = digest_bytes(bytes(altered))
    with pytest.raises(UntrustedArtifact, match="does not match the bytes"):
        Artifact.load(bytes(altered), trust=TrustPolicy((raw,)), signatures=[forged])
    # a record that claims another key id
    bad = _record(other, other_raw, wasm)
    bad["key_id"] = key_id(raw)
    with pytest.raises(UntrustedArtifact, match="key_id does not name"):
        Artifact.load(wasm, trust=TrustPolicy((raw,)), signatures=[bad])


def test_key_files_and_environment(tmp_path, wasm):
    raw = bytes(range(32))
    line = tmp_path / "k.pub"
    line.write_text("ed25519:" + base64.b64encode(raw).decode() + "\n")
    assert parse_public_key(line.read_text()) == raw
    pol = TrustPolicy.from_env({TRUST_ENV: str(line)})
    assert pol is not None and pol.keys == (raw,)
    assert TrustPolicy.from_env({}) is None
    for text, msg in (("ed25519:!!", "base64"), ("ed25519:" + base64.b64encode(b"x").decode(), "32 bytes"),
                      ("hello", "expected a PEM")):
        with pytest.raises(UntrustedArtifact, match=msg):
            parse_public_key(text)
    with pytest.raises(UntrustedArtifact, match="cannot read"):
        TrustPolicy.from_files([tmp_path / "missing.pub"])
    (tmp_path / "x.sig").write_text("not json")
    with pytest.raises(UntrustedArtifact, match="not JSON"):
        read_signatures(tmp_path / "x.sig")
    assert read_signatures(tmp_path / "none.sig") == []


def test_missing_cryptography_is_one_clear_line(wasm, monkeypatch):
    monkeypatch.setitem(sys.modules, "cryptography", None)
    monkeypatch.setitem(sys.modules, "cryptography.hazmat.primitives.asymmetric", None)
    monkeypatch.setitem(sys.modules, "cryptography.hazmat.primitives.asymmetric.ed25519", None)
    rec = {"format": SIGNATURE_FORMAT, "algorithm": "ed25519", "artifact_id": digest_bytes(wasm),
           "key_id": key_id(b"\x02" * 32), "public_key": base64.b64encode(b"\x02" * 32).decode(),
           "signature": base64.b64encode(b"\x00" * 64).decode()}
    with pytest.raises(UntrustedArtifact) as e:
        Artifact.load(wasm, trust=TrustPolicy((b"\x02" * 32,)), signatures=[rec])
    assert str(e.value) == MISSING_LIBRARY
