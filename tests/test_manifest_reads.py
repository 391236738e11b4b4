"""No module outside the runtime reads a manifest key by string, beyond the reads still listed.

The typed view :class:`auto_runtime.manifest.Manifest` (and the guard entry types of
:mod:`auto_runtime.guard.entries`) is how the compiler's tools read an artifact's manifest. A read
by string is ``<expr>.get("key")`` or ``<expr>["key"]`` where ``<expr>`` names a manifest (its
source ends in ``manifest``, e.g. ``art.manifest``, ``out.manifest``, ``manifest``) or a name a
function bound to such an expression or to ``read_manifest(...)`` / ``decode_manifest(...)``
(``m = read_manifest(data)``; ``m["task"]``). Modules
switched to the typed view have none; :data:`REMAINING` lists, per module, how many reads are left
to switch, so the count can only go down.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

SWITCHED = ("auto/cli.py", "auto/guards/program.py", "auto/compile/rungs/region.py", "auto/distributed.py",
            "auto/guards/semantic.py", "auto/proxy/sites.py", "auto/ratchet/core.py", "auto/ratchet/worker.py",
            "auto/serve/app.py", "auto/sites/discover.py")
"""Modules that read manifests only through the typed view."""

REMAINING: dict[str, int] = {"bench/capability_cases.py": 13, "bench/region_family.py": 1}
"""Module -> manifest reads by string still there (to switch to :class:`Manifest`): none in the
product (``auto/``); the bench's drivers, counted so the number only goes down."""


def _manifest_names(tree: ast.AST) -> dict[int, set[str]]:
    """``id(node)`` -> the names bound to a manifest in the function enclosing it (innermost)."""
    scope: dict[int, set[str]] = {}

    def visit(node: ast.AST, names: set[str]) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            names = set()
            for n in ast.walk(node):
                if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
                    src = ast.unparse(n.value)
                    if src.endswith("manifest") or src.startswith(("read_manifest(", "decode_manifest(")):
                        names.add(n.targets[0].id)
        scope[id(node)] = names
        for child in ast.iter_child_nodes(node):
            visit(child, names)

    visit(tree, set())
    return scope


def manifest_reads(path: Path) -> list[str]:
    """The manifest reads by string in one module, as ``line: source``."""
    found = []
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bound = _manifest_names(tree)
    for node in ast.walk(tree):
        target = key = None
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and isinstance(node.slice, ast.Constant):
            target, key = node.value, node.slice.value
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
              and node.args and isinstance(node.args[0], ast.Constant)):
            target, key = node.func.value, node.args[0].value
        if target is not None and isinstance(key, str) and (
                ast.unparse(target).endswith("manifest")
                or isinstance(target, ast.Name) and target.id in bound[id(node)]):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_new_manifest_key_reads_outside_the_runtime():
    counts = {}
    for path in sorted([*(REPO / "auto").rglob("*.py"), *(REPO / "bench").rglob("*.py")]):
        reads = manifest_reads(path)
        if reads:
            counts[path.relative_to(REPO).as_posix()] = reads
    for mod in SWITCHED:
        assert mod not in counts, f"{mod} reads the manifest by string: {counts.get(mod)}"
    grown = {m: r for m, r in counts.items() if len(r) > REMAINING.get(m, 0)}
    assert grown == {}, "manifest keys read by string (use auto_runtime.manifest.Manifest)"
    shrunk = {m: (len(counts.get(m, [])), n) for m, n in REMAINING.items() if len(counts.get(m, [])) < n}
    assert shrunk == {}, "fewer reads by string than REMAINING lists (now, listed): lower the count"


def test_the_check_sees_a_read_and_not_a_write(tmp_path):
    src = tmp_path / "probe.py"
    src.write_text("def f(art, manifest):\n    manifest['site'] = 1\n"
                   "    return art.manifest.get('compiled_as'), art.manifest['guard'], Manifest.of(art.manifest).guard\n")
    assert [r.split(": ", 1)[1] for r in manifest_reads(src)] == ["art.manifest.get('compiled_as')", "art.manifest['guard']"]


def test_the_check_sees_a_read_through_a_bound_name(tmp_path):
    src = tmp_path / "probe.py"
    src.write_text("def f(data, art):\n    m = read_manifest(data)\n    n = art.manifest\n    return m.get('task'), n['guard']\n\n"
                   "def g(m):\n    return m['task']\n")
    assert [r.split(": ", 1)[1] for r in manifest_reads(src)] == ["m.get('task')", "n['guard']"]
