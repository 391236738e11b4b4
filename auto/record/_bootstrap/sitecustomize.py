"""Auto recording bootstrap (put on PYTHONPATH by ``auto record``; see auto.record.bootstrap).

Starts recording into ``$AUTO_RECORD_STORE`` (optionally grouping untasked model calls under the
task ``$AUTO_RECORD_TASK``), stops at exit, then runs the ``sitecustomize`` this one shadows.
Never breaks the child: a failure to start recording is reported on stderr.
"""

import os
import sys


def _auto_status(**fields):
    """Tell the parent ``auto record`` how recording went: one small JSON file per Python process
    in the folder ``$AUTO_RECORD_STATUS`` (the parent aggregates them after the child exits)."""
    folder = os.environ.get("AUTO_RECORD_STATUS")
    if not folder:
        return
    try:
        import json

        with open(os.path.join(folder, f"{os.getpid()}.json"), "w", encoding="utf-8") as f:
            json.dump({**fields, "pid": os.getpid(), "argv": sys.argv[:3]}, f)
    except OSError:
        pass


def _auto_borrow_packages():
    """Append ``$AUTO_RECORD_SITE_PATHS`` (the folders of the recording Auto's packages) to
    ``sys.path``, after the child's own packages, when this Python's version is
    ``$AUTO_RECORD_PYTHON`` (binary packages are built per version)."""
    want = os.environ.get("AUTO_RECORD_PYTHON")
    if want and want != "%d.%d" % sys.version_info[:2]:
        return
    for p in (os.environ.get("AUTO_RECORD_SITE_PATHS") or "").split(os.pathsep):
        if p and p not in sys.path:
            sys.path.append(p)


def _auto_start_recording():
    store = os.environ.get("AUTO_RECORD_STORE")
    if not store:
        return
    try:
        import atexit

        from auto.record.session import start_recording, stop_recording

        rec = start_recording(store, task=os.environ.get("AUTO_RECORD_TASK") or None)
        _auto_status(started=True, stopped=False, error=None)

        def _stop():
            try:
                stop_recording(rec, at_exit=True)
                _auto_status(started=True, stopped=True, error=None)
            except Exception as exc:  # noqa: BLE001
                sys.stderr.write(f"auto record: {exc}\n")
                _auto_status(started=True, stopped=True, error=f"{type(exc).__name__}: {exc}")

        atexit.register(_stop)
    except Exception as exc:  # noqa: BLE001
        sys.stderr.write(f"auto record: could not start recording into {store}: {type(exc).__name__}: {exc}\n")
        _auto_status(started=False, stopped=False, error=f"{type(exc).__name__}: {exc}")


def _auto_chain_sitecustomize():
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None or os.path.abspath(spec.origin or "") == os.path.abspath(__file__):
        return
    me = sys.modules.get("sitecustomize")
    try:
        module = importlib.util.module_from_spec(spec)
        sys.modules["sitecustomize"] = module
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001
        sys.stderr.write(f"auto record: the shadowed sitecustomize ({spec.origin}) failed: {exc}\n")
    finally:
        if me is not None:
            sys.modules["sitecustomize"] = me


_auto_borrow_packages()
_auto_start_recording()
_auto_chain_sitecustomize()
