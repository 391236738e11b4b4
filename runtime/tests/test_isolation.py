"""auto_runtime imports only the standard library, wasmtime and numpy (checked in a subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

FORBIDDEN = ("auto", "torch", "sklearn", "openai", "pydantic", "click")

SCRIPT = textwrap.dedent("""
    import importlib, json, pkgutil, sys
    import auto_runtime
    names = sorted(m.name for m in pkgutil.walk_packages(auto_runtime.__path__, "auto_runtime."))
    for name in names:
        importlib.import_module(name)
    for attr in auto_runtime.__all__:
        getattr(auto_runtime, attr)
    # exercise the request path too (lazy imports would show up here)
    import wasmtime
    from auto_runtime import Artifact, TieredTask
    from auto_runtime.wasm_sections import custom_section
    wat = '''(module (memory (export "memory") 1)
      (data (i32.const 16) "{\\\\"answer\\\\":1,\\\\"nonconformity\\\\":0.5}")
      (func (export "alloc") (param i32) (result i32) i32.const 1024)
      (func (export "run") (param i32 i32) (result i64)
        (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 32)))
      (func (export "run_batch") (param i32 i32) (result i64) unreachable))'''
    manifest = {"format": "auto.artifact/1", "task": "t", "interface": {"input": {"type": "object"}},
                "guard": {"method": "conformal-novelty", "alpha": 0.1, "calibration_scores": [0.9] * 19}}
    payload = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()
    art = Artifact.load(bytes(wasmtime.wat2wasm(wat)) + custom_section("auto.manifest", payload))
    task = TieredTask(art, lambda x: 0)
    assert task({"q": 1}).tier == "tier-1"
    task.batch([{"q": 1}, {"q": 2}])
    print(json.dumps({"submodules": names, "modules": sorted(sys.modules),
                      "stdlib": sorted(sys.stdlib_module_names)}))
""")


def test_runtime_imports_only_stdlib_wasmtime_numpy(tmp_path):
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    modules = out["modules"]
    assert {"auto_runtime.artifact", "auto_runtime.tiered", "auto_runtime.guard",
            "auto_runtime.schema", "auto_runtime.wasm_sections"} <= set(out["submodules"])
    for bad in FORBIDDEN:
        hits = [m for m in modules if m == bad or m.startswith(bad + ".")]
        assert not hits, f"auto_runtime pulled in {hits}"
    allowed = set(out["stdlib"]) | {"auto_runtime", "wasmtime", "numpy"}
    tops = {m.split(".")[0] for m in modules}
    foreign = sorted(t for t in tops if t not in allowed and not t.startswith("_"))
    assert not foreign, f"modules outside stdlib/wasmtime/numpy: {foreign}"


def test_errors_import_is_light(tmp_path):
    # the compiler's error tree imports auto_runtime.errors; that must not load wasmtime or numpy
    code = "import sys, auto_runtime.errors; print(sorted({'wasmtime', 'numpy'} & set(sys.modules)))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
