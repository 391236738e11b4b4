"""The trace store: one SQLite file (via sqlite-utils) holding traces, spans, eval runs, artifacts.

Public API::

    Store(path)                     open (create, migrate) a store; see auto.store.store.Store
    Witness, StoredArtifact, VerifyReport          the records it returns
    new_trace_id() / new_span_id()  fresh OpenTelemetry-shaped ids (32 / 16 hex digits)
    span_digest(span) / trace_digest(trace)        the content digests ingest stores
    SCHEMA_VERSION, SPAN_FIELDS, TRACE_FIELDS, BUSY_TIMEOUT_MS

Modules: :mod:`auto.store.schema` (tables, migrations, row counters), :mod:`auto.store.normalize`
(fields, ids, digests, checks, row form), :mod:`auto.store.connection` (WAL, busy retries,
transactions, forks), :mod:`auto.store.records` (typed records), :mod:`auto.store.store` (the
API and its guarantees).
"""

from auto.store.connection import BUSY_TIMEOUT_MS
from auto.store.normalize import (
    SPAN_FIELDS,
    SPAN_KINDS,
    STATUSES,
    TRACE_FIELDS,
    new_span_id,
    new_trace_id,
    span_digest,
    trace_digest,
)
from auto.store.records import StoredArtifact, VerifyReport, Witness
from auto.store.schema import MIGRATIONS, SCHEMA_VERSION, STORE_FORMAT
from auto.store.store import Store

__all__ = [
    "BUSY_TIMEOUT_MS", "MIGRATIONS", "SCHEMA_VERSION", "SPAN_FIELDS", "SPAN_KINDS", "STATUSES",
    "STORE_FORMAT", "Store", "StoredArtifact", "TRACE_FIELDS", "VerifyReport", "Witness",
    "new_span_id", "new_trace_id", "span_digest", "trace_digest",
]
