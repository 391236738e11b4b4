"""``auto record --store S [--task T] -- cmd ...``: run a child process with recording started.

:func:`run_recorded` puts :data:`BOOTSTRAP_DIR` first on the child's ``PYTHONPATH``; that
directory holds a ``sitecustomize.py`` which Python imports at start-up (unless run with ``-S``,
``-I`` or ``-E``). It reads

* ``AUTO_RECORD_STORE`` — the store path (absolute) or ``postgresql://`` URI, and
* ``AUTO_RECORD_TASK`` — optional: model calls made outside any ``@auto.task`` are grouped
  under one task span named T per process (otherwise they are top-level ``llm`` spans),

starts recording (patching ``openai`` when it is imported), stops at interpreter exit, and then
runs any ``sitecustomize`` that the bootstrap shadows, so an existing one keeps working. Child
Python processes inherit the environment and are recorded too.
"""

from __future__ import annotations

import os
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
    directory that holds the ``auto`` package (last, so the child can import it)."""
    from auto.store.postgres import is_dsn

    env = dict(os.environ if base is None else base)
    env[ENV_STORE] = store if is_dsn(store) else os.path.abspath(store)  # a postgresql:// URI as given
    if task:
        env[ENV_TASK] = task
    else:
        env.pop(ENV_TASK, None)
    auto_parent = str(Path(__file__).resolve().parents[2])
    parts = [BOOTSTRAP_DIR] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != BOOTSTRAP_DIR]
    if auto_parent not in parts:
        parts.append(auto_parent)
    env["PYTHONPATH"] = os.pathsep.join(parts)
    return env


def run_recorded(cmd: list[str], store: str, task: str | None = None) -> int:
    """Run ``cmd`` with recording into ``store``; return the child's exit code.

    The store is opened (created, schema-checked) and every page of it read
    (:meth:`~auto.store.Store.check`) before the child starts, so a bad store fails fast and the
    child never runs into it. A child killed by signal N returns ``128 + N`` (shell convention).

    Raises:
        ArgumentError: empty command, or the program is not found / not executable.
        NotAStore, SchemaTooNew, StoreError: the store cannot be used (corrupt included).
        RecordError: no Python process of the child recorded, or one lost spans.
    """
    if not cmd:
        raise ArgumentError("auto record: no command given (usage: auto record --store S -- python agent.py)")
    from auto.store import Store

    import json
    import tempfile

    with Store(store) as st:
        st.check()
    env = recording_env(store, task)
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
