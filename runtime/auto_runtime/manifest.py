"""The ``auto.manifest`` custom section: encoding, decoding, its digest, structural checks.

The section is a WebAssembly custom section (:func:`auto_runtime.wasm_sections.custom_section`)
named ``auto.manifest``, appended after the code; its payload is the canonical JSON (see
:mod:`auto_runtime.jsonio`) of one object, whose full shape is in docs/architecture.md. The
compiler writes it with :func:`append_manifest` (the payload carries ``manifest_digest``, see
:func:`manifest_digest`); the loader reads it with :func:`manifest_payload` and
:func:`decode_manifest`. The loader needs, and therefore requires:

- ``format``: ``"auto.artifact/1"``;
- ``task``: a non-empty string;
- ``interface``: an object whose ``input`` is a JSON schema (object or boolean);
- ``guard``: present (its *content* is judged by :func:`auto_runtime.guard.build_guard`, which
  turns an unusable entry into an always-deopt guard instead of refusing the artifact);

and, when present: ``generation`` an integer or null; ``capabilities`` a list of
``{"module": str, "name": str}``; ``abi`` an object whose ``exports`` is a list of strings and
whose ``encoding``, if given, is ``"canonical-json"``. A capability artifact's ``tools`` and
``tool_budget`` are checked by :func:`auto_runtime.tools.tool_decls` when it is loaded.
"""

from __future__ import annotations

from typing import Any

from auto_runtime.digest import digest_bytes
from auto_runtime.errors import ManifestError
from auto_runtime.jsonio import canonical_bytes, strict_loads
from auto_runtime.wasm_sections import WasmModuleInfo, custom_section, parse

MANIFEST_SECTION = "auto.manifest"
FORMAT = "auto.artifact/1"
REQUIRED_KEYS = ("format", "task", "interface", "guard")
ABI_EXPORTS = ("memory", "alloc", "run", "run_batch")
DIGEST_KEY = "manifest_digest"
"""The manifest's own digest: see :func:`manifest_digest`."""


def manifest_digest(manifest: dict[str, Any]) -> str:
    """``sha256:`` of the canonical JSON of ``manifest`` without its ``manifest_digest`` key.

    Stored in the manifest under that key, it lets the loader refuse a manifest whose content
    changed (corruption, an edit) even when no artifact id is given.

    Raises:
        ValueError: NaN or infinity. TypeError: a value JSON cannot represent.
        RecursionError: too deep or circular.
    """
    return digest_bytes(canonical_bytes({k: v for k, v in manifest.items() if k != DIGEST_KEY}))


def encode_manifest(manifest: dict[str, Any]) -> bytes:
    """The section payload for ``manifest``: its canonical JSON with ``manifest_digest`` set to
    :func:`manifest_digest` (a stored value is recomputed, so the result does not depend on it).

    Raises:
        ManifestError: the manifest is not a JSON object, or not canonical-JSON serializable
            (NaN, infinity, a non-JSON value, nesting too deep).
    """
    if not isinstance(manifest, dict):
        raise ManifestError("the manifest must be a JSON object")
    try:
        return canonical_bytes({**manifest, DIGEST_KEY: manifest_digest(manifest)})
    except (TypeError, ValueError, RecursionError) as e:
        raise ManifestError(f"the manifest is not canonical-JSON serializable: {e}") from None


def append_manifest(code: bytes, manifest: dict[str, Any]) -> bytes:
    """The artifact bytes: ``code`` followed by the ``auto.manifest`` section of ``manifest``.

    Deterministic: the same code and manifest (in any key order) give the same bytes.

    Args:
        code: a binary module without an ``auto.manifest`` section.
        manifest: the manifest object; must be JSON with finite numbers.

    Raises:
        MalformedArtifact: ``code`` is not a well-framed core WebAssembly module.
        ManifestError: ``code`` already has an ``auto.manifest`` section, or the manifest cannot
            be encoded (:func:`encode_manifest`).
    """
    if parse(code).custom(MANIFEST_SECTION):
        raise ManifestError(f"the module already has an {MANIFEST_SECTION} section")
    return bytes(code) + custom_section(MANIFEST_SECTION, encode_manifest(manifest))


def manifest_payload(info: WasmModuleInfo, where: str = "artifact") -> bytes:
    """The payload of the module's one ``auto.manifest`` section.

    Raises:
        ManifestError: no such section, or more than one.
    """
    payloads = info.custom(MANIFEST_SECTION)
    if not payloads:
        raise ManifestError(f"{where}: no {MANIFEST_SECTION} custom section")
    if len(payloads) > 1:
        raise ManifestError(f"{where}: {len(payloads)} {MANIFEST_SECTION} sections (expected one)")
    return payloads[0]


def read_manifest(wasm: bytes, where: str = "artifact") -> dict[str, Any]:
    """The checked manifest of an artifact's bytes (:func:`manifest_payload`, then
    :func:`decode_manifest` and :func:`check_manifest_digest`).

    Raises:
        MalformedArtifact: not a well-framed core WebAssembly module.
        ManifestError: as :func:`manifest_payload`, :func:`decode_manifest` and
            :func:`check_manifest_digest`.
    """
    manifest = decode_manifest(manifest_payload(parse(wasm), where), where)
    check_manifest_digest(manifest, where)
    return manifest


