"""Which fields of a record-valued task are categorical (a few labels) and which are open-valued
(ids, amounts, dates, free text).

A record compiles per field (:mod:`auto.compile.rungs.program`); the manifest's output interface
then declares, per categorical field, the values the generation was compiled from
(``interface.output.fields``: ``{key: {"enum": [...]}}``), and the ratchet counts a *new label*
(an answer the installed generation cannot give) only for those fields
(:func:`auto.ratchet.policy.unanswerable_labels`): an order id or an amount never seen before is
the normal case for an open-valued field, not a sign that the generation is missing an answer.

:func:`categorical_fields` decides from the witnessed records: a field is categorical when its
values are labels in the sense of :func:`auto.models.program.synth.selective.categorical` (scalars
other than non-integral numbers, at most 24 distinct ones — the synthesizer's limit for decision
lists — and at most 10% of the records carrying a value witnessed only once: an id unique per
input is open-valued even when most records have none).
"""

from __future__ import annotations

from typing import Any, Sequence

from auto.canonical import canonical_json
from auto.models.program.synth.selective import MAX_SINGLETON_SHARE, categorical


def categorical_fields(records: Sequence[Any]) -> dict[str, list[Any]]:
    """Per categorical key of ``records`` (module docstring), its distinct witnessed values in
    canonical-JSON order; ``{}`` unless every record is a JSON object (keys missing from some
    records are left out)."""
    if not records or not all(isinstance(r, dict) for r in records):
        return {}
    keys = set(records[0])
    for r in records[1:]:
        keys &= set(r)
    out: dict[str, list[Any]] = {}
    for k in sorted(keys):
        vals = [r[k] for r in records]
        if categorical(vals):
            out[k] = [v for _key, v in sorted({canonical_json(v): v for v in vals}.items())]
    return out


def declared_fields(interface_output: Any) -> dict[str, set[str]]:
    """The categorical fields a manifest's output interface declares, each as its set of
    canonical-JSON values: ``interface.output.fields``, else, for an ``enum`` of records (a memo
    table's), the :func:`categorical_fields` of those records; ``{}`` for anything else."""
    if not isinstance(interface_output, dict):
        return {}
    fields = interface_output.get("fields")
    if isinstance(fields, dict):
        return {k: {canonical_json(v) for v in (f.get("enum") or [])} for k, f in fields.items()
                if isinstance(f, dict) and isinstance(f.get("enum"), list)}
    enum = interface_output.get("enum")
    if isinstance(enum, list) and enum and all(isinstance(e, dict) for e in enum):
        return {k: {canonical_json(v) for v in vs} for k, vs in categorical_fields(enum).items()}
    return {}


__all__ = ["MAX_SINGLETON_SHARE", "categorical_fields", "declared_fields"]  # MAX_SINGLETON_SHARE: re-exported
