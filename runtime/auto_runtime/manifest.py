"""The ``auto.manifest`` custom section: decoding and structural checks.

The manifest is canonical JSON (see :mod:`auto_runtime.jsonio`) of one object; its full shape is
in docs/architecture.md. The loader needs, and therefore requires:

- ``format``: ``"auto.artifact/1"``;
- ``task``: a non-empty string;
- ``interface``: an object whose ``input`` is a JSON schema (object or boolean);
- ``guard``: present (its *content* is judged by :func:`auto_runtime.guard.build_guard`, which
  turns an unusable entry into an always-deopt guard instead of refusing the artifact);

and, when present: ``generation`` an integer or null; ``capabilities`` a list of
``{"module": str, "name": str}``; ``abi`` an object whose ``exports`` is a list of strings and
whose ``encoding``, if given, is ``"canonical-json"``.
"""

from __future__ import annotations

from typing import Any

from auto_runtime.errors import ManifestError
from auto_runtime.jsonio import canonical_bytes, strict_loads

MANIFEST_SECTION = "auto.manifest"
FORMAT = "auto.artifact/1"
REQUIRED_KEYS = ("format", "task", "interface", "guard")
ABI_EXPORTS = ("memory", "alloc", "run", "run_batch")


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
