"""``auto record --store S [--task T] -- cmd ...``: run a child process with recording started.

:func:`run_recorded` puts :data:`BOOTSTRAP_DIR` first on the child's ``PYTHONPATH``; that
directory holds a ``sitecustomize.py`` which Python imports at start-up (unless run with ``-S``,
``-I`` or ``-E``). It reads

* ``AUTO_RECORD_STORE`` — the store path (absolute) or ``postgresql://`` URI, and
* ``AUTO_RECORD_TASK`` — optional: model calls made outside any ``@auto.task`` are grouped
  under one task span named T per process (otherwise they are top-level ``llm`` spans),
* ``AUTO_RECORD_SITE_PATHS`` and ``AUTO_RECORD_PYTHON`` — this interpreter's package folders
  and its version (``3.11``): a Python process of the child of the same version appends the
  folders to its ``sys.path`` after its own packages, so Auto's dependencies load in another
  virtual environment too, whether its interpreter is the command itself or is started by a
  shell, a script or another process (binary packages are only borrowed by the version they
  were built for). When the command itself is another Python interpreter, it is asked to load
  the recorder before the child runs; when it cannot (another Python version, a package of its
  own that shadows one Auto needs), ``auto record`` says so in one line and runs nothing,

starts recording (patching ``openai`` when it is imported), stops at interpreter exit, and then
runs any ``sitecustomize`` that the bootstrap shadows, so an existing one keeps working. Child
Python processes inherit the environment and are recorded too.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from auto.errors import RecordError, ArgumentError

BOOTSTRAP_DIR = str(Path(__file__).resolve().parent / "_bootstrap")
"""The directory holding the bootstrap ``sitecustomize.py``."""

ENV_STORE = "AUTO_RECORD_STORE"
ENV_TASK = "AUTO_RECORD_TASK"
ENV_SITE_PATHS = "AUTO_RECORD_SITE_PATHS"
"""The folders of this interpreter's packages, which the bootstrap appends to a child's
``sys.path`` (after its own packages) when the child's Python version is :data:`ENV_PYTHON`'s."""

ENV_PYTHON = "AUTO_RECORD_PYTHON"
"""This interpreter's ``major.minor`` version: only a child Python of that version borrows
:data:`ENV_SITE_PATHS` (binary packages are built per version)."""


INTERRUPT_GRACE_S = 1.0
"""After a SIGINT to ``auto record``, how long the child has to end on its own (a terminal's
Ctrl-C reaches the whole foreground process group, the child included) before the SIGINT is
forwarded to it (a ``kill -INT`` of ``auto record`` alone reaches only the parent)."""

INTERRUPT_WAIT_S = 10.0
"""How long an interrupted child has to write its spans and exit before it is killed."""


def _stop_child(proc: subprocess.Popen) -> int:
    """The exit status of an interrupted child: let it end on its own, then forward SIGINT, then
    SIGKILL (see :data:`INTERRUPT_GRACE_S`, :data:`INTERRUPT_WAIT_S`)."""
    try:
        return proc.wait(timeout=INTERRUPT_GRACE_S)
    except subprocess.TimeoutExpired:
        pass
    proc.send_signal(signal.SIGINT)
    try:
        return proc.wait(timeout=INTERRUPT_WAIT_S)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        return proc.wait()


def recording_env(store: str, task: str | None = None, base: dict | None = None) -> dict[str, str]:
    """The environment for a recorded child: ``base`` (default ``os.environ``) plus the
    ``AUTO_RECORD_*`` variables and a ``PYTHONPATH`` of bootstrap dir + existing entries + the
    directories that hold the ``auto`` and ``auto_runtime`` packages (last, so the child can
    import them)."""
    from auto.store.postgres import is_dsn

    env = dict(os.environ if base is None else base)
    env[ENV_STORE] = store if is_dsn(store) else os.path.abspath(store)  # a postgresql:// URI as given
    if task:
        env[ENV_TASK] = task
    else:
        env.pop(ENV_TASK, None)
    import auto_runtime

    auto_parent = str(Path(__file__).resolve().parents[2])
    runtime_parent = str(Path(auto_runtime.__file__).resolve().parents[1])
    parts = [BOOTSTRAP_DIR] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != BOOTSTRAP_DIR]
    for extra in (auto_parent, runtime_parent):
        if extra not in parts:
            parts.append(extra)
    env["PYTHONPATH"] = os.pathsep.join(parts)
    return env


PYTHON_NAME = re.compile(r"python(\d+(\.\d+)?)?(\.exe)?")
"""What a command named as a Python interpreter looks like (``python``, ``python3``, ``python3.12``)."""


def foreign_python(program: str) -> str | None:
    """The path of ``program`` when it is a Python interpreter other than this one (another
    virtual environment, another version), else None."""
    if not PYTHON_NAME.fullmatch(os.path.basename(program)):
        return None
    exe = shutil.which(program)
    if exe is None or os.path.abspath(exe) == os.path.abspath(sys.executable):
        return None
    return exe


def auto_site_paths() -> tuple[str, ...]:
    """The folders this interpreter's installed packages are in (Auto's dependencies), for a
    child interpreter that lacks them (usable when its Python version is this one's)."""
    import sysconfig

    paths = sysconfig.get_paths()
    return tuple(dict.fromkeys(p for p in (paths.get("purelib"), paths.get("platlib")) if p))


def check_child_python(program: str, exe: str, env: dict[str, str]) -> None:
    """Check that the child's interpreter can import the recorder with the recording
    environment (``env``, without the store: nothing is recorded), before the child runs.

    Raises:
        RecordError: it cannot; one line naming what it needs.
    """
    probe = {k: v for k, v in env.items() if k not in (ENV_STORE, "AUTO_RECORD_STATUS")}
    try:
        p = subprocess.run([exe, "-c", "import sys, auto.record.session; print('%d.%d' % sys.version_info[:2])"],
                           env=probe, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise RecordError(f"auto record: cannot start {program} ({exe}): {e}") from None
    if p.returncode == 0:
        return
    why = (p.stderr.strip().splitlines() or ["it exited " + str(p.returncode)])[-1]
    mine = "%d.%d" % sys.version_info[:2]
    raise RecordError(
        f"auto record: {program} ({exe}) cannot load the recorder ({why}); it needs Auto installed in its "
        f"environment (pip install auto), or Python {mine} to borrow this one's; or run the agent with "
        f"{sys.executable}, or record any client through `auto proxy`")


def _check_program(program: str) -> None:
    """Raise :class:`ArgumentError` when ``program`` (a name looked up on ``PATH``, or a path)
    cannot be started: not found, or not executable."""
    if shutil.which(program) is not None:
        return
    if os.sep in program and os.path.exists(program):
        raise ArgumentError(f"auto record: command not executable: {program}")
    raise ArgumentError(f"auto record: command not found: {program}")


def run_recorded(cmd: list[str], store: str, task: str | None = None) -> int:
    """Run ``cmd`` with recording into ``store``; return the child's exit code.

    The store is opened (created, schema-checked) and every page of it read
    (:meth:`~auto.store.Store.check`) before the child starts, so a bad store fails fast and the
    child never runs into it. A child killed by signal N returns ``128 + N`` (shell convention).

    Raises:
        ArgumentError: empty command, or the program is not found / not executable.
        NotAStore, SchemaTooNew, StoreError: the store cannot be used (corrupt included).
        RecordError: the child's Python interpreter (another virtual environment or version)
            cannot load the recorder (checked before it runs: one line saying what it needs); no
            Python process of the child recorded, or one lost spans.
    """
    if not cmd:
        raise ArgumentError("auto record: no command given (usage: auto record --store S -- python agent.py)")
    from auto.store import Store

    import json
    import tempfile

    _check_program(cmd[0])  # before the store is opened: a command that cannot start writes nothing
    child_python = foreign_python(cmd[0])
    env = recording_env(store, task)
    # Auto's dependencies for any Python of the child of this version, after its own packages
    # (the bootstrap appends them): the command itself or one a shell or script starts
    env[ENV_SITE_PATHS] = os.pathsep.join(auto_site_paths())
    env[ENV_PYTHON] = "%d.%d" % sys.version_info[:2]
    if child_python:
        check_child_python(cmd[0], child_python, env)
    with Store(store) as st:
        st.check()
    status_dir = tempfile.mkdtemp(prefix="auto-record-")
    env["AUTO_RECORD_STATUS"] = status_dir
    try:
        proc = subprocess.Popen(list(cmd), env=env)
    except FileNotFoundError:
        raise ArgumentError(f"auto record: command not found: {cmd[0]}") from None
    except PermissionError:
        raise ArgumentError(f"auto record: command not executable: {cmd[0]}") from None
    try:
        rc = proc.wait()
    except KeyboardInterrupt:
        rc = _stop_child(proc)
    code = 128 - rc if rc < 0 else rc
    statuses = []
    for name in sorted(os.listdir(status_dir)):
        try:
            with open(os.path.join(status_dir, name), encoding="utf-8") as f:
                statuses.append(json.loads(f.read()))
        except (OSError, ValueError):
            pass
    shutil.rmtree(status_dir, ignore_errors=True)
    failed = [st for st in statuses if not st.get("started") or st.get("error")]
    if not statuses:
        if rc < 0:  # killed before any Python process reported: completed spans are in the store
            return code
        raise RecordError(
            f"no Python process of the child recorded anything (child exit code {code}): it ran no Python with "
            f"Auto installed, or ran with -I/-S/-E; run Python with the interpreter that has Auto (e.g. {sys.executable})")
    if failed:
        st = failed[0]
        started = bool(st.get("started"))
        hint = ("the store could not take the spans: fix what the error names (the store was checked sound when "
                "the child started)" if started else
                f"run Python with the interpreter that has Auto installed (e.g. {sys.executable})")
        raise RecordError(f"recording {'lost data' if started else 'could not start'} in {len(failed)} of "
                          f"{len(statuses)} Python process(es) of the child (child exit code {code}; first: pid "
                          f"{st.get('pid')} {st.get('argv')}: {st.get('error')}); {hint}")
    return code
