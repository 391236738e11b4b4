"""Payloads: the JSON values of spans, stored once by content digest, optionally compressed.

A span's ``input``, ``output``, ``error`` and ``attributes`` are JSON values; the ``spans`` table
holds the integer id of a row of ``payloads`` for each (NULL for JSON ``null``), and identical
values — an output label seen a million times, the same request sent twice — are one row.

A payload row is ``(id, digest, codec, dict_id, size, body)``:

* ``digest``: the 32-byte SHA-256 of the value's canonical JSON text (UTF-8), the key that makes
  storage content-addressed (``auto.canonical``: ``sha256:`` + hex of the same bytes);
* ``codec``: :data:`RAW` (``body`` is the text), :data:`DEFLATE` (zlib format, RFC 1950/1951) or
  :data:`DEFLATE_DICT` (zlib with a preset dictionary, RFC 1950 §2.2 ``FDICT``: the text of the
  payload ``dict_id``);
* ``size``: the text's length in bytes.

The preset dictionary is how repeated parts of *different* values are not stored again: the
first sizeable value a writer stores for a (column, site) becomes the dictionary of the ones
that follow, so a system prompt, a tool schema or a header set shared by every request of a site
compresses to back-references of a few bytes (measured on the triage store: ``bench/scale``).
A dictionary payload is itself :data:`RAW` or :data:`DEFLATE`, never chained.

Compression is kept only when it saves at least :data:`MIN_SAVING` bytes; values shorter than
:data:`COMPRESS_MIN` bytes are stored raw.
"""

from __future__ import annotations

import hashlib
import zlib
from collections import OrderedDict
from typing import Any, Callable, Iterable

RAW, DEFLATE, DEFLATE_DICT = 0, 1, 2
"""Payload codecs (``payloads.codec``)."""

CODECS = {RAW: "raw", DEFLATE: "deflate", DEFLATE_DICT: "deflate+dictionary"}

COMPRESS_MIN = 64
"""Values shorter than this (bytes) are stored raw."""

MIN_SAVING = 8
"""Compression is kept only when it saves at least this many bytes."""

DICT_MIN = 256
"""A value becomes a (column, site)'s dictionary only from this size (bytes) on."""

WBITS, MEM_LEVEL, LEVEL = 13, 4, 6
"""zlib window (2**13 = 8 KiB: the dictionary's usable tail), memory level and compression level.
A small window and memory level make one compression ~5 µs instead of ~60 µs for a 0.4 KB
value (zlib allocates its state per stream), at the same ratio for span-sized values."""


def payload_digest(text: bytes) -> bytes:
    """The 32-byte SHA-256 of a value's canonical JSON bytes (the payload key)."""
    return hashlib.sha256(text).digest()


def encode(text: bytes, zdict: bytes | None = None) -> tuple[int, bytes]:
    """``(codec, body)`` for a value's canonical JSON bytes: compressed (with ``zdict`` as preset
    dictionary when given) when that saves :data:`MIN_SAVING` bytes, else raw."""
    if len(text) < COMPRESS_MIN:
        return RAW, text
    if zdict:
        c = zlib.compressobj(LEVEL, zlib.DEFLATED, WBITS, MEM_LEVEL, zlib.Z_DEFAULT_STRATEGY, zdict=zdict)
        codec = DEFLATE_DICT
    else:
        c = zlib.compressobj(LEVEL, zlib.DEFLATED, WBITS, MEM_LEVEL)
        codec = DEFLATE
    body = c.compress(text) + c.flush()
    if len(body) + MIN_SAVING <= len(text):
        return codec, body
    return RAW, text


def decode(codec: int, body: bytes, zdict: bytes | None = None) -> bytes:
    """The canonical JSON bytes of a payload.

    Raises:
        ValueError: an unknown codec, a missing dictionary, or a body that does not inflate.
    """
    body = bytes(body)
    if codec == RAW:
        return body
    try:
        if codec == DEFLATE:
            d = zlib.decompressobj(15)
        elif codec == DEFLATE_DICT:
            if zdict is None:
                raise ValueError("a deflate+dictionary payload without its dictionary")
            d = zlib.decompressobj(15, zdict=zdict)
        else:
            raise ValueError(f"unknown payload codec {codec!r}")
        out = d.decompress(body) + d.flush()
    except zlib.error as exc:
        raise ValueError(f"payload does not inflate: {exc}") from None
    if not d.eof:
        raise ValueError("payload body is truncated")
    return out


