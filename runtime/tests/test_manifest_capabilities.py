"""The manifest's ``capabilities`` as a type the compiler builds and writes: the view reads each
declaration in order, writes it back as the object it was read from, and a pure artifact has none."""

from __future__ import annotations

from auto_runtime.manifest import Capability, Manifest, declared_capabilities

from .wasm_fixtures import BASE_MANIFEST

CAPS = [{"module": "auto", "name": "tool_call"}, {"module": "auto", "name": "tool_result"},
        {"module": "env", "name": "clock"}]


def test_the_capabilities_read_from_a_manifest_write_it_back_in_order():
    m = Manifest.of({**BASE_MANIFEST, "capabilities": CAPS})
    assert m.capabilities == (Capability("auto", "tool_call"), Capability("auto", "tool_result"),
                              Capability("env", "clock"))
    assert [c.to_dict() for c in m.capabilities] == CAPS
    assert [(c.module, c.name) for c in m.capabilities] == declared_capabilities({"capabilities": CAPS})


def test_a_pure_artifact_declares_no_capability():
    assert Manifest.of({**BASE_MANIFEST, "capabilities": []}).capabilities == ()
    assert Manifest.of({k: v for k, v in BASE_MANIFEST.items() if k != "capabilities"}).capabilities == ()
