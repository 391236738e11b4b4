"""Verification while recorders write: ``Store.verify`` and a compile's witness read see one
consistent snapshot, so recorders committing meanwhile never look like a mismatch."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

from auto.canonical import digest
from auto.store import Store

RECORDER = textwrap.dedent("""
    import sys
    import auto

    @auto.task("t")
    def t(i: int, text: str) -> str:
        with auto.tool("step", input={"i": i}) as s:
            s.output = i % 3
        return text[::-1]

    with auto.recording(sys.argv[1]):
        for i in range(int(sys.argv[2])):
            t(i, "ticket %d %s" % (i, sys.argv[3]))
    print("done", flush=True)
""")


def test_verify_and_witness_reads_while_recorders_write(tmp_path):
    path = tmp_path / "s.sqlite"
    Store(path).close()
    script = tmp_path / "rec.py"
    script.write_text(RECORDER)
    n_procs, n_tasks = 3, 250
    procs = [subprocess.Popen([sys.executable, str(script), str(path), str(n_tasks), f"p{k}"], stdout=subprocess.PIPE,
                              text=True) for k in range(n_procs)]
    reports = []
    try:
        with Store(path) as st:
            while any(p.poll() is None for p in procs) or not reports:
                rep = st.verify()
                reports.append(rep)
                assert rep.ok, rep.mismatches[:5]
                ws, _d = st.task_witnesses("t")  # a compile's read: one snapshot too, never an error
                assert all(w.output == w.input["text"][::-1] for w in ws)
                time.sleep(0.01)
    finally:
        for p in procs:
            p.wait(timeout=120)
    assert all(p.returncode == 0 for p in procs)
    assert len(reports) >= 3, "verification must overlap the writing"
    assert any(0 < r.spans < 2 * n_procs * n_tasks for r in reports), "at least one verify saw a partial store"
    with Store(path) as st:
        final = st.verify()
        ws, d = st.task_witnesses("t")
        assert final.ok and final.spans == 2 * n_procs * n_tasks and len(ws) == n_procs * n_tasks
        assert d == st.digest("t") == digest([s["digest"] for s in st.spans(task="t")])
