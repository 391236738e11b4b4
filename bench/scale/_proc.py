"""Run a command and measure it: wall time (s) and peak RSS (MB, ``wait4``'s ``ru_maxrss``)."""

from __future__ import annotations

import os
import subprocess
import sys
import time


def measured(cmd: list[str], stdout_path: str | None = None) -> dict:
    """Run ``cmd`` (stdout to ``stdout_path`` or discarded; stderr passed through); returns
    ``{"seconds", "peak_rss_mb", "rc", "load_before", "load_after"}``."""
    load0 = os.getloadavg()[0]
    out = open(stdout_path, "wb") if stdout_path else subprocess.DEVNULL
    try:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=out)  # stderr: this process's
        _pid, status, ru = os.wait4(p.pid, 0)
        el = time.perf_counter() - t0
    finally:
        if stdout_path:
            out.close()
    return {"seconds": round(el, 2), "peak_rss_mb": round(ru.ru_maxrss / 1024, 1),
            "rc": os.waitstatus_to_exitcode(status), "load_before": round(load0, 2),
            "load_after": round(os.getloadavg()[0], 2)}


def auto_cmd(*args: str) -> list[str]:
    """``auto ARGS`` run with this interpreter."""
    return [sys.executable, "-m", "auto.cli", *args]
