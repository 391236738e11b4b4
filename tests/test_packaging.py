"""Every package of the source tree ships in its distribution's wheel, with its data files.

The three wheels are built from clean copies of the sources (``.ci/wheels.py``, with the build
backend already installed: no download) and listed. A package is a folder with an
``__init__.py`` under ``runtime/auto_runtime/``, ``auto/`` or ``bench/`` (except ``bench/tests``);
a data file is any other file of such a folder that is not Python and not documentation (for
example the code generator's ``.wat`` files, the kernel-tuning family's scripts, a family's
compressed corpus). ``make test-wheels`` goes further: it installs the wheels into a fresh virtual
environment and runs a command of every bench family.
"""

from __future__ import annotations

import importlib.util
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

SOURCES = {
    # distribution -> (folder holding the import package, the import package's folder name)
    "auto-runtime": (REPO / "runtime", "auto_runtime"),
    "auto": (REPO, "auto"),
    "auto-bench": (REPO, "bench"),
}
_NOT_SHIPPED = {"tests", "build", "dist", "__pycache__"}
_NOT_DATA = {".py", ".pyc", ".md"}
_PROJECT_FILES = {"pyproject.toml", "setup.py"}


def _load_builder():
    spec = importlib.util.spec_from_file_location("ci_wheels", REPO / ".ci" / "wheels.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def source_tree(root: Path, package: str) -> tuple[set[str], set[str]]:
    """(dotted packages, data files relative to ``root``) of the import package ``root/package``."""
    packages: set[str] = set()
    data: set[str] = set()
    top = root / package
    for init in top.rglob("__init__.py"):
        rel = init.parent.relative_to(root)
        if _NOT_SHIPPED & set(rel.parts) or any(p.endswith(".egg-info") for p in rel.parts):
            continue
        packages.add(".".join(rel.parts))
    for pkg in packages:
        folder = root.joinpath(*pkg.split("."))
        for f in folder.iterdir():
            if f.is_file() and f.suffix not in _NOT_DATA and not (folder == top and f.name in _PROJECT_FILES):
                data.add(f.relative_to(root).as_posix())
    return packages, data


def wheel_tree(wheel: Path) -> tuple[set[str], set[str]]:
    """(dotted packages, non-Python files) in a wheel, the ``*.dist-info`` folder left out."""
    names = [n for n in zipfile.ZipFile(wheel).namelist() if ".dist-info/" not in n]
    packages = {".".join(n.split("/")[:-1]) for n in names if n.endswith("/__init__.py")}
    data = {n for n in names if Path(n).suffix not in _NOT_DATA}
    return packages, data


PROBE = "zz_probe_family"
"""A subpackage added to the bench copy before its build, with a compressed corpus: discovery,
not a list, must ship it (as it ships a family added later)."""


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, tuple[Path, Path, Path]]:
    """distribution -> (wheel, folder holding the import package, the package's folder name)."""
    builder = _load_builder()
    tmp = tmp_path_factory.mktemp("packaging")
    bench = tmp / "src" / "bench"
    builder._copy_project(REPO / "bench", ("*",), bench)
    (bench / PROBE).mkdir()
    (bench / PROBE / "__init__.py").write_text('"""A family added later."""\n')
    (bench / PROBE / "corpus.jsonl.gz").write_bytes(b"\x1f\x8b")
    builder.DISTRIBUTIONS = {**builder.DISTRIBUTIONS, "auto-bench": (bench, ("*",))}
    wheels = builder.build_wheels(tmp / "wheels", isolation=False)
    sources = {**SOURCES, "auto-bench": (bench.parent, "bench")}
    return {d: (wheels[d], *sources[d]) for d in SOURCES}


@pytest.mark.parametrize("dist", sorted(SOURCES))
def test_every_package_and_data_file_is_in_the_wheel(built, dist):
    wheel, root, package = built[dist]
    src_packages, src_data = source_tree(root, package)
    whl_packages, whl_data = wheel_tree(wheel)
    assert package in src_packages and len(src_packages) > 1
    assert sorted(src_packages - whl_packages) == [], f"{dist}: packages left out of the wheel"
    assert sorted(whl_packages - src_packages) == [], f"{dist}: the wheel ships packages that are not in the source"
    assert sorted(src_data - whl_data) == [], f"{dist}: data files left out of the wheel"


def test_the_bench_wheel_ships_a_new_subpackage_and_its_compressed_corpus(built):
    packages, data = wheel_tree(built["auto-bench"][0])
    assert f"bench.{PROBE}" in packages and f"bench/{PROBE}/corpus.jsonl.gz" in data
    assert {"bench.inbox", "bench.assistant", "bench.scale"} <= packages
    assert not any(p.startswith("bench.tests") for p in packages)
