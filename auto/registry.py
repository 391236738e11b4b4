"""A content-addressed artifact registry: a folder of artifacts named by the sha-256 of their bytes,
each with the signatures made over it.

Layout of a registry folder::

    artifacts/<64 hex>.wasm        the artifact; the name is the sha-256 of the file's bytes
    artifacts/<64 hex>.wasm.sig    its signature records (a JSON list, :mod:`auto_runtime.signing`)

so ``Artifact.load(registry.path(id), trust=policy)`` finds the signatures the way it finds them
beside any deployed file. Writes go to a temporary file renamed into place (a reader never sees
half a file); adding the same bytes twice is a no-op, and a signature by a key that already
signed is not added twice. Nothing in a registry is trusted because it is there: :meth:`Registry.verify`
re-hashes every file and checks every signature, and a trust policy decides which signers count.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from auto_runtime.digest import digest_bytes
from auto_runtime.errors import AutoError, UntrustedArtifact
from auto_runtime.manifest import Manifest, read_manifest
from auto_runtime.signing import SIDECAR_SUFFIX, TrustPolicy, check_record, read_signatures

from auto.errors import ArgumentError
from auto.signing import sign

_HEX = re.compile(r"^(?:sha256:)?([0-9a-f]{4,64})$")


@dataclass
class Entry:
    """One artifact in a registry.

    Attributes:
        id: ``sha256:<hex>``; path: its file.
        task, generation, compiled_as: from its manifest (None when the manifest cannot be read).
        bytes: its size.
        signatures: the key ids of its signature records (as recorded; :meth:`Registry.verify`
            checks them).
    """

    id: str
    path: Path
    task: str | None
    generation: int | None
    compiled_as: str | None
    bytes: int
    signatures: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "path": str(self.path), "task": self.task, "generation": self.generation,
                "compiled_as": self.compiled_as, "bytes": self.bytes, "signatures": list(self.signatures)}


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_bytes(data)
    tmp.replace(path)


class Registry:
    """A registry folder (created on first write).

    Raises (from the methods):
        ArgumentError: an unknown or ambiguous id, bytes that are not an artifact, a folder that
            cannot be written.
    """

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root)
        self.dir = self.root / "artifacts"

    def path(self, artifact_id: str) -> Path:
        """The file of ``artifact_id`` (which must be a full ``sha256:<64 hex>`` id)."""
        return self.dir / (artifact_id.split(":", 1)[-1] + ".wasm")

    def ids(self) -> list[str]:
        """Every artifact id in the registry, sorted."""
        if not self.dir.is_dir():
            return []
        return sorted("sha256:" + p.name[:-5] for p in self.dir.iterdir()
                      if p.name.endswith(".wasm") and re.fullmatch(r"[0-9a-f]{64}\.wasm", p.name))

    def resolve(self, ref: str) -> str:
        """The full id of ``ref``: an id, or a unique prefix of its hex (at least 4 digits).

        Raises:
            ArgumentError: nothing or more than one artifact matches.
        """
        m = _HEX.match(ref.strip().lower())
        if not m:
            raise ArgumentError(f"{ref!r} is not an artifact id (sha256:<hex>, or a prefix of at least 4 hex digits)")
        hits = [i for i in self.ids() if i.split(":", 1)[1].startswith(m.group(1))]
        if not hits:
            raise ArgumentError(f"no artifact {ref} in the registry {self.root}")
        if len(hits) > 1:
            raise ArgumentError(f"{ref} is ambiguous in the registry {self.root} ({len(hits)} artifacts match)")
        return hits[0]

    def signatures(self, artifact_id: str) -> list[dict[str, Any]]:
        """The signature records kept for ``artifact_id``."""
        return read_signatures(str(self.path(artifact_id)) + SIDECAR_SUFFIX)

    def add(self, data: bytes, *, key: Any = None) -> str:
        """Put an artifact's bytes in the registry (and sign them with ``key`` when given);
        returns its id.

        Raises:
            ArgumentError: the bytes are not an artifact (no readable, checked manifest).
        """
        data = bytes(data)
        try:
            read_manifest(data)
        except AutoError as e:
            raise ArgumentError(f"not an artifact: {e}") from None
        aid = digest_bytes(data)
        self.dir.mkdir(parents=True, exist_ok=True)
        path = self.path(aid)
        if not path.exists():
            _write_atomic(path, data)
        if key is not None:
            self.add_signature(aid, sign(data, key))
        return aid

    def add_signature(self, artifact_id: str, record: dict[str, Any]) -> None:
        """Keep a signature record beside the artifact (checked against its bytes first; a key
        that already signed is not recorded twice).

        Raises:
            ArgumentError: no such artifact, or the record does not verify over its bytes.
        """
        path = self.path(artifact_id)
        try:
            data = path.read_bytes()
        except OSError:
            raise ArgumentError(f"no artifact {artifact_id} in the registry {self.root}") from None
        try:
            check_record(record, data)
        except UntrustedArtifact as e:
            raise ArgumentError(f"the signature does not verify over {artifact_id}: {e}") from None
        records = self.signatures(artifact_id)
        if any(r.get("key_id") == record["key_id"] for r in records):
            return
        records.append(record)
        _write_atomic(Path(str(path) + SIDECAR_SUFFIX), (json.dumps(records, indent=1, sort_keys=True) + "\n").encode())

    def get(self, ref: str) -> tuple[str, bytes, list[dict[str, Any]]]:
        """``(id, bytes, signature records)`` of an artifact (``ref``: id or unique prefix).

        Raises:
            ArgumentError: unknown or ambiguous ``ref``.
        """
        aid = self.resolve(ref)
        return aid, self.path(aid).read_bytes(), self.signatures(aid)

    def entries(self) -> list[Entry]:
        """Every artifact with what its manifest says (unreadable manifests give Nones)."""
        out = []
        for aid in self.ids():
            p = self.path(aid)
            data = p.read_bytes()
            try:
                m = Manifest.read(data)
            except AutoError:
                m = Manifest.of({})
            try:
                sigs = [str(r.get("key_id")) for r in self.signatures(aid)]
            except UntrustedArtifact:
                sigs = ["<unreadable>"]
            out.append(Entry(aid, p, m.task, m.generation, m.compiled_as, len(data), sigs))
        return out

    def verify(self, trust: TrustPolicy | None = None, refs: list[str] | None = None) -> list[dict[str, Any]]:
        """Check artifacts (all, or ``refs``): the bytes hash to their name; every signature
        verifies; with ``trust``, a trusted key signed it.

        Returns:
            One row per artifact: ``{"id", "ok", "content_ok", "signatures": [{"key_id", "ok",
            "reason"}], "trusted_by"}`` (``ok`` is False on any failure).
        """
        rows = []
        for aid in ([self.resolve(r) for r in refs] if refs else self.ids()):
            data = self.path(aid).read_bytes()
            content_ok = digest_bytes(data) == aid
            sigs = []
            try:
                records = self.signatures(aid)
            except UntrustedArtifact as e:
                records, sigs = [], [{"key_id": None, "ok": False, "reason": str(e)}]
            for r in records:
                try:
                    sigs.append({"key_id": check_record(r, data), "ok": True, "reason": None})
                except UntrustedArtifact as e:
                    sigs.append({"key_id": r.get("key_id") if isinstance(r, dict) else None, "ok": False, "reason": str(e)})
            trusted_by = None
            reason = None
            if trust is not None and content_ok:
                try:
                    trusted_by = trust.verify(data, records, aid)
                except UntrustedArtifact as e:
                    reason = str(e)
            ok = content_ok and all(s["ok"] for s in sigs) and (trust is None or trusted_by is not None)
            rows.append({"id": aid, "ok": ok, "content_ok": content_ok, "signatures": sigs,
                         "trusted_by": trusted_by, "reason": reason if not ok else None})
        return rows