class LRU:
    """A small least-recently-used map (``get`` / ``put``), bounded by entries."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._d: OrderedDict = OrderedDict()

    def get(self, key):
        v = self._d.get(key)
        if v is not None:
            self._d.move_to_end(key)
        return v

    def put(self, key, value) -> None:
        self._d[key] = value
        self._d.move_to_end(key)
        if len(self._d) > self.capacity:
            self._d.popitem(last=False)

    def clear(self) -> None:
        self._d.clear()


class PayloadMismatch(ValueError):
    """A payload whose decoded bytes do not match its digest (``payload_id``: which)."""

    def __init__(self, payload_id: int) -> None:
        super().__init__(f"payload {payload_id} does not match its digest")
        self.payload_id = payload_id


class PayloadTexts:
    """Resolves payload ids to canonical JSON texts, with a bounded cache (dictionaries included).

    Args:
        fetch: ``fetch(ids) -> rows (id, codec, dict_id, body[, digest])`` for the ids present;
            with the digest, every text read is checked against it (SHA-256 of the decoded
            bytes: a payload changed behind the store's back is refused, not read).
        capacity: cached texts (entries).
    """

    def __init__(self, fetch: Callable[[list[int]], Iterable[tuple]], capacity: int = 50_000) -> None:
        self._fetch = fetch
        self._cache = LRU(capacity)

    def texts(self, ids: Iterable[int | None]) -> dict[int, str]:
        """``{id: canonical JSON text}`` of the given ids (None ids are skipped).

        Raises:
            ValueError: a payload id is missing from the store, does not decode, or does not
                match its digest.
        """
        want = {i for i in ids if i is not None}
        out: dict[int, str] = {}
        missing = []
        for i in want:
            t = self._cache.get(i)
            if t is None:
                missing.append(i)
            else:
                out[i] = t
        if missing:
            rows = {r[0]: r for r in self._fetch(missing)}
            dict_ids = {r[2] for r in rows.values() if r[1] == DEFLATE_DICT and r[2] is not None}
            dicts = self.texts(dict_ids) if dict_ids else {}
            for i in missing:
                r = rows.get(i)
                if r is None:
                    raise ValueError(f"payload {i} is missing")
                zd = dicts[r[2]].encode("utf-8") if r[1] == DEFLATE_DICT else None
                raw = decode(r[1], r[3], zd)
                if len(r) > 4 and r[4] is not None and payload_digest(raw) != bytes(r[4]):
                    raise PayloadMismatch(i)
                t = raw.decode("utf-8")
                self._cache.put(i, t)
                out[i] = t
        return out

    def clear(self) -> None:
        self._cache.clear()


_INSERT_CHUNK = 200
"""Payload rows per multi-row ``INSERT`` (6 parameters each, well under SQLite's 32,766)."""


class PayloadWriter:
    """Stores payloads inside a write transaction and hands back their ids.

    Caches (bounded) map digests to ids and (column, site) keys to their dictionary payload; a
    write's new entries join the caches only at :meth:`commit`, so a rolled-back transaction
    never leaves an id behind that the database does not hold. Call :meth:`begin` at the start
    of each attempt of a write, :meth:`commit` after it committed.
    """

    def __init__(self, cache_size: int = 200_000) -> None:
        self._ids = LRU(cache_size)
        self._dicts = LRU(20_000)
        self._new_ids: dict[bytes, int] = {}
        self._new_dicts: dict[Any, tuple[int, bytes]] = {}

    def begin(self) -> None:
        """Forget what an earlier, unfinished attempt stored."""
        self._new_ids = {}
        self._new_dicts = {}

    def commit(self) -> None:
        """The write committed: its payloads are now known ids."""
        for d, i in self._new_ids.items():
            self._ids.put(d, i)
        for k, v in self._new_dicts.items():
            self._dicts.put(k, v)
        self.begin()

    def _known(self, d: bytes) -> int | None:
        i = self._new_ids.get(d)
        return i if i is not None else self._ids.get(d)

    def _dictionary(self, key: Any) -> tuple[int, bytes] | None:
        v = self._new_dicts.get(key)
        return v if v is not None else self._dicts.get(key)

    def store(self, tx: Any, items: list[tuple[bytes | None, Any]]) -> list[int | None]:
        """The payload id of each ``(canonical bytes or None, dictionary key)`` (None for None),
        inserting the values the store does not hold yet, inside ``tx``."""
        digs = [None if t is None else payload_digest(t) for t, _ in items]
        first: dict[bytes, int] = {}  # digest -> index of its first item, for digests not cached
        ids: dict[bytes, int] = {}  # digest -> id, held for this call (the caches are bounded)
        for i, d in enumerate(digs):
            if d is None or d in ids or d in first:
                continue
            known = self._known(d)
            if known is None:
                first[d] = i
            else:
                ids[d] = known
        if first:
            ids.update(self._lookup(tx, list(first)))
            missing = [d for d in first if d not in ids]
            if missing:
                self._insert(tx, [(d, *items[first[d]]) for d in missing])
                ids.update((d, self._new_ids[d]) for d in missing)
        return [None if d is None else ids[d] for d in digs]

    def _lookup(self, tx: Any, digs: list[bytes]) -> dict[bytes, int]:
        """``{digest: id}`` of the ``digs`` the store holds (also cached: committed rows)."""
        found: dict[bytes, int] = {}
        for k in range(0, len(digs), 500):
            chunk = digs[k:k + 500]
            rows = tx.query(f"SELECT id, digest FROM payloads WHERE digest IN ({','.join('?' * len(chunk))})", chunk)
            for pid, d in rows:
                found[bytes(d)] = pid
                self._ids.put(bytes(d), pid)  # committed rows: safe to cache now
        return found

    def _insert(self, tx: Any, new: list[tuple[bytes, bytes, Any]]) -> None:
        # first the values that become their key's dictionary, then the rest (compressed with it)
        exemplars, rest, claimed = [], [], set()
        for d, text, key in new:
            if len(text) >= DICT_MIN and self._dictionary(key) is None and key not in claimed:
                claimed.add(key)
                exemplars.append((d, text, key))
            else:
                rest.append((d, text, key))
        for group in (exemplars, rest):
            rows = []
            for d, text, key in group:
                zd = self._dictionary(key)
                codec, body = encode(text, zd[1] if zd else None)
                rows.append((d, codec, zd[0] if codec == DEFLATE_DICT else None, len(text), body, key, text))
            if getattr(tx, "dialect", None) == "sqlite":
                self._insert_numbered(tx, rows, group is exemplars)
                continue
            for k in range(0, len(rows), _INSERT_CHUNK):
                chunk = rows[k:k + _INSERT_CHUNK]
                params: list[Any] = []
                for d, codec, dict_id, size, body, _key, _text in chunk:
                    params += [d, codec, dict_id, size, body]
                got = tx.query("INSERT INTO payloads (digest, codec, dict_id, size, body) VALUES "
                               + ",".join(["(?, ?, ?, ?, ?)"] * len(chunk))
                               + " ON CONFLICT (digest) DO NOTHING RETURNING id, digest", params)
                for pid, d in got:
                    self._new_ids[bytes(d)] = pid
                lost = [r[0] for r in chunk if r[0] not in self._new_ids]
                if lost:  # inserted meanwhile by another writer (PostgreSQL): read their ids
                    self._new_ids.update(self._lookup(tx, lost))
                for d, codec, _dict_id, _size, _body, key, text in chunk:
                    if group is exemplars and codec != DEFLATE_DICT and self._known(d) is not None:
                        self._new_dicts[key] = (self._known(d), text)

    def _insert_numbered(self, tx: Any, rows: list[tuple], exemplars: bool) -> None:
        """SQLite: the write transaction holds the file's only write lock and the digests were
        looked up inside it, so none of ``rows`` exists: number them after the largest id and
        insert them in one ``executemany`` (no per-row ``RETURNING``)."""
        if not rows:
            return
        next_id = tx.query("SELECT COALESCE(MAX(id), 0) + 1 FROM payloads")[0][0]
        params = []
        for k, (d, codec, dict_id, size, body, key, text) in enumerate(rows):
            pid = next_id + k
            params.append((pid, d, codec, dict_id, size, body))
            self._new_ids[d] = pid
            if exemplars and codec != DEFLATE_DICT:
                self._new_dicts[key] = (pid, text)
        tx.executemany("INSERT INTO payloads (id, digest, codec, dict_id, size, body) VALUES (?, ?, ?, ?, ?, ?)", params)
