"""Package discovery for ``auto-bench`` (the metadata is in ``pyproject.toml``).

The import package ``bench`` is this folder itself, so its subpackages are found here rather than
listed: every folder below this one with an ``__init__.py`` becomes ``bench.<name>``, except the
tests (``tests/``) and a build's leftovers (``build/``). A new family's subpackage cannot be left
out of the wheel; ``tests/test_packaging.py`` checks the built wheel against the source tree.
"""

from setuptools import find_packages, setup

SUBPACKAGES = find_packages(where=".", exclude=["tests", "tests.*", "build", "build.*"])

setup(package_dir={"bench": "."}, packages=["bench", *(f"bench.{name}" for name in SUBPACKAGES)])
