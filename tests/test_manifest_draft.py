"""Manifest sections the compiler builds as the runtime's types: the draft writes the typed
:class:`auto_runtime.manifest.Interface` and :class:`auto_runtime.manifest.Capability` as the
objects they stand for, and the loader's view reads the same types back; every rung's draft holds
them, and a draft refuses the untyped objects."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from auto_runtime.manifest import Capability, Interface, Manifest, check_manifest

from auto.compile.manifest import ManifestDraft

SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"], "additionalProperties": False}
RUNGS = Path(__file__).resolve().parents[1] / "auto" / "compile" / "rungs"


def _draft(interface, capabilities=()) -> ManifestDraft:
    return ManifestDraft(task="t", generation=1, compiled_as="region", interface=interface,
                         model={"kind": "region", "code_digest": "sha256:0"}, capabilities=tuple(capabilities))


def test_a_typed_interface_is_written_as_its_object_and_read_back_as_its_type():
    iface = Interface(SCHEMA, {"fields": ["answer"]})
    typed = _draft(iface).provisional()
    assert typed["interface"] == {"input": SCHEMA, "output": {"fields": ["answer"]}}
    check_manifest(typed)
    assert Manifest.of(typed).interface == iface


def test_typed_capabilities_are_written_as_their_objects_and_read_back_in_order():
    caps = (Capability("auto", "tool_call"), Capability("auto", "commit"))
    m = _draft(Interface(SCHEMA, {}), caps).provisional()
    assert m["capabilities"] == [{"module": "auto", "name": "tool_call"}, {"module": "auto", "name": "commit"}]
    assert Manifest.of(m).capabilities == caps


def test_a_draft_refuses_untyped_sections():
    with pytest.raises(TypeError, match="must be an auto_runtime.manifest.Interface, not dict"):
        _draft({"input": SCHEMA, "output": {}})
    with pytest.raises(TypeError, match="must hold auto_runtime.manifest.Capability, not dict"):
        _draft(Interface(SCHEMA, {}), [{"module": "auto", "name": "tool_call"}])


def test_every_rung_builds_its_interface_as_the_runtime_type():
    built = {}
    for path in sorted(RUNGS.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "ManifestDraft":
                kw = next(k.value for k in node.keywords if k.arg == "interface")
                built[path.stem] = isinstance(kw, ast.Call) and getattr(kw.func, "id", None) == "Interface"
    assert len(built) >= 6 and all(built.values()), built
