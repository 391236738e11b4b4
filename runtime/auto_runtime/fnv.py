"""FNV-1a 64 (Fowler–Noll–Vo), the hash of the exact-match table's index, one key at a time and
many keys at once.

``h = offset_basis; for b in bytes: h = (h ^ b) * prime (mod 2**64)`` with offset basis
14695981039346656037 and prime 1099511628211 (the FNV-1a 64-bit parameters published with the
algorithm by Fowler, Noll and Vo).

:func:`fnv1a64_many` hashes a list of keys in a small WebAssembly module this runtime writes
itself (:data:`HASHER_WAT`: a byte loop, compiled once per process by wasmtime on an engine of
its own, without fuel or epochs: the loop ends after the bytes it is given). It is the load-time
check of a table's hashes and the compiler's index builder, so it must agree with
:func:`fnv1a64` on every input; where wasmtime cannot compile it, numpy computes the same
hashes a byte position at a time.
"""

from __future__ import annotations

import atexit
import ctypes
import threading
from typing import Any, Sequence

import numpy as np

FNV64_OFFSET_BASIS = 14695981039346656037
FNV64_PRIME = 1099511628211
_M64 = (1 << 64) - 1

VECTOR_MIN_KEYS = 64
""":func:`fnv1a64_many` hashes at least this many keys at once (fewer: one by one in Python)."""

HASHER_WAT = """
(module
  (memory (export "memory") 1)
  ;; fnv(p, end): FNV-1a 64 of the bytes [p, end)
  (func $fnv (param $p i32) (param $end i32) (result i64)
    (local $h i64)
    (local.set $h (i64.const 0xcbf29ce484222325))
    (block $last
      (loop $byte
        (br_if $last (i32.ge_u (local.get $p) (local.get $end)))
        (local.set $h (i64.mul (i64.xor (local.get $h) (i64.load8_u (local.get $p)))
                               (i64.const 0x100000001b3)))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (br $byte)))
    (local.get $h))
  ;; hash(keys, lens, n, out): keys = the keys' bytes back to back; lens = n u32 lengths;
  ;; out = n u64 hashes (little-endian)
  (func (export "hash") (param $p i32) (param $lens i32) (param $n i32) (param $out i32)
    (local $i i32) (local $end i32)
    (block $done
      (loop $key
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (local.set $end (i32.add (local.get $p)
          (i32.load (i32.add (local.get $lens) (i32.shl (local.get $i) (i32.const 2))))))
        (i64.store (i32.add (local.get $out) (i32.shl (local.get $i) (i32.const 3)))
                   (call $fnv (local.get $p) (local.get $end)))
        (local.set $p (local.get $end))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $key))))
  ;; check(index, n, delta) -> the first entry whose hash is not its key's, or -1; index = n
  ;; entries of 24 bytes (hash u64 | key ptr u32 | key len u32 | ...), a key at its ptr + delta
  (func (export "check") (param $ix i32) (param $n i32) (param $delta i32) (result i32)
    (local $i i32) (local $p i32) (local $e i32)
    (block $done
      (loop $key
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (local.set $e (i32.add (local.get $ix) (i32.mul (local.get $i) (i32.const 24))))
        (local.set $p (i32.add (i32.load offset=8 (local.get $e)) (local.get $delta)))
        (if (i64.ne (call $fnv (local.get $p) (i32.add (local.get $p) (i32.load offset=12 (local.get $e))))
                    (i64.load (local.get $e)))
          (then (return (local.get $i))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $key)))
    (i32.const -1))
)
"""
"""The hasher (WebAssembly text): FNV-1a 64 of each of ``n`` keys laid out back to back."""

PAGE = 65536
MAX_HASHER_BYTES = 1 << 31
"""Largest input (keys, lengths and hashes together, in bytes) one hasher call takes; larger
lists are hashed in parts."""


def fnv1a64(data: bytes) -> int:
    """FNV-1a 64-bit hash of ``data`` (an unsigned int in ``[0, 2**64)``)."""
    h = FNV64_OFFSET_BASIS
    for b in data:
        h = ((h ^ b) * FNV64_PRIME) & _M64
    return h


