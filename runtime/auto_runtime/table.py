"""The exact-match table an artifact declares, read from its bytes: tier-1 hits without entering
WebAssembly.

A table artifact ("memo", or "memo-first" in front of a specialist) keeps its table as the last
active data segment of its module, laid out as :data:`LAYOUT` (below). When the manifest declares
it (``model.table``), the loader (:func:`read_table`) finds that segment in the artifact's bytes,
checks its ``sha256:`` digest against the declaration, checks the index (every entry inside the
segment, sorted by hash, each hash the FNV-1a 64 of its key, no key twice) and builds a
:class:`TableIndex`: a dict from the canonical input bytes to the entry's answer. The artifact's
bytes stay the contract: the dict is read from them, and :class:`~auto_runtime.Artifact` checks
at load, on a sample of entries, that the code answers them exactly as the dict does
(:func:`self_check_sample`). An input that misses the dict runs the code as before.

Why a hit from the dict equals the code's answer: the code answers an input from the table iff
its bytes equal, byte for byte, a key whose index entry its binary search reaches (hash equal,
then a full comparison); with the index sorted by hash and each hash that of its key (checked
here), every key is reached, and nothing else can hit. Its output is
``{"answer": <answer>, "margin": <hit margin>, "nonconformity": <hit nonconformity>}`` with the
two numbers the declaration states (the code writes them as fixed decimals).

Layout ``fnv1a64-index/1`` (``address`` = the segment's address in linear memory; all integers
little-endian, pointers absolute)::

    index    entries x 24 bytes: hash u64 | key ptr u32 | key len u32 | answer ptr u32 | answer len u32
    keys     the canonical JSON bytes of each witnessed input
    answers  the canonical JSON bytes of each distinct answer

The declaration (``model.table``)::

    {"layout": "fnv1a64-index/1", "address": int, "bytes": int, "entries": int,
     "digest": "sha256:<hex of the segment's bytes>", "hit": {"margin": number, "nonconformity": number}}

Hash: FNV-1a 64 (Fowler–Noll–Vo; offset basis 14695981039346656037, prime 1099511628211,
arithmetic mod 2**64): ``h = basis; for b in bytes: h = (h ^ b) * prime``.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from auto_runtime.digest import PREFIX, digest_bytes
from auto_runtime.errors import MalformedArtifact, ManifestError
from auto_runtime.jsonio import strict_loads
from auto_runtime.wasm_sections import WasmModuleInfo, data_segments

LAYOUT = "fnv1a64-index/1"
ENTRY = 24
"""Bytes per index entry."""

INDEX_DTYPE = np.dtype([("hash", "<u8"), ("kptr", "<u4"), ("klen", "<u4"), ("aptr", "<u4"), ("alen", "<u4")])
"""One index entry as a numpy record (little-endian, 24 bytes)."""

FNV64_OFFSET_BASIS = 14695981039346656037
FNV64_PRIME = 1099511628211
_M64 = (1 << 64) - 1

VECTOR_MIN_KEYS = 64
""":func:`fnv1a64_many` hashes byte positions in numpy while at least this many keys are that
long; the few longer keys are finished one by one."""

SELF_CHECK_SAMPLE = 8
"""Entries (evenly spaced, first and last included) the loader runs through the code to check
that it answers them as the table does."""


def fnv1a64(data: bytes) -> int:
    """FNV-1a 64-bit hash of ``data`` (an unsigned int in ``[0, 2**64)``)."""
    h = FNV64_OFFSET_BASIS
    for b in data:
        h = ((h ^ b) * FNV64_PRIME) & _M64
    return h


def fnv1a64_many(keys: Sequence[bytes]) -> list[int]:
    """``[fnv1a64(k) for k in keys]``, computed a byte position at a time over all the keys at
    once (numpy ``uint64`` arithmetic wraps mod 2**64, as FNV-1a needs): the Python-level work
    grows with the longest keys' length, not with the number of keys.

    Returns:
        The hashes, in the order of ``keys``.
    """
    n = len(keys)
    if n < VECTOR_MIN_KEYS:
        return [fnv1a64(k) for k in keys]
    lens = np.fromiter(map(len, keys), dtype=np.int64, count=n)
    order = np.argsort(-lens, kind="stable")  # longest first: the keys still going form a prefix
    slens = lens[order]
    starts = np.zeros(n, dtype=np.int64)
    np.cumsum(slens[:-1], out=starts[1:])
    buf = np.frombuffer(b"".join(map(keys.__getitem__, order.tolist())), dtype=np.uint8)
    h = np.full(n, FNV64_OFFSET_BASIS, dtype=np.uint64)
    prime = np.uint64(FNV64_PRIME)
    # going[j] = how many keys are longer than j bytes
    going = np.searchsorted(-slens, -np.arange(int(slens[0]) if n else 0), side="left")
    j = 0
    while j < len(going) and going[j] >= VECTOR_MIN_KEYS:
        k = int(going[j])
        h[:k] ^= buf[starts[:k] + j]
        h[:k] *= prime
        j += 1
    long_ = int(going[j]) if j < len(going) else 0
    for r in range(long_):  # the few keys longer than that, one by one
        v = int(h[r])
        for b in buf[starts[r] + j:starts[r] + slens[r]].tobytes():
            v = ((v ^ b) * FNV64_PRIME) & _M64
        h[r] = v
    res = np.empty(n, dtype=np.uint64)
    res[order] = h
    return res.tolist()


class _Decode:
    """An answer decoded afresh on every hit (a list or an object: the caller may change it)."""

    __slots__ = ("raw",)

    def __init__(self, raw: bytes) -> None:
        self.raw = raw


class TableIndex:
    """The verified table of one artifact: canonical input bytes -> the code's hit output.

    Attributes:
        entries: number of entries. digest: the declared (and checked) ``sha256:`` of the
            segment. address, nbytes: where the segment lies in linear memory and its size.
        margin, nonconformity: the numbers every hit output carries.
        hit: ``hit(key: bytes) -> dict | None``: the hit output (a new dict each call; a list or
            object answer is decoded afresh, so changing it never changes the table) or None.

    Build with :func:`read_table`.
    """

    __slots__ = ("entries", "digest", "address", "nbytes", "margin", "nonconformity", "hit", "_answers", "_raw")

    def __init__(self, answers: dict[bytes, Any], raw: dict[bytes, bytes], *, digest: str, address: int,
                 nbytes: int, margin: float, nonconformity: float) -> None:
        self._answers = answers
        self._raw = raw
        self.entries = len(answers)
        self.digest = digest
        self.address = address
        self.nbytes = nbytes
        self.margin = margin
        self.nonconformity = nonconformity
        get = answers.get
        miss = _MISS
        decode = _Decode
        loads = strict_loads

        def hit(key: bytes) -> dict[str, Any] | None:
            a = get(key, miss)
            if a is miss:
                return None
            if a.__class__ is decode:
                a = loads(a.raw)
            return {"answer": a, "margin": margin, "nonconformity": nonconformity}

        self.hit = hit

    def __len__(self) -> int:
        return self.entries

    def __contains__(self, key: object) -> bool:
        return key in self._answers

    def answer_bytes(self, key: bytes) -> bytes | None:
        """The canonical JSON bytes of ``key``'s answer, or None (not in the table)."""
        return self._raw.get(key)

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        """``(key bytes, answer bytes)`` of every entry, in index order (by hash, then key)."""
        return iter(self._raw.items())


