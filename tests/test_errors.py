"""The error tree drawn in ``auto.errors``'s docstring is the tree of the classes, both ways.

Every drawn name is a class (imported from the module named beside it, else from
:mod:`auto.errors`) whose direct ``AutoError``-side base is the drawn parent; every subclass of
``AutoError`` defined in ``auto`` or ``auto_runtime`` (all their modules imported) is drawn. An
exception class of those packages outside the tree must be one of the internal signals the
docstring names. The same check for the runtime's own drawing is in ``runtime/tests``.
"""

from __future__ import annotations

import importlib
import pkgutil
import re

import auto
import auto.errors
import auto_runtime
from auto_runtime.errors import AutoError

_LINE = re.compile(r"^(?P<indent>[ │]*)(?:[├└]── )?(?P<name>[A-Z]\w+)\s*(?:\((?P<module>[\w.]+)\))?")


def drawn_tree(doc: str) -> dict[str, tuple[str | None, str | None]]:
    """``name -> (parent name or None for the root, module named beside it or None)`` of the
    tree drawn after the docstring's first ``::``."""
    block = doc.split("::", 1)[1].strip("\n").split("\n\n", 1)[0]
    tree: dict[str, tuple[str | None, str | None]] = {}
    stack: list[tuple[int, str]] = []
    for raw in block.splitlines():
        line = raw[4:]  # the block's own indentation
        m = _LINE.match(line)
        assert m, f"unreadable line of the drawing: {raw!r}"
        depth = 0 if not line.lstrip(" │").startswith(("├", "└")) else len(m.group("indent")) // 4 + 1
        while stack and stack[-1][0] >= depth:
            stack.pop()
        parent = stack[-1][1] if stack else None
        name = m.group("name")
        assert name not in tree, f"{name} is drawn twice"
        tree[name] = (parent, m.group("module"))
        stack.append((depth, name))
    return tree


def _import_all(package) -> None:
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        if info.name.endswith("_bootstrap.sitecustomize"):
            continue  # runs the recorder's bootstrap when imported
        try:
            importlib.import_module(info.name)
        except ImportError:  # an optional extra that is not installed (the module names it)
            continue


def _subclasses(cls: type) -> set[type]:
    out = set()
    for sub in cls.__subclasses__():
        out |= {sub} | _subclasses(sub)
    return out


def _ours(cls: type) -> bool:
    return cls.__module__.split(".")[0] in ("auto", "auto_runtime")


def test_the_drawing_is_the_class_tree_both_ways():
    tree = drawn_tree(auto.errors.__doc__)
    assert tree["AutoError"][0] is None and len(tree) > 30
    classes = {}
    for name, (parent, module) in tree.items():
        mod = importlib.import_module(module or "auto.errors")
        cls = getattr(mod, name, None)
        assert isinstance(cls, type) and issubclass(cls, BaseException), f"{name} is drawn but not a class of {mod.__name__}"
        if module:
            assert cls.__module__ == module, f"{name} is drawn in {module} but defined in {cls.__module__}"
        classes[name] = cls
    for name, (parent, _module) in tree.items():
        cls = classes[name]
        if parent is None:
            assert cls is AutoError
            continue
        tree_bases = [b for b in cls.__bases__ if issubclass(b, AutoError)]
        assert tree_bases == [classes[parent]], f"{name} is drawn under {parent}; its bases are {cls.__bases__}"

    _import_all(auto)
    _import_all(auto_runtime)
    defined = {c for c in _subclasses(AutoError) if _ours(c)}
    drawn = set(classes.values())
    assert sorted(c.__qualname__ for c in defined - drawn) == [], "AutoError subclasses missing from the drawing"


def test_every_exception_class_is_rooted_or_a_named_internal_signal():
    _import_all(auto)
    _import_all(auto_runtime)
    doc = auto.errors.__doc__
    internal = set(re.findall(r"``([\w.]+)``", doc.split("Not in the tree, on purpose", 1)[1]))
    strays = sorted(f"{c.__module__}.{c.__qualname__}" for c in _subclasses(Exception)
                    if _ours(c) and not issubclass(c, AutoError) and not c.__name__.startswith("_"))
    assert strays == sorted(internal), "exception classes outside the AutoError tree that the docstring does not name"


def test_the_runtime_names_tool_call_error_once():
    assert auto.errors.ToolCallError is auto_runtime.errors.ToolCallError
