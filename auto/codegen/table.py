"""The exact-match table ("memo") as pure data, plus its Python reference.

A :class:`TableModel` maps witnessed task inputs to their answers. Its artifact (lowered by
:mod:`auto.codegen.table_lower`) answers an input from the table iff the input's JSON text is,
byte for byte, the canonical JSON of a witnessed input; otherwise it misses, and a *memo-first*
artifact answers the miss with its specialist (``fallback``), a *table-only* one answers ``null``
with nonconformity 1.

Keys are the canonical JSON bytes of the input object: ``json.dumps(obj, sort_keys=True,
separators=(",", ":"), ensure_ascii=False).encode("utf-8")`` (:func:`auto.canonical.canonical_json`),
which is exactly what the runtime writes into the artifact (``auto_runtime.jsonio``). The
artifact does not trust that: it hashes the input bytes it was given, and confirms a candidate
by comparing every byte, so an input that is valid JSON but not canonical (extra spaces, another
key order, ``\\u00e9`` for ``é``, ``1`` for ``1.0``) simply misses.

Hash: FNV-1a 64-bit (Fowler–Noll–Vo; offset basis 14695981039346656037, prime 1099511628211,
arithmetic mod 2**64) over the bytes: ``h = basis; for b in bytes: h = (h ^ b) * prime``. It
only orders the table for binary search; equal hashes never decide a hit.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Iterable, Sequence

import numpy as np

# the hash and its vectorized form are the runtime's (the artifact contract: auto_runtime.table)
from auto_runtime.table import FNV64_OFFSET_BASIS, FNV64_PRIME, VECTOR_MIN_KEYS, fnv1a64, fnv1a64_many

from auto.canonical import canonical_json
from auto.models.specialist.train import CompiledModel, Prediction
from auto.errors import InputSchemaError

from .prelude import MAX_INPUT

HIT_MARGIN = 1_000_000.0
"""Margin a table hit reports: the answer is the reference's own witnessed output, so it is more
confident than any specialist margin (a selective-risk threshold never excludes a hit)."""
HIT_NONCONFORMITY = 0.0
MISS_NONCONFORMITY = 1.0


def canonical_key(obj: Any) -> bytes:
    """The table key of an input object: its canonical JSON as UTF-8 bytes.

    Raises:
        ValueError: NaN/infinity, or a string that is not encodable as UTF-8 (lone surrogate).
        TypeError: a value JSON cannot represent.
    """
    return canonical_json(obj).encode("utf-8")


class TableModel:
    """An exact-match lookup table from witnessed inputs to answers, optionally in front of a
    specialist (memo-first).

    Args:
        entries: ``(input_dict, answer)`` pairs; ``input_dict`` a JSON object (a ``dict``),
            ``answer`` any JSON value. Repeated inputs with the same answer are merged.
        fallback: the specialist answering misses (memo-first), or None (table-only).

    Attributes:
        keys: the canonical input bytes, sorted by ``(fnv1a64(key), key)`` (the artifact's order).
        answers: the canonical JSON text of each key's answer (same order).
        hashes: ``fnv1a64`` of each key (same order).
        fallback: the specialist or None.

    Input contract of the artifact: table-only: any JSON object (``bad_json``, ``wrong_type``,
    ``too_large`` errors as for a specialist; there is no ``missing_field``); memo-first: exactly
    the specialist's (its field must be present and a string, checked before the lookup), so every
    entry's input must carry that field as a string.

    Raises:
        ValueError: an input that is not a dict or not JSON-encodable, an answer that is not JSON,
            the same input with two different answers, a key longer than ``MAX_INPUT`` bytes
            (it could never be looked up), an entry lacking the fallback's string field, or no
            entries and no fallback (a table-only artifact that could never answer is refused;
            a memo-first one with no entries is its specialist behind an always-missing lookup).
        TypeError: ``fallback`` is not a CompiledModel.
    """

    kind = "memo"

    def __init__(self, entries: Iterable[tuple[dict, Any]],
                 fallback: CompiledModel | None = None) -> None:
        if fallback is not None and not isinstance(fallback, CompiledModel):
            raise TypeError(f"fallback must be a CompiledModel or None, got {type(fallback).__name__}")
        field = fallback.features.field if fallback is not None else None
        table: dict[bytes, str] = {}
        answers: dict[str, str] = {}
        for i, entry in enumerate(entries):
            try:
                inp, ans = entry
            except (TypeError, ValueError) as e:
                raise ValueError(f"entry {i} is not an (input, answer) pair") from e
            if not isinstance(inp, dict):
                raise ValueError(f"entry {i}: input is a {type(inp).__name__}, not an object")
            if field is not None and not isinstance(inp.get(field), str):
                raise ValueError(f"entry {i}: input lacks the specialist's string field {field!r}; "
                                 "a memo-first artifact checks that field before the lookup")
            try:
                key = canonical_key(inp)
            except (TypeError, ValueError) as e:
                raise ValueError(f"entry {i}: input is not JSON-encodable: {e}") from e
            a = answers.get(ans) if ans.__class__ is str else None  # labels repeat: encoded once
            if a is None:
                try:
                    a = canonical_json(ans)
                    a.encode("utf-8")
                except (TypeError, ValueError) as e:
                    raise ValueError(f"entry {i}: answer is not JSON-encodable: {e}") from e
                if ans.__class__ is str:
                    answers[ans] = a
            if len(key) > MAX_INPUT:
                raise ValueError(f"entry {i}: input is {len(key)} bytes, over MAX_INPUT={MAX_INPUT}")
            old = table.get(key)
            if old is not None and old != a:
                raise ValueError(f"entry {i}: input {key[:80]!r} has two different answers: "
                                 f"{old[:80]} and {a[:80]}")
            table[key] = a
        if not table and fallback is None:
            raise ValueError("a table-only TableModel needs at least one entry")
        self._build(table, fallback)

    @classmethod
    def from_texts(cls, table: dict[bytes, str]) -> "TableModel":
        """A table-only TableModel of entries already in canonical form: ``{canonical input
        bytes: canonical answer text}`` (e.g. read back from an installed artifact's verified
        table, :mod:`auto_runtime.table`, plus new entries encoded with :func:`canonical_key`),
        without decoding and re-encoding every entry. The caller vouches that each key is the
        canonical JSON of an object and each answer canonical JSON.

        Raises:
            ValueError: no entries, or a key longer than ``MAX_INPUT`` bytes.
        """
        if not table:
            raise ValueError("a table-only TableModel needs at least one entry")
        longest = max(map(len, table))
        if longest > MAX_INPUT:
            raise ValueError(f"an input of {longest} bytes is over MAX_INPUT={MAX_INPUT}")
        self = cls.__new__(cls)
        self._build(dict(table), None)
        return self

    def _build(self, table: dict[bytes, str], fallback: CompiledModel | None) -> None:
        # order by (hash, key): keys sorted first, then a stable sort by hash keeps equal hashes
        # in key order
        by_key = sorted(table)
        hashes = np.array(fnv1a64_many(by_key), dtype=np.uint64)
        order = np.argsort(hashes, kind="stable").tolist()
        self.hashes: tuple[int, ...] = tuple(hashes[order].tolist())
        self.keys: tuple[bytes, ...] = tuple(map(by_key.__getitem__, order))
        self.answers: tuple[str, ...] = tuple(map(table.__getitem__, self.keys))
        self.fallback = fallback
        self._table = table

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def compiled_as(self) -> str:
        """``"memo"`` (table-only) or ``"memo-first"`` (table in front of a specialist)."""
        return "memo" if self.fallback is None else "memo-first"

    def lookup(self, key: bytes) -> str | None:
        """The canonical answer text for exactly these input bytes, or None (a miss)."""
        return self._table.get(bytes(key))

    def predict(self, input_dict: dict[str, Any]) -> Prediction:
        """Reference prediction for one task input object.

        Returns:
            A hit: ``Prediction(answer_text, margin=1.0, nonconformity=0.0)``. A miss: the
            fallback's prediction unchanged, or (table-only) ``Prediction("null", 0.0, 1.0)``.

        Raises:
            InputSchemaError: ``input_dict`` is not a dict or not JSON-encodable; on a miss, the
                fallback's own input errors (missing or non-string field).
        """
        if not isinstance(input_dict, dict):
            raise InputSchemaError(f"input is a {type(input_dict).__name__}, not an object")
        try:
            key = canonical_key(input_dict)
        except (TypeError, ValueError) as e:
            raise InputSchemaError(f"input is not JSON-encodable: {e}") from e
        a = self._table.get(key)
        if a is not None:
            return Prediction(a, HIT_MARGIN, HIT_NONCONFORMITY)
        if self.fallback is not None:
            return self.fallback.predict(input_dict)
        return Prediction("null", 0.0, MISS_NONCONFORMITY)

    def manifest_model(self) -> dict[str, Any]:
        """The manifest's ``model`` object: ``{"kind": "memo", "entries": N, "hash": "fnv1a64",
        "fallback": <the specialist's manifest_model() or null>}``."""
        return {"kind": self.kind, "entries": len(self), "hash": "fnv1a64",
                "fallback": None if self.fallback is None else self.fallback.manifest_model()}

    def digest(self) -> str:
        """``sha256:`` over the (sorted) entries and the fallback's digest; equal tables, equal digest."""
        h = hashlib.sha256()
        h.update(json.dumps({"kind": self.kind, "n": len(self),
                             "fallback": None if self.fallback is None else self.fallback.digest()}
                            ).encode())
        for k, a in zip(self.keys, self.answers):
            ab = a.encode("utf-8")
            h.update(len(k).to_bytes(8, "little") + k + len(ab).to_bytes(8, "little") + ab)
        return "sha256:" + h.hexdigest()
