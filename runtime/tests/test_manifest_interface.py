"""The manifest's ``interface`` as a type the compiler builds and writes: what the view reads from a
manifest it gives back, and what it is built with is what the manifest holds."""

from __future__ import annotations

from auto_runtime.manifest import Interface, Manifest

from .wasm_fixtures import BASE_MANIFEST

INTERFACE = {"input": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"],
                       "additionalProperties": False},
             "output": {"fields": ["answer", "team"]}}


def test_the_interface_read_from_a_manifest_writes_it_back():
    m = Manifest.of({**BASE_MANIFEST, "interface": INTERFACE})
    assert m.interface.to_dict() == INTERFACE
    assert Interface(INTERFACE["input"], INTERFACE["output"]).to_dict() == INTERFACE


def test_the_written_interface_is_a_copy():
    iface = Interface(INTERFACE["input"], INTERFACE["output"])
    out = iface.to_dict()
    out["input"]["required"].append("x")
    out["output"]["fields"].append("y")
    assert iface.to_dict() == INTERFACE


def test_an_interface_without_an_output_is_written_with_an_empty_one():
    m = Manifest.of({**BASE_MANIFEST, "interface": {"input": True}})
    assert m.interface.to_dict() == {"input": True, "output": {}}