_MISS = object()


def _number(v: Any, what: str, source: str) -> float:
    if v.__class__ is bool or not isinstance(v, (int, float)) or v != v or v in (float("inf"), float("-inf")):
        raise ManifestError(f"{source}: model.table.hit.{what} must be a finite number, got {v!r:.60}")
    return float(v)


def table_declaration(manifest: Mapping[str, Any]) -> dict[str, Any] | None:
    """The manifest's ``model.table`` (None when the artifact declares no table)."""
    model = manifest.get("model")
    decl = model.get("table") if isinstance(model, dict) else None
    return decl if decl is not None else None


def read_table(data: bytes, info: WasmModuleInfo, manifest: Mapping[str, Any],
               source: str = "artifact") -> TableIndex | None:
    """The verified :class:`TableIndex` the manifest declares, read from the artifact's bytes.

    Args:
        data: the artifact's bytes. info: their parsed container.
        manifest: the decoded manifest.
        source: names the artifact in error messages.

    Returns:
        The table, or None when the manifest declares none (``model.table`` absent or null).

    Raises:
        ManifestError: the declaration is malformed (unknown layout, a missing or mistyped key),
            no data segment lies at its address with its size, the segment does not match its
            digest, or the index is inconsistent (an entry outside the segment, hashes not
            sorted, a hash that is not its key's FNV-1a 64, a key twice, an answer that is not
            JSON, another number of entries than declared).
    """
    decl = table_declaration(manifest)
    if decl is None:
        return None
    where = f"{source}: model.table"
    if not isinstance(decl, dict):
        raise ManifestError(f"{where} must be an object")
    if decl.get("layout") != LAYOUT:
        raise ManifestError(f"{where}.layout {decl.get('layout')!r:.60} is not supported (expected {LAYOUT!r})")
    for key in ("address", "bytes", "entries"):
        v = decl.get(key)
        if v.__class__ is not int or v < 0:
            raise ManifestError(f"{where}.{key} must be a non-negative integer, got {v!r:.60}")
    digest = decl.get("digest")
    if not isinstance(digest, str) or not digest.startswith(PREFIX):
        raise ManifestError(f"{where}.digest must be a sha256: digest")
    hit = decl.get("hit")
    if not isinstance(hit, dict):
        raise ManifestError(f"{where}.hit must be an object with 'margin' and 'nonconformity'")
    margin = _number(hit.get("margin"), "margin", source)
    nonconf = _number(hit.get("nonconformity"), "nonconformity", source)
    address, nbytes, n = decl["address"], decl["bytes"], decl["entries"]
    try:
        segs = [s for s in data_segments(data, info) if s.address == address and s.size == nbytes]
    except MalformedArtifact as e:
        raise ManifestError(f"{where}: the data section cannot be read: {e}") from None
    if len(segs) != 1:
        raise ManifestError(f"{where}: {len(segs)} data segments of {nbytes} bytes at address {address} (expected one)")
    seg = segs[0]
    blob = data[seg.offset:seg.offset + seg.size]
    if digest_bytes(blob) != digest:
        raise ManifestError(f"{where}: the table's bytes do not match its digest (corrupted or altered)")
    if ENTRY * n > nbytes:
        raise ManifestError(f"{where}: an index of {n} entries does not fit in {nbytes} bytes")
    idx = np.frombuffer(blob, dtype=INDEX_DTYPE, count=n)
    kp = idx["kptr"].astype(np.int64) - address
    kl = idx["klen"].astype(np.int64)
    ap = idx["aptr"].astype(np.int64) - address
    al = idx["alen"].astype(np.int64)
    lo = ENTRY * n
    bad = np.flatnonzero((kp < lo) | (kp + kl > nbytes) | (ap < lo) | (ap + al > nbytes))
    if bad.size:
        raise ManifestError(f"{where}: index entry {int(bad[0])} points outside the table's segment")
    hashes = idx["hash"]
    unsorted = np.flatnonzero(hashes[1:] < hashes[:-1])
    if unsorted.size:
        raise ManifestError(f"{where}: the index is not sorted by hash (entry {int(unsorted[0]) + 1})")
    kp_l, ke_l, ap_l, ae_l = kp.tolist(), (kp + kl).tolist(), ap.tolist(), (ap + al).tolist()
    keys = [blob[a:b] for a, b in zip(kp_l, ke_l)]
    raw: dict[bytes, bytes] = dict(zip(keys, [blob[a:b] for a, b in zip(ap_l, ae_l)]))
    if len(raw) != n:
        raise ManifestError(f"{where}: {n - len(raw)} key(s) appear twice in the index")
    if n:
        wrong = np.flatnonzero(np.array(fnv1a64_many(keys), dtype=np.uint64) != hashes)
        if wrong.size:
            raise ManifestError(f"{where}: index entry {int(wrong[0])}'s hash is not the FNV-1a 64 of its key")
    answers: dict[bytes, Any] = {}
    decoded: dict[bytes, Any] = {}  # each distinct answer decoded once
    for k, ab in raw.items():
        a = decoded.get(ab, _MISS)
        if a is _MISS:
            try:
                v = strict_loads(ab)
            except ValueError as e:
                raise ManifestError(f"{where}: an answer is not JSON: {e}") from None
            a = decoded[ab] = _Decode(ab) if isinstance(v, (list, dict)) else v
        answers[k] = a
    return TableIndex(answers, raw, digest=digest, address=address, nbytes=nbytes, margin=margin,
                      nonconformity=nonconf)


