"""The trace store: traces, spans (payloads stored once by digest), eval runs, artifacts, the
ratchet's log — in one SQLite file (via sqlite-utils) or one PostgreSQL database.

Public API::

    Store(path or postgresql:// URI)   open (create, migrate) a store; see auto.store.store.Store
    is_dsn(location), local_path(location)      PostgreSQL URIs; where a store's local files go
    Witness, StoredArtifact, StoredEvalRun, RatchetEvent, EventKind, VerifyReport   its records
    new_trace_id() / new_span_id()  fresh OpenTelemetry-shaped ids (32 / 16 hex digits)
    span_digest(span) / trace_digest(trace)        the content digests ingest stores
    SCHEMA_VERSION, SPAN_FIELDS, TRACE_FIELDS, BUSY_TIMEOUT_MS

Modules: :mod:`auto.store.schema` (tables, migrations, row counters), :mod:`auto.store.normalize`
(fields, ids, digests, checks, row form), :mod:`auto.store.payloads` (content-addressed,
compressed payloads), :mod:`auto.store.tx` and :mod:`auto.store.connection` (SQLite: WAL, busy
retries, transactions, forks), :mod:`auto.store.postgres` and :mod:`auto.store.postgres_schema`
(PostgreSQL), :mod:`auto.store.records` (typed records), :mod:`auto.store.census_sql` (the census
as SQL, which every engine runs). :class:`Store` (:mod:`auto.store.store`, its guarantees) is the
face of its parts: :mod:`auto.store.base` (the open database and the read barrier every read
takes), :mod:`auto.store.ingest`, :mod:`auto.store.reads`, :mod:`auto.store.witnesses`,
:mod:`auto.store.verification`, :mod:`auto.store.evidence` (eval runs, artifacts) and
:mod:`auto.store.ratchet_log`.
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
from auto.store.records import EventKind, RatchetEvent, StoredArtifact, StoredEvalRun, VerifyReport, Witness
from auto.store.schema import MIGRATIONS, SCHEMA_VERSION, STORE_FORMAT
from auto.store.postgres import is_dsn
from auto.store.census_sql import TIER1_SPAN
from auto.store.store import Store, local_path

__all__ = [
    "BUSY_TIMEOUT_MS", "EventKind", "MIGRATIONS", "RatchetEvent", "SCHEMA_VERSION", "SPAN_FIELDS", "SPAN_KINDS", "STATUSES",
    "STORE_FORMAT", "Store", "StoredArtifact", "StoredEvalRun", "TIER1_SPAN", "TRACE_FIELDS", "VerifyReport", "Witness",
    "is_dsn", "local_path", "new_span_id", "new_trace_id", "span_digest", "trace_digest",
]
