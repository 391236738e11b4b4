"""The proxy's store writer: a child process that ingests batches of spans into the store.

``python -m auto.proxy.writer`` opens the store the environment variable :data:`WRITER_STORE_ENV`
names (an SQLite path or a ``postgresql://`` URI, whose password so stays off the command line
that every user of the host can read), reads batches from standard input, each a 4-byte
big-endian length and a pickle of ``[(spans, traces), ...]`` (written by
:class:`auto.proxy.recording.QueuedRecorder`, the only writer of that pipe), ingests each batch
in one transaction (a batch the store rejects is retried item by item, so one bad span loses
only itself), and answers each on standard output with one JSON line
``[items, spans, [error messages]]``. It runs in its own session, so an interrupt aimed at the
proxy's process group does not stop it mid-batch: it ends when its input ends (the proxy closed
it, or died), after writing what it received.
"""

from __future__ import annotations

import json
import os
import pickle
import struct
import sys
from typing import BinaryIO

from auto.record.core import Recorder
from auto.store import Store

HEADER = struct.Struct(">I")

WRITER_STORE_ENV = "AUTO_PROXY_WRITER_STORE"
"""Environment variable naming the store the writer opens (see the module docstring)."""


def read_batch(stream: BinaryIO) -> list | None:
    """The next batch on ``stream``, or None at its end."""
    head = stream.read(HEADER.size)
    if len(head) < HEADER.size:
        return None
    (n,) = HEADER.unpack(head)
    data = stream.read(n)
    if len(data) < n:
        return None
    return pickle.loads(data)


def main(argv: list[str]) -> int:
    store = Store(os.environ[WRITER_STORE_ENV])
    rec = Recorder(store, owns_store=False)
    out = sys.stdout
    try:
        while True:
            batch = read_batch(sys.stdin.buffer)
            if batch is None:
                return 0
            spans = [sp for s, _ in batch for sp in s]
            traces = [t for _, tr in batch for t in tr]
            errors: list[str] = []
            try:
                store.ingest(spans, traces)
            except Exception:  # noqa: BLE001 - retried one by one: one bad span loses only itself
                before = len(rec.write_errors)
                for s, tr in batch:
                    rec.write(s, tr)
                errors = rec.write_errors[before:]
            out.write(json.dumps([len(batch), len(spans), errors]) + "\n")
            out.flush()
    finally:
        store.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
