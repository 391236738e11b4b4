"""The layout is part of the product: no import cycles, the product never imports the bench, and
no function in ``auto/`` or ``runtime/`` is over :data:`MAX_FUNCTION_LINES` lines nor any class over
:data:`MAX_CLASS_LINES` (no exceptions are listed).

The import graph is built from the source with :mod:`ast` (no module is imported): an edge
``a -> b`` for every ``import`` / ``from ... import`` in ``a`` that names first-party module
``b``, at module level *or inside a function* (a function-level import hides a cycle, it does not
remove it). ``from pkg import name`` counts as an edge to ``pkg.name`` when that is a module, else
to ``pkg``.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _modules(root: Path, package: str) -> dict[str, Path]:
    mods = {}
    for p in sorted((root / package).rglob("*.py")):
        parts = list(p.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = p
    return mods


def _resolve(name: str, mods: dict[str, Path]) -> str | None:
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """``module -> first-party modules it imports`` for every module under ``root/package``."""
    mods = _modules(root, package)
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for m, path in mods.items():
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = m.split(".") if is_pkg else m.split(".")[:-1]
                    base = base[:len(base) - node.level + 1]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in mods else mod for a in node.names]
            for t in targets:
                r = _resolve(t, mods)
                if r is not None and r != m:
                    graph[m].add(r)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_cycle_finder_finds_a_cycle(tmp_path):
    pkg = tmp_path / "p"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from p import b\n")
    (pkg / "b.py").write_text("def f():\n    from p.a import x\n")  # hidden in a function
    (pkg / "c.py").write_text("import p.a\n")
    assert cycles(import_graph(tmp_path, "p")) == [["p.a", "p.b"]]


def test_auto_has_no_import_cycle():
    assert cycles(import_graph(REPO, "auto")) == []


def test_the_runtime_has_no_import_cycle():
    assert cycles(import_graph(REPO / "runtime", "auto_runtime")) == []


def test_the_bench_has_no_import_cycle():
    assert cycles(import_graph(REPO, "bench")) == []


def test_the_product_never_imports_the_bench():
    for package, root in (("auto", REPO), ("auto_runtime", REPO / "runtime")):
        paths = sorted((root / package).rglob("*.py"))
        assert len(paths) > 10, package
        for path in paths:
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
                for n in names:
                    assert n.split(".")[0] != "bench", f"{path.relative_to(REPO)} imports {n}"


def test_the_runtime_never_imports_the_compiler():
    paths = sorted((REPO / "runtime" / "auto_runtime").rglob("*.py"))
    assert len(paths) > 10
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            for n in names:
                assert n.split(".")[0] != "auto", f"{path.relative_to(REPO)} imports {n}"


MAX_FUNCTION_LINES = 100
"""A function's span (``def`` line to last line, docstring and nested functions included)."""
MAX_CLASS_LINES = 400
"""A class's span (``class`` line to last line)."""

def oversized(path: Path, rel: str) -> dict[str, int]:
    """``rel::qualified name`` -> span in lines of each function over :data:`MAX_FUNCTION_LINES`
    and each class over :data:`MAX_CLASS_LINES` in the module at ``path``."""
    found: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + child.name
                span = child.end_lineno - child.lineno + 1
                limit = MAX_CLASS_LINES if isinstance(child, ast.ClassDef) else MAX_FUNCTION_LINES
                if span > limit:
                    found[f"{rel}::{name}"] = span
                visit(child, name + ".")
            else:
                visit(child, prefix)

    visit(ast.parse(path.read_text(encoding="utf-8")), "")
    return found


def test_the_size_check_sees_long_functions_and_classes(tmp_path):
    def lines(n: int, indent: str) -> str:
        return "".join(f"{indent}x{i} = {i}\n" for i in range(n))
    src = tmp_path / "probe.py"
    src.write_text("def short():\n    return 1\n\n\ndef long():\n" + lines(MAX_FUNCTION_LINES, "    ")
                   + "\n\nclass Big:\n" + lines(MAX_CLASS_LINES - MAX_FUNCTION_LINES, "    ")
                   + "    def method(self):\n" + lines(MAX_FUNCTION_LINES, "        ")
                   + "\n\nclass Small:\n    def method(self):\n        return 2\n")
    assert oversized(src, "probe.py") == {"probe.py::long": MAX_FUNCTION_LINES + 1,
                                          "probe.py::Big": MAX_CLASS_LINES + 2,
                                          "probe.py::Big.method": MAX_FUNCTION_LINES + 1}


def test_no_function_over_100_lines_nor_class_over_400():
    found: dict[str, int] = {}
    # the sources only: an install's build/ copy of the runtime (pip's non-editable build) is not code
    for root in ("auto", "runtime/auto_runtime", "runtime/tests"):
        paths = sorted((REPO / root).rglob("*.py"))
        assert len(paths) > 10, root
        for path in paths:
            found.update(oversized(path, path.relative_to(REPO).as_posix()))
    assert found == {}, "functions over 100 lines / classes over 400: split them into steps named after what they do"
