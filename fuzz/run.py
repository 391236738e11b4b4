"""``python -m fuzz.run [TARGET ...] [--seconds S | --runs N] [--seed K]``: run the fuzz targets
under atheris (coverage-guided, libFuzzer) and print a JSON report.

Each target runs in its own child process (``atheris.Fuzz`` ends the process), with the modules
under test instrumented for coverage, its corpus in ``out/fuzz/corpus/<target>/`` (seeded from
:func:`fuzz.targets.Target.seeds` when empty) and every distinct crash saved in
``out/fuzz/crashes/<target>/`` (``finding-<hash>``: the input, and a ``.txt`` with its traceback;
libFuzzer's own ``crash-``/``timeout-``/``oom-`` files for what ends the process). A crash is recorded
and the run goes on, so the report counts the distinct crashes found (by exception type and the
frame that raised), not only the first. Report, one entry per target::

    {"target": ..., "executions": N, "crashes": N, "signatures": [...], "seconds": S, "rc": 0}

Exit code 1 when a target crashed or its child failed, else 0.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "out" / "fuzz"
INSTRUMENTED = ("auto", "auto_runtime")
"""Packages whose code atheris instruments for coverage feedback."""


# ----------------------------------------------------------------------------- child


class _Child:
    """The fuzzing process of one target: counts executions, saves distinct crashes."""

    def __init__(self, name: str, stats: Path, crash_dir: Path) -> None:
        from fuzz.targets import TARGETS

        self.target = TARGETS[name]
        self.allowed = self.target.allowed()
        self.stats, self.crash_dir = stats, crash_dir
        self.execs = 0
        self.signatures: dict[str, str] = {}
        self._last = 0.0

    def one_input(self, data: bytes) -> None:
        self.execs += 1
        try:
            self.target.one_input(data)
        except self.allowed:
            pass
        except Exception as e:  # noqa: BLE001 - every other exception is a finding
            self._crash(data, e)
        now = time.monotonic()
        if now - self._last > 0.5:
            self._last = now
            self.write_stats()

    def _crash(self, data: bytes, e: BaseException) -> None:
        frames = traceback.extract_tb(e.__traceback__)
        where = frames[-1] if frames else None
        sig = f"{type(e).__name__} at {Path(where.filename).name}:{where.lineno}" if where else type(e).__name__
        if sig in self.signatures:
            return
        self.signatures[sig] = str(e)[:500]
        self.crash_dir.mkdir(parents=True, exist_ok=True)
        h = hashlib.sha256(data).hexdigest()[:16]
        (self.crash_dir / f"finding-{h}").write_bytes(data)
        (self.crash_dir / f"finding-{h}.txt").write_text(
            f"{sig}\n\n" + "".join(traceback.format_exception(type(e), e, e.__traceback__)), encoding="utf-8")
        self.write_stats()

    def write_stats(self) -> None:
        tmp = self.stats.with_suffix(".tmp")
        tmp.write_text(json.dumps({"executions": self.execs, "signatures": self.signatures}), encoding="utf-8")
        tmp.replace(self.stats)


def child_main(name: str, stats: str, crash_dir: str, libfuzzer_args: list[str]) -> None:
    """Fuzz one target until libFuzzer's ``-runs``/``-max_total_time`` ends the process."""
    import logging

    import atheris

    logging.disable(logging.CRITICAL)  # the runtime logs each unusable guard it meets; not findings
    with atheris.instrument_imports(include=list(INSTRUMENTED)):
        import auto  # noqa: F401
        import auto.canonical  # noqa: F401
        import auto.codegen  # noqa: F401
        import auto.models.program.regex  # noqa: F401
        import auto.record.body  # noqa: F401
        import auto.record.completion  # noqa: F401
        import auto.store  # noqa: F401
        import auto_runtime  # noqa: F401
        import auto_runtime.wasm_sections  # noqa: F401
    from fuzz.targets import TARGETS

    TARGETS[name].seeds()  # set up (build the seed artifacts) before the clock starts
    child = _Child(name, Path(stats), Path(crash_dir))
    import atexit

    atexit.register(child.write_stats)
    atheris.Setup([sys.argv[0], *libfuzzer_args], child.one_input)
    try:
        atheris.Fuzz()
    finally:
        child.write_stats()


