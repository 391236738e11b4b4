"""The runtime's error tree drawn in ``auto_runtime.errors``'s docstring is its class tree, both
ways: every drawn name is a class under its drawn parent, and every ``AutoError`` subclass the
runtime defines (all its modules imported) is drawn. (The compiler's test checks the whole tree
drawn in ``auto.errors``.)"""

from __future__ import annotations

import importlib
import pkgutil
import re

import auto_runtime
import auto_runtime.errors
from auto_runtime.errors import AutoError

_NODE = re.compile(r"^(?P<indent>[ │]*)(?P<branch>[├└]── )?(?P<name>[A-Z]\w+)\s*(?:\((?P<module>[\w.]+)\))?")


def _drawn(doc: str) -> dict[str, tuple[str | None, str | None]]:
    """``name -> (parent or None, module named beside it or None)``; description continuation
    lines (no branch) are skipped."""
    block = doc.split("::", 1)[1].strip("\n").split("\n    (", 1)[0]
    tree: dict[str, tuple[str | None, str | None]] = {}
    stack: list[tuple[int, str]] = []
    for raw in block.splitlines():
        m = _NODE.match(raw[4:])
        if m is None or (m.group("indent") and not m.group("branch")):
            continue
        depth = len(m.group("indent")) // 4 + 1 if m.group("branch") else 0
        while stack and stack[-1][0] >= depth:
            stack.pop()
        tree[m.group("name")] = (stack[-1][1] if stack else None, m.group("module"))
        stack.append((depth, m.group("name")))
    return tree


def _subclasses(cls: type) -> set[type]:
    out = set()
    for sub in cls.__subclasses__():
        out |= {sub} | _subclasses(sub)
    return out


def test_the_runtime_drawing_is_its_class_tree():
    tree = _drawn(auto_runtime.errors.__doc__)
    assert len(tree) >= 17 and tree["AutoError"][0] is None
    classes = {}
    for name, (_parent, module) in tree.items():
        cls = getattr(importlib.import_module(module or "auto_runtime.errors"), name)
        classes[name] = cls
    for name, (parent, _module) in tree.items():
        if parent is not None:
            assert [b for b in classes[name].__bases__ if issubclass(b, AutoError)] == [classes[parent]], name
    for info in pkgutil.walk_packages(auto_runtime.__path__, "auto_runtime."):
        try:
            importlib.import_module(info.name)
        except ImportError:  # an optional extra (cryptography) not installed
            continue
    defined = {c for c in _subclasses(AutoError) if c.__module__.startswith("auto_runtime")}
    assert sorted(c.__name__ for c in defined - set(classes.values())) == []