def self_check_sample(table: TableIndex, k: int = SELF_CHECK_SAMPLE) -> list[bytes]:
    """At most ``k`` keys of ``table`` evenly spaced over its index order (first and last
    included): the keys the loader runs through the code."""
    n = table.entries
    if n == 0:
        return []
    keys = [key for key, _ in table.items()]
    if n <= k:
        return keys
    return [keys[round(i * (n - 1) / (k - 1))] for i in range(k)]


def check_against_code(table: TableIndex, run_text: Callable[[list[str]], list[Any]], source: str) -> None:
    """Refuse a table the code does not answer as declared: ``run_text(texts)`` (the code's
    outputs for canonical input texts, through ``run_batch``) must equal the table's hit output
    on every key of :func:`self_check_sample`.

    Raises:
        ManifestError: an output differs (naming the first key).
    """
    keys = self_check_sample(table)
    if not keys:
        return
    outs = run_text([k.decode("utf-8") for k in keys])
    for key, out in zip(keys, outs):
        if out != table.hit(key):
            raise ManifestError(f"{source}: model.table declares an answer for {key[:60]!r} that the code does not "
                                f"give ({str(out)[:80]})")


__all__ = ["ENTRY", "LAYOUT", "TableIndex", "check_against_code", "fnv1a64", "fnv1a64_many", "read_table",
           "self_check_sample", "table_declaration"]
