"""The store's one redaction choke point: every span and trace is redacted as it is ingested.

Every writer reaches the store through :meth:`auto.store.Store.ingest` (the recorder and its
journal replay, ``auto proxy``'s writer process, ``auto serve``'s and the ratchet's witness
captures through :meth:`~auto.store.Store.add_witness`, ``TieredTask(capture=store.add_witness)``,
the OTLP and Parquet imports), and ingest passes what it is given through
:func:`redact_records` first, so no writer can store a secret the redactor knows, whether or
not it redacted on its own. The redactor is :class:`auto.record.redact.Redactor` (one per
process, so its memory of strings found clean is shared by every store of the process): by
pattern (the well-known key formats) and by value (secret-named environment variables), over
the span's ``name``, ``task``, ``site``, ``input``, ``output``, ``error`` and ``attributes``
(keys included) and the trace's ``name`` and ``attributes``.

A record the redactor changed loses any ``digest`` it came with: the stored digest is that of
the redacted content (what the store holds), computed by ingest as for any record without one.
Writers that redact before journaling (the recorder, the proxy) pay for a second scan here,
mostly answered from the clean-string memory.
"""

from __future__ import annotations

import threading
from typing import Any, Iterable

_REDACTOR: Any = None
_LOCK = threading.Lock()


def ingest_redactor() -> Any:
    """The process's :class:`auto.record.redact.Redactor` used at ingest (made on first use)."""
    global _REDACTOR
    if _REDACTOR is None:
        with _LOCK:
            if _REDACTOR is None:
                from auto.record.redact import Redactor  # (auto.record imports the store: not at module level)

                _REDACTOR = Redactor()
    return _REDACTOR


def redact_records(records: Iterable[Any], as_dict: Any) -> list[Any]:
    """``records`` redacted (see the module docstring): each one a dict (``as_dict`` converts a
    dataclass or pydantic model; what it refuses is passed on unchanged, for ingest to report).

    Args:
        records: span or trace records as given to :meth:`auto.store.Store.ingest`.
        as_dict: the store's record-to-dict conversion (raises for anything else).
    """
    red = ingest_redactor()
    values = red.values()
    out = []
    for r in records:
        try:
            d = r if type(r) is dict else as_dict(r)
        except Exception:  # noqa: BLE001 - not a record: ingest refuses it with its own message
            out.append(r)
            continue
        if not isinstance(d, dict):
            out.append(r)
            continue
        clean = red.redact_span(d, values)
        if clean is not d:
            clean.pop("digest", None)
        out.append(clean)
    return out
