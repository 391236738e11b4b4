"""Emitting an artifact: the compiled code followed by its ``auto.manifest`` custom section.

The section's format is the runtime's (:mod:`auto_runtime.manifest`): the payload is the
canonical JSON of the manifest with its ``manifest_digest``, framed as a WebAssembly custom
section (:mod:`auto_runtime.wasm_sections`). The same code and manifest always give the same
bytes; the artifact id is ``sha256:`` of the whole file.

- :func:`emit` is :func:`auto_runtime.manifest.append_manifest`;
- :func:`read_manifest` is :func:`auto_runtime.manifest.read_manifest` (the loader's checks:
  exactly one section, canonical JSON, the required keys, the manifest's own digest).
"""

from __future__ import annotations

from auto_runtime.manifest import append_manifest as emit
from auto_runtime.manifest import read_manifest

__all__ = ["emit", "read_manifest"]
