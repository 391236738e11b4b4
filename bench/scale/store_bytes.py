"""Bytes per span against the canonical payload, schema 3 vs the schema-2 layout, on the triage store.

Records the triage agent twice over its 400 training tickets against the simulator (as the tests'
store), then writes the same spans and traces into a schema-2 layout (JSON columns inline, the
layout before payloads) and reports, for both: file bytes (after a WAL checkpoint and VACUUM) per
span, and the ratio to the canonical payload — the canonical JSON of each span's content fields
(what its digest is over), traces' likewise, per span.

    python -m bench.scale.store_bytes
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import tempfile


def record(path: str) -> None:
    import auto
    from auto.store import Store
    from bench.sim import SimServer
    from bench.triage import agent, corpus

    with SimServer(seed=0) as sim:
        os.environ["OPENAI_BASE_URL"] = sim.base_url
        os.environ["OPENAI_API_KEY"] = "sk-bench-not-a-key"
        agent.reset_client()
        with Store(path) as st, auto.recording(st):
            for _ in range(2):
                for t in corpus.default_corpus(seed=0)["train"]:
                    agent.triage(t.ticket)


def v2_copy(src: str, dst: str) -> None:
    import sqlite_utils

    from auto.canonical import canonical_json
    from auto.store import Store
    from auto.store.schema import MIGRATIONS

    db = sqlite_utils.Database(dst)
    for version, step in MIGRATIONS[:2]:
        step(db)
        db["meta"].upsert({"key": "schema_version", "value": str(version)}, pk="key")
    with Store(src) as st:
        rows = []
        for s in st.spans():
            r = dict(s)
            for f in ("input", "output", "error", "attributes"):
                r[f] = None if s[f] is None else canonical_json(s[f])
            rows.append(r)
        db["spans"].insert_all(rows)
        db["traces"].insert_all([{**t, "attributes": canonical_json(t["attributes"])} for t in st.traces()])
    db.conn.commit()
    db.conn.close()


def compact_size(path: str) -> int:
    con = sqlite3.connect(path)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.execute("VACUUM")
    con.close()
    return sum(os.path.getsize(path + s) for s in ("", "-wal") if os.path.exists(path + s))


def main(argv: list[str] | None = None) -> int:
    from auto.canonical import canonical_json
    from auto.store import SPAN_FIELDS, TRACE_FIELDS, Store

    d = tempfile.mkdtemp()
    v3, v2 = os.path.join(d, "v3.sqlite"), os.path.join(d, "v2.sqlite")
    record(v3)
    v2_copy(v3, v2)
    with Store(v3) as st:
        spans, traces = st.spans(), st.traces()
        payload_spans = sum(len(canonical_json({f: s[f] for f in SPAN_FIELDS}).encode()) for s in spans)
        payload_traces = sum(len(canonical_json({f: t[f] for f in TRACE_FIELDS}).encode()) for t in traces)
        counts = st.counts()
    n = len(spans)
    canon = (payload_spans + payload_traces) / n
    out = {"spans": n, "traces": len(traces), "payloads": counts["payloads"],
           "canonical_payload_bytes_per_span": round(payload_spans / n, 1),
           "canonical_payload_with_traces_bytes_per_span": round(canon, 1)}
    for name, path in (("schema2", v2), ("schema3", v3)):
        b = compact_size(path)
        out[name] = {"bytes": b, "bytes_per_span": round(b / n, 1), "ratio_to_canonical_payload": round(b / n / canon, 3)}
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
