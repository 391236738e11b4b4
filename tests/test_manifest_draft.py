"""A manifest section the compiler builds as the runtime's type: the draft writes the typed
:class:`auto_runtime.manifest.Interface` as the object it stands for, and the loader's view reads
the same type back."""

from __future__ import annotations

from auto_runtime.manifest import Interface, Manifest, check_manifest

from auto.compile.manifest import ManifestDraft

SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"], "additionalProperties": False}


def _draft(interface) -> ManifestDraft:
    return ManifestDraft(task="t", generation=1, compiled_as="region", interface=interface,
                         model={"kind": "region", "code_digest": "sha256:0"})


def test_a_typed_interface_is_written_as_its_object_and_read_back_as_its_type():
    iface = Interface(SCHEMA, {"fields": ["answer"]})
    typed, plain = _draft(iface).provisional(), _draft({"input": SCHEMA, "output": {"fields": ["answer"]}}).provisional()
    assert typed == plain
    check_manifest(typed)
    assert Manifest.of(typed).interface == iface
