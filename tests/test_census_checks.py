"""``auto census`` checks what it reads: a payload changed behind the store's back (its bytes no
longer match its digest) is refused in one line, not counted."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import pytest

from auto.errors import IntegrityError
from auto.store import Store

from site_fixtures import label_of, site_words, ticket_call


def _tamper(path, old: str, new: str) -> int:
    """Rewrite every raw payload holding ``old`` so it holds ``new`` (triggers dropped first)."""
    db = sqlite3.connect(path)
    for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
        db.execute(f'DROP TRIGGER "{name}"')
    n = 0
    for pid, body in db.execute("SELECT id, body FROM payloads WHERE codec = 0").fetchall():
        if old.encode() in bytes(body):
            db.execute("UPDATE payloads SET body = ? WHERE id = ?", (bytes(body).replace(old.encode(), new.encode()), pid))
            n += 1
    db.commit()
    db.close()
    return n


def test_a_changed_payload_is_refused_by_the_census(tmp_path):
    from auto.census import census_store

    path = tmp_path / "c.sqlite"
    with Store(path) as st:
        st.ingest([ticket_call(w, label_of(w)) for w in site_words()])
        before = census_store(st)
        assert before.sites
    assert _tamper(path, '"billing"', '"bugged!"') > 0
    with Store(path) as st:
        with pytest.raises(IntegrityError, match="does not match its digest"):
            census_store(st)
    p = subprocess.run([sys.executable, "-m", "auto.cli", "census", "--store", str(path)], capture_output=True,
                       text=True, timeout=120)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 1 and len(lines) == 1 and "does not match its digest" in lines[0], p.stderr
