"""Build the wheels of the three distributions from a clean copy of their sources.

``python .ci/wheels.py OUT_DIR [--no-build-isolation]`` writes ``auto_runtime-*.whl``,
``auto-*.whl`` and ``auto_bench-*.whl`` into ``OUT_DIR`` and prints their paths, one a line.

Each distribution's sources are copied first (without ``build/``, ``*.egg-info``, ``__pycache__``
and virtual environments), because setuptools builds in the source tree and reuses a ``build/lib``
it finds there: a module deleted since the last build would otherwise still ship. With
``--no-build-isolation`` the build backend of the running interpreter is used (no download);
without it pip installs the backend that each ``pyproject.toml`` asks for, as a user's
``pip install`` does. ``tests/test_packaging.py`` imports :func:`build_wheels`.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

DISTRIBUTIONS: dict[str, tuple[Path, tuple[str, ...]]] = {
    # name -> (project folder, what of it the build reads)
    "auto-runtime": (REPO / "runtime", ("pyproject.toml", "auto_runtime")),
    "auto": (REPO, ("pyproject.toml", "README.md", "auto")),
    "auto-bench": (REPO / "bench", ("pyproject.toml", "setup.py", "*")),
}
"""Distribution name -> its project folder and the entries to copy (``*``: the whole folder)."""

_IGNORE = shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__", ".venv*", "tests", "out")


def _copy_project(src: Path, entries: tuple[str, ...], dst: Path) -> None:
    if "*" in entries:
        shutil.copytree(src, dst, ignore=_IGNORE)
        return
    dst.mkdir(parents=True)
    for name in entries:
        p = src / name
        if p.is_dir():
            shutil.copytree(p, dst / name, ignore=_IGNORE)
        else:
            shutil.copy2(p, dst / name)


def build_wheels(out_dir: Path, *, isolation: bool = True, names: tuple[str, ...] | None = None) -> dict[str, Path]:
    """Build the wheels of ``names`` (default: all three) into ``out_dir``.

    Returns:
        distribution name -> the wheel's path.

    Raises:
        subprocess.CalledProcessError: a build failed (pip's output is on stderr).
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    built: dict[str, Path] = {}
    with tempfile.TemporaryDirectory(prefix="auto-wheels-") as tmp:
        for name in names or tuple(DISTRIBUTIONS):
            src, entries = DISTRIBUTIONS[name]
            # the bench's import package is its folder, so the copy keeps the folder's name
            project = Path(tmp) / name / src.name
            _copy_project(src, entries, project)
            before = set(out_dir.glob("*.whl"))
            cmd = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(out_dir), str(project)]
            if not isolation:
                cmd.insert(4, "--no-build-isolation")
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            stem = name.replace("-", "_")
            new = [p for p in set(out_dir.glob(f"{stem}-*.whl")) - before] or sorted(out_dir.glob(f"{stem}-*.whl"))
            built[name] = new[0]
    return built


def main(argv: list[str]) -> int:
    args = [a for a in argv if not a.startswith("--")]
    if len(args) != 1 or any(a not in ("--no-build-isolation",) for a in argv if a.startswith("--")):
        print("usage: python .ci/wheels.py OUT_DIR [--no-build-isolation]", file=sys.stderr)
        return 2
    for path in build_wheels(Path(args[0]), isolation="--no-build-isolation" not in argv).values():
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
