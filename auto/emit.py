"""The ``auto.manifest`` custom section: append it to a module, read it back.

A WebAssembly custom section is section id 0, then the section size as unsigned LEB128, then the
name (LEB128 length + UTF-8 bytes), then the payload (WebAssembly core spec, "Custom Sections").
The payload here is the canonical JSON (:mod:`auto.canonical`) of the manifest. The same code and
manifest always give the same bytes; the artifact id is ``sha256:`` of the whole file.
"""

from __future__ import annotations

import hashlib

import json
from typing import Any

from auto.canonical import canonical_bytes, canonical_json
from auto.errors import ManifestError, MalformedArtifact

SECTION_NAME = "auto.manifest"
WASM_HEADER = b"\x00asm\x01\x00\x00\x00"


def leb128(n: int) -> bytes:
    """Unsigned LEB128 encoding of ``n >= 0`` (1 to 5 bytes for a u32)."""
    if n < 0:
        raise ValueError("LEB128 here encodes unsigned integers only")
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _read_leb(data: bytes, pos: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        if pos >= len(data) or shift > 28:
            raise MalformedArtifact("truncated or overlong LEB128 in the module")
        b = data[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return n, pos


def sections(wasm: bytes) -> list[tuple[int, str | None, int, int]]:
    """The module's sections: ``(id, custom name or None, payload start, payload end)`` each.

    For a custom section the payload range excludes the name. Raises MalformedArtifact when the
    bytes are not a well-framed WebAssembly module.
    """
    if wasm[:8] != WASM_HEADER:
        raise MalformedArtifact("not a WebAssembly module (bad magic number or version)")
    pos, out = 8, []
    while pos < len(wasm):
        sid = wasm[pos]
        size, body = _read_leb(wasm, pos + 1)
        end = body + size
        if end > len(wasm):
            raise MalformedArtifact(f"section {sid} runs past the end of the module")
        name = None
        if sid == 0:
            nlen, p = _read_leb(wasm, body)
            if p + nlen > end:
                raise MalformedArtifact("custom section name runs past its section")
            try:
                name = wasm[p:p + nlen].decode("utf-8")
            except UnicodeDecodeError as e:
                raise MalformedArtifact("custom section name is not UTF-8") from e
            body = p + nlen
        out.append((sid, name, body, end))
        pos = end
    return out


def custom_section(name: str, payload: bytes) -> bytes:
    """Encode one custom section: ``0x00, leb(size), leb(len(name)), name, payload``."""
    nm = name.encode("utf-8")
    content = leb128(len(nm)) + nm + payload
    return b"\x00" + leb128(len(content)) + content


def emit(wasm_code: bytes, manifest: dict[str, Any]) -> bytes:
    """Append the ``auto.manifest`` section holding ``canonical_json(manifest)`` to the module.

    Args:
        wasm_code: a binary module without an ``auto.manifest`` section (from
            :func:`auto.codegen.compile_model`).
        manifest: the manifest object (``docs/architecture.md``); must be JSON with finite numbers.

    Returns:
        The artifact bytes: ``wasm_code`` followed by the custom section (deterministic). The
        stored manifest gains ``manifest_digest``: ``sha256:`` of the canonical JSON of the
        manifest without that key.

    Raises:
        MalformedArtifact: ``wasm_code`` is not a well-framed module.
        ManifestError: the manifest is not a JSON object, is not serializable (NaN, infinity, a
            non-JSON value), or the module already carries an ``auto.manifest`` section.
    """
    if not isinstance(manifest, dict):
        raise ManifestError("the manifest must be a JSON object")
    if any(name == SECTION_NAME for _, name, _, _ in sections(wasm_code)):
        raise ManifestError(f"the module already has an {SECTION_NAME} section")
    body = {k: v for k, v in manifest.items() if k != "manifest_digest"}
    try:
        # the manifest's own digest (over its canonical JSON without this key): the loader
        # refuses a manifest whose bytes changed, even when no artifact id is given
        payload = canonical_bytes({**body, "manifest_digest": "sha256:" + hashlib.sha256(canonical_bytes(body)).hexdigest()})
    except (TypeError, ValueError) as e:
        raise ManifestError(f"the manifest is not canonical-JSON serializable: {e}") from e
    return bytes(wasm_code) + custom_section(SECTION_NAME, payload)


def read_manifest(wasm: bytes) -> dict[str, Any]:
    """The manifest stored in the artifact's ``auto.manifest`` section.

    Raises:
        MalformedArtifact: not a well-framed module.
        ManifestError: no such section, more than one, or its payload is not the canonical JSON
            of an object.
    """
    found = [(a, b) for _, name, a, b in sections(wasm) if name == SECTION_NAME]
    if len(found) != 1:
        raise ManifestError(f"expected exactly one {SECTION_NAME} section, found {len(found)}")
    a, b = found[0]
    raw = bytes(wasm[a:b])
    try:
        obj = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ManifestError(f"{SECTION_NAME} is not UTF-8 JSON: {e}") from e
    try:
        canon = canonical_json(obj).encode("utf-8")
    except ValueError as e:  # NaN / Infinity parsed by json.loads
        raise ManifestError(f"{SECTION_NAME} holds a non-finite number") from e
    if not isinstance(obj, dict) or canon != raw:
        raise ManifestError(f"{SECTION_NAME} is not the canonical JSON of an object")
    return obj