class _Hasher:
    """The compiled hasher; each call runs in a fresh instance (its memory, grown to the input's
    size, is freed after the call)."""

    def __init__(self) -> None:
        import wasmtime

        self._wasmtime = wasmtime
        self._engine = wasmtime.Engine()
        self._module = wasmtime.Module(self._engine, HASHER_WAT)

    def _instance(self, need: int) -> tuple[Any, Any, Any, int]:
        wt = self._wasmtime
        store = wt.Store(self._engine)
        ex = wt.Instance(store, self._module, []).exports(store)
        mem = ex["memory"]
        have = mem.data_len(store)
        if need > have:
            mem.grow(store, (need - have + PAGE - 1) // PAGE)
        return store, mem, ex, ctypes.addressof(mem.data_ptr(store).contents)

    def __call__(self, keys: Sequence[bytes], lens: np.ndarray) -> np.ndarray:
        n = len(keys)
        blob = b"".join(keys)
        lens_b = lens.astype("<u4").tobytes()
        lens_at = len(blob)
        out_at = (lens_at + 4 * n + 7) // 8 * 8
        store, mem, ex, base = self._instance(out_at + 8 * n)
        ctypes.memmove(base, blob, len(blob))
        ctypes.memmove(base + lens_at, lens_b, len(lens_b))
        ex["hash"](store, 0, lens_at, n, out_at)
        return np.frombuffer(ctypes.string_at(base + out_at, 8 * n), dtype="<u8")

    def check(self, blob: bytes, n: int, address: int) -> int:
        store, mem, ex, base = self._instance(len(blob))
        ctypes.memmove(base, blob, len(blob))
        return int(ex["check"](store, 0, n, -address))


_hasher: _Hasher | None = None
_hasher_failed = False
_hasher_lock = threading.Lock()


def _get_hasher() -> _Hasher | None:
    global _hasher, _hasher_failed
    if _hasher is None and not _hasher_failed:
        with _hasher_lock:
            if _hasher is None and not _hasher_failed:
                try:
                    _hasher = _Hasher()
                except Exception:  # noqa: BLE001 - numpy computes the same hashes
                    _hasher_failed = True
                else:
                    atexit.register(_drop_hasher)
    return _hasher


def _drop_hasher() -> None:
    """Free the hasher while wasmtime can still free it (not during interpreter teardown)."""
    global _hasher, _hasher_failed
    _hasher, _hasher_failed = None, True


def fnv1a64_array(keys: Sequence[bytes]) -> np.ndarray:
    """FNV-1a 64 of every key, as a ``uint64`` array in the order of ``keys``."""
    n = len(keys)
    if n < VECTOR_MIN_KEYS:
        return np.array([fnv1a64(k) for k in keys], dtype=np.uint64)
    hasher = _get_hasher()
    if hasher is None:
        return _fnv1a64_numpy(keys)
    lens = np.fromiter(map(len, keys), dtype=np.int64, count=n)
    ends = np.cumsum(lens + 12)  # bytes a hasher call needs for keys[:i + 1]
    parts, start, base = [], 0, 0
    while start < n:
        stop = max(start + 1, int(np.searchsorted(ends, base + MAX_HASHER_BYTES - PAGE, side="right")))
        parts.append(hasher(keys[start:stop], lens[start:stop]))
        base, start = int(ends[stop - 1]), stop
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def first_wrong_hash(blob: bytes, n: int, address: int) -> int:
    """The first of the ``n`` index entries at the start of a table segment (the layout of
    :mod:`auto_runtime.table`: 24-byte entries, hash u64 then key pointer and length u32,
    pointers absolute in linear memory, the segment at ``address``) whose hash is not the FNV-1a
    64 of its key, or -1 when every one is. The caller has checked that every key lies inside
    ``blob``.
    """
    hasher = _get_hasher() if n >= VECTOR_MIN_KEYS and len(blob) <= MAX_HASHER_BYTES else None
    if hasher is not None:
        return hasher.check(blob, n, address)
    idx = np.frombuffer(blob, dtype=[("hash", "<u8"), ("kptr", "<u4"), ("klen", "<u4"), ("rest", "V8")], count=n)
    kp = idx["kptr"].astype(np.int64) - address
    ke = kp + idx["klen"].astype(np.int64)
    got = fnv1a64_array([blob[a:b] for a, b in zip(kp.tolist(), ke.tolist())])
    wrong = np.flatnonzero(got != idx["hash"])
    return int(wrong[0]) if wrong.size else -1


def fnv1a64_many(keys: Sequence[bytes]) -> list[int]:
    """``[fnv1a64(k) for k in keys]`` (ints), computed in the hasher module.

    Returns:
        The hashes, in the order of ``keys``.
    """
    return fnv1a64_array(keys).tolist()


def _fnv1a64_numpy(keys: Sequence[bytes]) -> np.ndarray:
    """The hashes a byte position at a time over all the keys at once (numpy ``uint64``
    arithmetic wraps mod 2**64, as FNV-1a needs): the fallback of :func:`fnv1a64_array`."""
    n = len(keys)
    lens = np.fromiter(map(len, keys), dtype=np.int64, count=n)
    order = np.argsort(-lens, kind="stable")  # longest first: the keys still going form a prefix
    slens = lens[order]
    starts = np.zeros(n, dtype=np.int64)
    np.cumsum(slens[:-1], out=starts[1:])
    buf = np.frombuffer(b"".join(map(keys.__getitem__, order.tolist())), dtype=np.uint8)
    h = np.full(n, FNV64_OFFSET_BASIS, dtype=np.uint64)
    prime = np.uint64(FNV64_PRIME)
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
    return res


__all__ = ["FNV64_OFFSET_BASIS", "FNV64_PRIME", "HASHER_WAT", "VECTOR_MIN_KEYS", "fnv1a64", "first_wrong_hash",
           "fnv1a64_array", "fnv1a64_many"]