def check_manifest_digest(manifest: dict[str, Any], where: str = "artifact") -> None:
    """Refuse a manifest whose content no longer matches its own ``manifest_digest`` (when it
    has one). Catches corrupted or edited manifests when no artifact id is given; a forger who
    recomputes the digest is caught only by the artifact id.

    Raises:
        ManifestError: the digest does not match.
    """
    expected = manifest.get(DIGEST_KEY)
    if expected is None:
        return
    if manifest_digest(manifest) != expected:
        raise ManifestError(f"{where}: the manifest does not match its manifest_digest (corrupted or edited)")


def decode_manifest(payload: bytes, where: str = "artifact") -> dict[str, Any]:
    """Decode and check the manifest section's bytes.

    Args:
        payload: the custom section's content (after its name).
        where: names the artifact in error messages.

    Returns:
        The manifest object.

    Raises:
        ManifestError: not UTF-8 JSON, not an object, not canonical (key order, whitespace,
            escapes, duplicate keys), or a required key missing or of the wrong type.
    """
    try:
        manifest = strict_loads(payload)
    except ValueError as e:
        raise ManifestError(f"{where}: auto.manifest is not valid JSON: {e}") from None
    if not isinstance(manifest, dict):
        raise ManifestError(
            f"{where}: auto.manifest must be a JSON object, got {type(manifest).__name__}"
        )
    try:
        canonical = canonical_bytes(manifest)
    except (TypeError, ValueError, RecursionError) as e:  # pragma: no cover - JSON always re-encodes
        raise ManifestError(f"{where}: auto.manifest cannot be re-encoded: {e}") from None
    if canonical != payload:
        raise ManifestError(
            f"{where}: auto.manifest is not canonical JSON (sorted keys, no whitespace, UTF-8, "
            "no duplicate keys)"
        )
    check_manifest(manifest, where)
    return manifest


def check_manifest(manifest: dict[str, Any], where: str = "artifact") -> None:
    """Structural checks of a decoded manifest (see the module docstring).

    Raises:
        ManifestError: naming the first key at fault.
    """
    missing = [k for k in REQUIRED_KEYS if k not in manifest]
    if missing:
        raise ManifestError(f"{where}: auto.manifest lacks required key(s): {', '.join(missing)}")
    if manifest["format"] != FORMAT:
        raise ManifestError(
            f"{where}: unsupported manifest format {manifest['format']!r} (expected {FORMAT!r})"
        )
    task = manifest["task"]
    if not isinstance(task, str) or not task:
        raise ManifestError(f"{where}: manifest 'task' must be a non-empty string")
    gen = manifest.get("generation")
    if gen is not None and (isinstance(gen, bool) or not isinstance(gen, int)):
        raise ManifestError(f"{where}: manifest 'generation' must be an integer or null")
    interface = manifest["interface"]
    if not isinstance(interface, dict):
        raise ManifestError(f"{where}: manifest 'interface' must be an object")
    if "input" not in interface:
        raise ManifestError(f"{where}: manifest 'interface' lacks 'input' (the input schema)")
    if not isinstance(interface["input"], (dict, bool)):
        raise ManifestError(f"{where}: manifest 'interface.input' must be a JSON schema")
    caps = manifest.get("capabilities", [])
    if not isinstance(caps, list):
        raise ManifestError(f"{where}: manifest 'capabilities' must be a list")
    for i, c in enumerate(caps):
        if (not isinstance(c, dict) or not isinstance(c.get("module"), str)
                or not isinstance(c.get("name"), str)):
            raise ManifestError(
                f"{where}: capabilities[{i}] must be {{\"module\": str, \"name\": str}}, got {c!r:.100}"
            )
    abi = manifest.get("abi")
    if abi is not None:
        if not isinstance(abi, dict):
            raise ManifestError(f"{where}: manifest 'abi' must be an object")
        exports = abi.get("exports", list(ABI_EXPORTS))
        if not isinstance(exports, list) or not all(isinstance(e, str) for e in exports):
            raise ManifestError(f"{where}: manifest 'abi.exports' must be a list of strings")
        enc = abi.get("encoding", "canonical-json")
        if enc != "canonical-json":
            raise ManifestError(f"{where}: unsupported abi.encoding {enc!r}")


def declared_capabilities(manifest: dict[str, Any]) -> list[tuple[str, str]]:
    """``(module, name)`` of every capability the manifest declares, in order."""
    return [(c["module"], c["name"]) for c in manifest.get("capabilities", [])]


def declared_exports(manifest: dict[str, Any]) -> list[str]:
    """Exports the manifest's ``abi`` promises (the ABI's four when ``abi`` is absent)."""
    abi = manifest.get("abi")
    if isinstance(abi, dict) and isinstance(abi.get("exports"), list):
        return list(abi["exports"])
    return list(ABI_EXPORTS)
