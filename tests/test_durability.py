"""Nothing acknowledged is lost: ``wait_durable`` says False for a batch that was not stored (a
full disk) and does not block through a database outage; a short journal write is undone; a torn
journal record is reported at replay and the records after it are still replayed."""

from __future__ import annotations

import logging
import os
import threading

import pytest

from auto.errors import StoreError
from auto.record import writer as writer_mod
from auto.record.writer import SpanWriter
from auto.store import journal as journal_mod
from auto.store.journal import MAGIC, Journal, records, replay


class FakeStore:
    """A store whose ingest fails (``fail``) or blocks until ``release`` is set."""

    def __init__(self, fail: BaseException | None = None, block: bool = False) -> None:
        self.fail, self.block = fail, block
        self.release = threading.Event()
        self.got: list = []

    def ingest(self, spans, traces):
        if self.block:
            self.release.wait(60)
        if self.fail is not None:
            raise self.fail
        self.got.append(spans)


class FullJournal:
    def append(self, spans, traces):
        raise OSError(28, "No space left on device")

    def truncate(self):
        pass

    def close(self):
        pass


def _writer(store, journal):
    errors: list = []
    return SpanWriter(store, on_written=lambda n: None, on_error=lambda n, e: errors.append(e), journal=journal), errors


def test_disk_full_makes_wait_durable_false():
    w, errors = _writer(FakeStore(fail=StoreError("database or disk is full")), FullJournal())
    w.submit([{"span_id": "a"}], [])
    assert w.wait_durable(10) is False  # neither journaled nor written
    assert errors and "full" in str(errors[0])
    w.close()


def test_a_journaled_batch_is_durable_while_the_database_fails(tmp_path):
    w, errors = _writer(FakeStore(fail=StoreError("server down")), Journal(tmp_path / "j"))
    w.submit([{"span_id": "a"}], [])
    assert w.wait_durable(10) is True  # in the journal: replayed at the next open
    w.flush(10)
    assert errors and w.wait_durable(10) is True
    w.close()
    assert list((tmp_path / "j").glob("*.journal"))  # kept for the replay


def test_wait_durable_returns_during_a_database_outage(tmp_path, monkeypatch):
    monkeypatch.setattr(writer_mod, "DURABLE_WAIT_S", 0.3)
    store = FakeStore(block=True)
    w, _ = _writer(store, Journal(tmp_path / "j"))
    w.submit([{"span_id": "a"}], [])
    assert w.wait_durable(10)
    w.flush(0.2)  # the writer thread is now held in the commit's retries
    w.submit([{"span_id": "b"}], [])  # not journaled while the thread is held
    out: list = []
    t = threading.Thread(target=lambda: out.append(w.wait_durable()), daemon=True)
    t.start()
    t.join(20)
    try:
        assert not t.is_alive() and out == [False]
    finally:
        store.release.set()
        w.close()


def test_a_short_write_is_undone_and_later_records_stay_readable(tmp_path, monkeypatch):
    j = Journal(tmp_path / "j")
    j.append([{"n": 1}], [])
    real = os.write
    monkeypatch.setattr(journal_mod.os, "write", lambda fd, b: real(fd, b[: len(b) // 2]))
    with pytest.raises(OSError, match="short write"):
        j.append([{"n": 2}], [])
    monkeypatch.setattr(journal_mod.os, "write", real)
    j.append([{"n": 3}], [])
    torn: list = []
    got = records(j.path.read_bytes(), torn)
    assert [b["spans"][0]["n"] for b in got] == [1, 3] and torn == []


def test_a_torn_record_is_reported_at_replay_and_the_rest_replayed(tmp_path, caplog):
    import marshal

    def rec(n):
        body = marshal.dumps({"spans": [{"n": n}], "traces": []})
        return MAGIC + len(body).to_bytes(4, "little") + body

    folder = tmp_path / "j"
    folder.mkdir()
    torn_bytes = rec(2)[:-5]
    (folder / "dead-1-aa.journal").write_bytes(rec(1) + torn_bytes + rec(3))
    seen: list = []
    before = len(journal_mod.TORN)
    with caplog.at_level(logging.ERROR, logger="auto"):
        n = replay(folder, lambda spans, traces: seen.extend(s["n"] for s in spans))
    assert seen == [1, 3] and n == 2
    assert journal_mod.TORN[before:] == [(str(folder / "dead-1-aa.journal"), len(rec(1)), len(torn_bytes))]
    assert any("torn record" in r.message for r in caplog.records)
