"""The artifact registry and signatures: keygen, add/sign/get/list/verify, and the trust setting of
``auto run`` (refuses unsigned, mis-signed, wrong-key and tampered artifacts with one line)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from auto.errors import ArgumentError
from auto.registry import Registry
from auto.signing import generate_keypair, load_private_key, sign
from auto_runtime import Artifact, TrustPolicy
from auto_runtime.errors import UntrustedArtifact

from site_fixtures import compiled_site, site_words, ticket_call

AUTO = [sys.executable, "-m", "auto.cli"]


def auto(*args: str, code: int = 0, env: dict | None = None) -> subprocess.CompletedProcess:
    p = subprocess.run([*AUTO, *args], capture_output=True, text=True, timeout=300,
                       env={**os.environ, **(env or {})})
    assert p.returncode == code, (p.returncode, p.stdout[-1500:], p.stderr[-1500:])
    return p


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    folder = tmp_path_factory.mktemp("site")
    path, sid, out = compiled_site(folder)
    inp = {}
    from auto.sites import Site

    inp = Site.from_manifest(out.manifest["site"]).extract(ticket_call(site_words()[0], "x")["input"])
    return out.artifact_path, out, inp


def test_keys_registry_and_trust_in_process(site, tmp_path):
    wasm_path, out, _ = site
    priv, pub, kid = generate_keypair(tmp_path / "k")
    assert oct(priv.stat().st_mode & 0o777) == "0o600"
    with pytest.raises(ArgumentError, match="exists"):
        generate_keypair(tmp_path / "k")
    key = load_private_key(priv)
    reg = Registry(tmp_path / "reg")
    aid = reg.add(out.wasm, key=key)
    assert aid == out.artifact_id and reg.add(out.wasm, key=key) == aid  # idempotent
    assert len(reg.signatures(aid)) == 1
    assert reg.resolve(aid[7:15]) == aid
    with pytest.raises(ArgumentError):
        reg.resolve("zz")
    with pytest.raises(ArgumentError, match="not an artifact"):
        reg.add(b"\x00asm\x01\x00\x00\x00")
    [e] = reg.entries()
    assert e.task == out.manifest["task"] and e.signatures == [kid]
    trust = TrustPolicy.from_files([pub])
    art = Artifact.load(reg.path(aid), trust=trust)
    assert art.signed_by == kid
    assert all(r["ok"] for r in reg.verify(trust))
    # a second key's policy refuses; an unsigned copy is refused
    _, pub2, _ = generate_keypair(tmp_path / "k2")
    with pytest.raises(UntrustedArtifact, match="not a trusted key"):
        Artifact.load(reg.path(aid), trust=TrustPolicy.from_files([pub2]))
    rows = reg.verify(TrustPolicy.from_files([pub2]))
    assert not rows[0]["ok"] and "not a trusted key" in rows[0]["reason"]
    # a tampered file in the registry: its name no longer matches, its signature no longer verifies
    p = reg.path(aid)
    data = bytearray(p.read_bytes())
    data[-10] ^= 0xFF
    p.write_bytes(bytes(data))
    row = reg.verify(trust)[0]
    assert not row["ok"] and not row["content_ok"] and not row["signatures"][0]["ok"]
    with pytest.raises(UntrustedArtifact):
        Artifact.load(p, trust=trust)
    # a signature over other bytes is not accepted into the registry
    reg2 = Registry(tmp_path / "reg2")
    aid2 = reg2.add(out.wasm)
    with pytest.raises(ArgumentError, match="does not verify"):
        reg2.add_signature(aid2, {**sign(out.wasm, key), "signature": sign(b"other", key)["signature"]})


def test_cli_registry_and_run_under_a_trust_key(site, tmp_path):
    wasm_path, out, inp = site
    keys = json.loads(auto("registry", "keygen", "--out", str(tmp_path / "a")).stdout)
    auto("registry", "keygen", "--out", str(tmp_path / "b"))
    reg = str(tmp_path / "reg")
    aid = auto("registry", "add", str(wasm_path), "--registry", reg, "--sign-key", keys["private_key"]).stdout.strip()
    assert aid == out.artifact_id
    listed = json.loads(auto("registry", "list", "--registry", reg, "--json").stdout)
    assert listed[0]["signatures"] == [keys["key_id"]]
    auto("registry", "verify", "--registry", reg, "--trust-key", keys["public_key"])
    bad = auto("registry", "verify", "--registry", reg, "--trust-key", str(tmp_path / "b.pub"), code=1)
    assert "not a trusted key" in bad.stderr and bad.stderr.count("\n") == 1
    dest = tmp_path / "deployed.wasm"
    auto("registry", "get", aid[7:19], "--registry", reg, "--out", str(dest), "--trust-key", keys["public_key"])
    assert dest.read_bytes() == out.wasm and Path(str(dest) + ".sig").exists()
    refused = auto("registry", "get", aid, "--registry", reg, "--out", str(tmp_path / "x.wasm"),
                   "--trust-key", str(tmp_path / "b.pub"), code=1)
    assert "refused: signed by" in refused.stderr and "UntrustedArtifact" not in refused.stderr and not (tmp_path / "x.wasm").exists()
    # auto run: signed + trusted answers; the same bytes unsigned, a wrong key, tampered bytes: one line, exit 1
    res = json.loads(auto("run", str(dest), "--input", json.dumps(inp), "--trust-key", keys["public_key"]).stdout)
    assert res["tier"] == "tier-1"
    env_ok = auto("run", str(dest), "--input", json.dumps(inp), env={"AUTO_TRUST_KEYS": keys["public_key"]})
    assert json.loads(env_ok.stdout)["tier"] == "tier-1"
    for args, why in (
        ([str(wasm_path), "--trust-key", keys["public_key"]], "unsigned"),
        ([str(dest), "--trust-key", str(tmp_path / "b.pub")], "not a trusted key"),
    ):
        p = auto("run", *args, "--input", json.dumps(inp), code=1)
        assert why in p.stderr and p.stderr.strip().count("\n") == 0 and "Traceback" not in p.stderr
    tampered = tmp_path / "t.wasm"
    data = bytearray(out.wasm)
    data[-12] ^= 1
    tampered.write_bytes(bytes(data))
    Path(str(tampered) + ".sig").write_text(Path(str(dest) + ".sig").read_text())
    p = auto("run", str(tampered), "--input", json.dumps(inp), "--trust-key", keys["public_key"], code=1)
    assert "refused" in p.stderr and "Traceback" not in p.stderr
    # without a trust key the unsigned artifact still runs (the setting is opt-in)
    assert json.loads(auto("run", str(wasm_path), "--input", json.dumps(inp)).stdout)["tier"] == "tier-1"
    usage = auto("registry", "list", code=2)
    assert "--registry" in usage.stderr