# ----------------------------------------------------------------------------- parent


def run_target(name: str, *, seconds: float | None, runs: int | None, seed: int | None, out: Path = OUT) -> dict:
    """Fuzz ``name`` in a child process; the report entry (see the module docstring)."""
    from fuzz.targets import TARGETS

    corpus, crash_dir = out / "corpus" / name, out / "crashes" / name
    corpus.mkdir(parents=True, exist_ok=True)
    if not any(corpus.iterdir()):
        for s in TARGETS[name].seeds():
            (corpus / hashlib.sha256(s).hexdigest()[:16]).write_bytes(s)
    stats = out / f"stats-{name}.json"
    stats.unlink(missing_ok=True)
    max_len = 262144 if name in ("wasm_sections", "artifact_load") else 65536  # whole artifacts
    args = [str(corpus), "-timeout=60", "-rss_limit_mb=4096", f"-max_len={max_len}", f"-artifact_prefix={crash_dir}/"]
    if runs is not None:
        args.append(f"-runs={runs}")
    if seconds is not None:
        args.append(f"-max_total_time={int(seconds)}")
    if seed is not None:
        args.append(f"-seed={seed}")
    crash_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    limit = None if seconds is None else seconds + 600
    p = subprocess.run([sys.executable, "-m", "fuzz.run", "--child", name, str(stats), str(crash_dir), "--", *args],
                       cwd=ROOT, capture_output=True, text=True, timeout=limit)
    took = round(time.monotonic() - t0, 1)
    st = json.loads(stats.read_text()) if stats.exists() else {"executions": 0, "signatures": {}}
    sigs = dict(st["signatures"])
    # libFuzzer's own findings (a timeout, an out-of-memory, a native crash) end the child and
    # leave their input as crash-/timeout-/oom-<sha1>
    for f in sorted(crash_dir.glob("*")):
        if not f.name.startswith("finding-"):
            sigs.setdefault(f"libFuzzer {f.name.split('-')[0]}: {f.name}", str(f))
    done = [ln for ln in p.stderr.splitlines() if ln.startswith("Done ") and " runs in " in ln]
    execs = int(done[-1].split()[1]) if done else st["executions"]
    return {"target": name, "executions": execs, "crashes": len(sigs), "signatures": sorted(sigs), "seconds": took,
            "rc": p.returncode, "stderr_tail": p.stderr[-1500:] if p.returncode else ""}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--child"]:
        name, stats, crash_dir = argv[1:4]
        child_main(name, stats, crash_dir, argv[5:] if argv[4:5] == ["--"] else argv[4:])
        return 0
    from fuzz.targets import TARGETS

    ap = argparse.ArgumentParser(prog="python -m fuzz.run", description="Fuzz Auto's boundaries (atheris).")
    ap.add_argument("targets", nargs="*", help=f"targets (default: all of {', '.join(TARGETS)})")
    ap.add_argument("--seconds", type=float, default=None, help="seconds per target (default 60 without --runs)")
    ap.add_argument("--runs", type=int, default=None, help="executions per target")
    ap.add_argument("--seed", type=int, default=None, help="libFuzzer seed (repeatable runs)")
    ap.add_argument("--out", type=Path, default=OUT, help="corpora, crashes and stats (default out/fuzz)")
    args = ap.parse_args(argv)
    unknown = [t for t in args.targets if t not in TARGETS]
    if unknown:
        ap.error(f"unknown target(s) {', '.join(unknown)} (choose from {', '.join(TARGETS)})")
    seconds = args.seconds if args.seconds is not None or args.runs is not None else 60.0
    report = [run_target(n, seconds=seconds, runs=args.runs, seed=args.seed, out=args.out) for n in (args.targets or TARGETS)]
    print(json.dumps(report, indent=2))
    return 1 if any(r["crashes"] or r["rc"] for r in report) else 0


if __name__ == "__main__":
    sys.exit(main())
