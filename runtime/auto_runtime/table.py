"""The exact-match table an artifact declares, read from its bytes: tier-1 hits without entering
WebAssembly.

A table artifact ("memo", or "memo-first" in front of a specialist) keeps its table as the last
active data segment of its module, laid out as :data:`LAYOUT` (below). When the manifest declares
it (``model.table``), the loader (:func:`read_table`) finds that segment in the artifact's bytes,
checks its ``sha256:`` digest against the declaration, checks the index (every entry inside the
segment, sorted by hash, each hash the FNV-1a 64 of its key, no key twice) and builds a
:class:`TableIndex`: a dict from the canonical input bytes to the entry's answer. The artifact's
bytes stay the contract: the dict is read from them, :class:`~auto_runtime.Artifact` checks at
load, on a sample of entries, that the code answers them exactly as the dict does
(:func:`self_check_sample`), and every other key is run through the code at its first hit and
answered from the dict only if the code gave the same output (:meth:`TableIndex.bind_code`). An
input that misses the dict runs the code as before. A repeated input is found again without
encoding it (its *value key*, :class:`TableIndex`).

Why a hit from the dict equals the code's answer: the code answers an input from the table iff
its bytes equal, byte for byte, a key whose index entry its binary search reaches (hash equal,
then a full comparison), and the input passes the code's own input rules (valid JSON without
lone surrogate escapes, within its size limit, a memo-first specialist's field checks); with
the index sorted by hash and each hash that of its key (checked here), every key is reached,
and nothing else can hit; a key the input rules refuse is found out at its first hit, when the
code runs it. The hit output is
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

import logging
from itertools import chain, repeat
from operator import getitem
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from auto_runtime.digest import PREFIX, digest_bytes
from auto_runtime.errors import InputSchemaError, MalformedArtifact, ManifestError, OutputError
from auto_runtime.fnv import (FNV64_OFFSET_BASIS, FNV64_PRIME, VECTOR_MIN_KEYS, first_wrong_hash, fnv1a64,
                              fnv1a64_many)
from auto_runtime.jsonio import canonical_text, strict_loads
from auto_runtime.wasm_sections import WasmModuleInfo, data_segments

log = logging.getLogger("auto_runtime.table")

LAYOUT = "fnv1a64-index/1"
ENTRY = 24
"""Bytes per index entry."""

INDEX_DTYPE = np.dtype([("hash", "<u8"), ("kptr", "<u4"), ("klen", "<u4"), ("aptr", "<u4"), ("alen", "<u4")])
"""One index entry as a numpy record (little-endian, 24 bytes)."""

SELF_CHECK_SAMPLE = 8
"""Entries (evenly spaced, first and last included) the loader runs through the code to check
that it answers them as the table does."""

_PLAIN = frozenset((str, int, float, bool, type(None)))
"""Value types whose canonical JSON decodes back to the same type and value."""


class _Answer:
    """One distinct answer of the table: its canonical bytes, and its value (``fresh``: a list
    or an object, decoded afresh on every hit so the caller may change it)."""

    __slots__ = ("raw", "value", "fresh")

    def __init__(self, raw: bytes, value: Any) -> None:
        self.raw = raw
        self.fresh = isinstance(value, (list, dict))
        self.value = None if self.fresh else value


def _out_fn(margin: float, nonconformity: float) -> Callable[[Any], dict[str, Any]]:
    """The output object of a table answer (its ``answer`` decoded afresh when it is mutable)."""
    loads = strict_loads

    def out(a: _Answer) -> dict[str, Any]:
        return {"answer": loads(a.raw) if a.fresh else a.value, "margin": margin, "nonconformity": nonconformity}

    return out


def _encode_plain(obj: Any) -> bytes | None:
    """The canonical bytes of a plain object, else None."""
    if obj.__class__ is not dict:
        return None
    plain = _PLAIN
    for k, v in obj.items():
        if k.__class__ is not str or v.__class__ not in plain:
            return None
    try:
        return canonical_text(obj).encode("utf-8")
    except (TypeError, ValueError, RecursionError):  # NaN, a lone surrogate: the usual path says so
        return None


def _lookup_fns(one: str | None, value_key: Callable[[Any], Any], admitted_get: Callable[[Any], Any],
                admit: Callable[..., Any], admit_one: Callable[..., Any], out: Callable[[Any], dict[str, Any]],
                margin: float, nonconformity: float, fresh_any: bool) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """``(lookup, lookup_many)`` of a table: the admitted memory first (by value key), else
    ``admit_one`` / ``admit``."""
    loads = strict_loads

    if one is not None:
        def lookup(obj: Any) -> tuple[dict[str, Any] | None, bytes | None]:
            vk = None
            if obj.__class__ is dict and len(obj) == 1:
                (k, v), = obj.items()
                c = v.__class__
                if (c is str or c is int) and k.__class__ is str and k == one:
                    a = admitted_get(v)
                    if a is not None:
                        return {"answer": loads(a.raw) if a.fresh else a.value, "margin": margin,
                                "nonconformity": nonconformity}, None
                    vk = v
            return admit_one(obj, vk)
    else:
        def lookup(obj: Any) -> tuple[dict[str, Any] | None, bytes | None]:
            vk = value_key(obj)
            if vk is not None:
                a = admitted_get(vk)
                if a is not None:
                    return out(a), None
            return admit_one(obj, vk)

    dict_set, one_set, str_set, value_types = {dict}, {1}, {str}, {str, int}

    def lookup_many(objs: list[Any]) -> tuple[list[dict[str, Any] | None], list[bytes | None] | None]:
        vals: list[Any] | None = None
        if (one is not None and objs and set(map(type, objs)) == dict_set and set(map(len, objs)) == one_set
                and set(map(type, chain.from_iterable(objs))) == str_set):
            # one-field inputs tested a property at a time over the whole list (each test a C
            # loop): exactly dicts of one key, each key exactly a str and the field (the
            # lookup), each value exactly a str or an int
            try:
                vals = list(map(getitem, objs, repeat(one)))
            except KeyError:
                vals = None
            if vals is not None and not set(map(type, vals)) <= value_types:
                vals = None
        if vals is None:
            vals = list(map(value_key, objs))
            got = [None if v is None else admitted_get(v) for v in vals]
        else:
            got = list(map(admitted_get, vals))
        if None not in got:
            if fresh_any:
                return [out(a) for a in got], None
            return [{"answer": a.value, "margin": margin, "nonconformity": nonconformity} for a in got], None
        rest = [i for i, a in enumerate(got) if a is None]
        outs: list[Any] = [None if a is None else out(a) for a in got]
        keys: list[bytes | None] = [None] * len(objs)
        more, more_keys = admit([objs[i] for i in rest], [vals[i] for i in rest])
        for i, o, k in zip(rest, more, more_keys):
            outs[i] = o
            keys[i] = k
        return outs, keys

    return lookup, lookup_many


class TableIndex:
    """The verified table of one artifact: canonical input bytes -> the code's hit output.

    Attributes:
        entries: number of entries. digest: the declared (and checked) ``sha256:`` of the
            segment. address, nbytes: where the segment lies in linear memory and its size.
        margin, nonconformity: the numbers every hit output carries.
        fields: the sorted field names of the table's first key when it is an object (the
            shape :attr:`recall` and :attr:`answer` know without encoding), else None.
        hit: ``hit(key: bytes, obj=None) -> dict | None``: the hit output of canonical input
            bytes (a new dict each call; a list or object answer is decoded afresh, so changing
            it never changes the table) or None. Given ``obj``, the input whose canonical bytes
            ``key`` are, a hit is remembered for :attr:`recall`.
        recall: ``recall(obj) -> dict | None``: the hit output of an input object that hit
            before through ``hit`` (None: never seen, or not of the known shape); no encoding.
        answer: ``answer(obj) -> dict | None``: the hit output of an input whose schema check is
            known to pass (see :meth:`bind_schema`), else None; never raises.
        lookup: ``lookup(obj) -> (dict | None, bytes | None)``: ``answer`` and the input's
            canonical bytes where they were computed (None where not), so a miss is not encoded
            again to run the code.
        answers: ``answers(objs: list) -> list[dict | None]``: ``answer`` of each, in order.
        lookup_many: ``lookup_many(objs) -> (outs, keys | None)``: ``answers`` and, where some
            missed, each input's canonical bytes where computed (None: not; the whole list None
            when every input hit).
        dropped: keys whose declared answer the code did not give (no longer answered from the
            table; see :meth:`bind_code`). ``len``, ``in``, :meth:`items` and
            :meth:`answer_bytes` still report the table as read from the bytes.

    Every answer is the code's: once :meth:`bind_code` gives the code, the first hit of each
    key runs the key through it and compares (a batch's first hits in one ``run_batch`` call);
    a key it answers as declared is answered from the table from then on, any other is dropped
    from the table (the code answers it, as every miss). Unbound, a hit is the declared answer.

    Why a remembered input answers as its bytes do: a *value key* exists only for a ``dict``
    whose keys are exactly the :attr:`fields` (each of class ``str``) and whose values are
    exactly ``str`` or ``int`` (never ``bool``, ``float`` or a subclass): the tuple of its
    values in field order (the value itself for one field). Two such inputs have equal value
    keys iff their canonical JSON is equal (same fields, each value's encoding equal; a ``str``
    and an ``int`` never compare equal, and within each type equality is the encoding's), so a
    value key remembered from one input's confirmed bytes answers every input with that key,
    and only those. The memory holds at most one value key per entry (only hits are remembered).

    Build with :func:`read_table`.
    """

    __slots__ = ("entries", "digest", "address", "nbytes", "margin", "nonconformity", "fields", "hit", "recall",
                 "answer", "answers", "lookup", "lookup_many", "value_key", "dropped", "_entries", "_validate", "_run_code", "_verified")

    def __init__(self, entries: dict[bytes, _Answer], *, digest: str, address: int, nbytes: int, margin: float,
                 nonconformity: float, fields: tuple[str, ...] | None, fresh: bool | None = None) -> None:
        self._entries = entries
        self.entries = len(entries)
        self.digest = digest
        self.address = address
        self.nbytes = nbytes
        self.margin = margin
        self.nonconformity = nonconformity
        self.fields = fields
        self.dropped: list[bytes] = []
        self._validate: Callable[[Any], None] | None = None
        self._run_code: Callable[[list[str]], list[Any]] | None = None
        verified: set[bytes] = set()  # keys the code answered as declared
        self._verified = verified
        value_key = _value_key_fn(fields)
        self.value_key = value_key
        one = fields[0] if fields is not None and len(fields) == 1 else None
        out = _out_fn(margin, nonconformity)
        confirm = self._confirm_fn(entries, verified, out)
        self.hit, self.recall = self._hit_fns(entries, verified, confirm, value_key, one, out)
        admitted: dict[Any, _Answer] = {}  # value key -> answer, of hits whose schema check passed
        admit, admit_one = self._admit_fns(entries, verified, confirm, admitted, out)
        fresh_any = any(a.fresh for a in entries.values()) if fresh is None else fresh
        lookup, lookup_many = _lookup_fns(one, value_key, admitted.get, admit, admit_one, out, margin, nonconformity,
                                          fresh_any)
        self.lookup, self.lookup_many = lookup, lookup_many

        def answer(obj: Any) -> dict[str, Any] | None:
            return lookup(obj)[0]

        def answers(objs: list[Any]) -> list[dict[str, Any] | None]:
            return lookup_many(objs)[0]

        self.answer = answer
        self.answers = answers

    def _confirm_fn(self, entries: dict[bytes, _Answer], verified: set[bytes],
                    out: Callable[[_Answer], dict[str, Any]]) -> Callable[[list[bytes]], None]:
        """The function that runs keys not yet confirmed through the code and confirms or drops each."""
        digest = self.digest

        def confirm(keys: list[bytes]) -> None:
            """Run the keys not yet confirmed through the code (one batch): confirm or drop each."""
            run = self._run_code
            todo = [k for k in dict.fromkeys(keys) if k not in verified and k in entries]
            if run is None or not todo:
                return
            try:
                got = run([k.decode("utf-8") for k in todo])
            except OutputError as e:  # one key the code cannot take spoils its batch: one at a time
                if len(todo) > 1:
                    for k in todo:
                        confirm([k])
                    return
                got = [f"no output ({e})"]
            except Exception:  # noqa: BLE001 - a limit or trap: unconfirmed, the caller runs the code
                return
            for k, o in zip(todo, got):
                if o == out(entries[k]):
                    verified.add(k)
                else:
                    if self._entries is entries:  # the table as read stays what items() reports
                        self._entries = dict(entries)
                    entries.pop(k, None)
                    self.dropped.append(k)
                    log.warning("table %s: the code does not answer %r as the table declares (%.80s); the key is "
                                "dropped from the fast path", digest[:19], k[:60], o)

        return confirm

    def _hit_fns(self, entries: dict[bytes, _Answer], verified: set[bytes], confirm: Callable[[list[bytes]], None],
                 value_key: Callable[[Any], Any], one: str | None,
                 out: Callable[[_Answer], dict[str, Any]]) -> tuple[Callable[..., Any], Callable[[Any], Any]]:
        """``(hit, recall)``: a hit by canonical bytes (confirmed on its first use, its value key
        remembered) and a recall by value key of what hit before."""
        get, loads, margin, nonconformity, miss = entries.get, strict_loads, self.margin, self.nonconformity, _MISS
        seen: dict[Any, _Answer] = {}  # value key -> answer, of inputs that hit through hit()
        seen_get = seen.get

        def hit(key: bytes, obj: Any = miss) -> dict[str, Any] | None:
            a = get(key)
            if a is None:
                return None
            if key not in verified and self._run_code is not None:
                confirm([key])
                if key not in verified:
                    return None
            if obj is not miss:
                vk = value_key(obj)
                if vk is not None:
                    seen[vk] = a
            return {"answer": loads(a.raw) if a.fresh else a.value, "margin": margin, "nonconformity": nonconformity}

        if one is not None:
            def recall(obj: Any) -> dict[str, Any] | None:
                if obj.__class__ is dict and len(obj) == 1:
                    (k, v), = obj.items()
                    c = v.__class__
                    if (c is str or c is int) and k.__class__ is str and k == one:
                        a = seen_get(v)
                        if a is not None:
                            return {"answer": loads(a.raw) if a.fresh else a.value, "margin": margin,
                                    "nonconformity": nonconformity}
                return None
        else:
            def recall(obj: Any) -> dict[str, Any] | None:
                vk = value_key(obj)
                a = seen_get(vk) if vk is not None else None
                return None if a is None else out(a)

        return hit, recall

    def _admit_fns(self, entries: dict[bytes, _Answer], verified: set[bytes], confirm: Callable[[list[bytes]], None],
                   admitted: dict[Any, _Answer],
                   out: Callable[[_Answer], dict[str, Any]]) -> tuple[Callable[..., Any], Callable[..., Any]]:
        """``(admit, admit_one)``: the lookup of inputs not yet in ``admitted`` (encoded, schema
        checked once, first hits confirmed), remembering what they admit."""
        get, contains = entries.get, entries.__contains__
        admitted_keys: set[bytes] = set()  # canonical bytes of admitted hits, for plain inputs without a value key
        encode_plain = _encode_plain

        def admissible(obj: Any, key: bytes | None) -> bool:
            """Whether ``key`` (``obj``'s canonical bytes) is a table key whose input passes the
            schema check (its first verdict remembered)."""
            if key is None or key not in entries or self._validate is None:
                return False
            if key not in admitted_keys:
                try:  # the first hit of these bytes: their verdict, remembered when it passes
                    self._validate(obj)
                except InputSchemaError:
                    return False  # the caller validates again and deopts
                admitted_keys.add(key)
            return True

        def admit(objs: list[Any], vks: list[Any]) -> tuple[list[dict[str, Any] | None], list[bytes | None]]:
            """``lookup`` of inputs not in the admitted memory (value keys ``vks``, None where
            there is none): encoded, their first hits confirmed together, remembered."""
            keys = [encode_plain(o) for o in objs]
            if not any(map(contains, keys)):  # no table key among them (a C loop): every one a miss
                return [None] * len(objs), keys
            ok = [admissible(o, k) for o, k in zip(objs, keys)]
            bound = self._run_code is not None
            if bound:
                confirm([k for k, y in zip(keys, ok) if y and k not in verified])
            outs: list[dict[str, Any] | None] = []
            for key, y, vk in zip(keys, ok, vks):
                a = get(key) if y and (key in verified or not bound) else None
                if a is None:
                    outs.append(None)
                    continue
                if vk is not None:
                    admitted[vk] = a
                outs.append(out(a))
            return outs, keys

        def admit_one(obj: Any, vk: Any) -> tuple[dict[str, Any] | None, bytes | None]:
            """``admit`` of one input (no lists on the way of a miss)."""
            key = encode_plain(obj)
            if key is None or key not in entries:
                return None, key
            if not admissible(obj, key):
                return None, key
            if key not in verified and self._run_code is not None:
                confirm([key])
                if key not in verified:
                    return None, key
            a = get(key)
            if a is None:
                return None, key
            if vk is not None:
                admitted[vk] = a
            return out(a), key

        return admit, admit_one

    def bind_schema(self, validate: Callable[[Any], None]) -> None:
        """Let :attr:`answer` skip ``validate`` (an input schema check raising
        :class:`InputSchemaError`) where its verdict is known: the input is a table hit and a
        plain object (a ``dict`` with ``str`` keys whose values are exactly ``str``, ``int``,
        ``float``, ``bool`` or None), so every such input with the same canonical JSON is an
        equal object of the same types, which ``validate`` judges alike; and an input with
        these bytes passed ``validate`` before (checked on the first hit of each, then
        remembered). Without it :attr:`answer` answers nothing."""
        self._validate = validate

    def bind_code(self, run_texts: Callable[[list[str]], list[Any]], confirmed: Sequence[bytes] = ()) -> None:
        """Confirm every key against the code before it is answered: ``run_texts(texts)`` is the
        code's outputs for canonical input texts (a failure leaves the keys unconfirmed, so the
        caller runs the code); ``confirmed``: keys the caller has already compared."""
        self._run_code = run_texts
        self._verified.update(k for k in confirmed if k in self._entries)

    def __len__(self) -> int:
        return self.entries

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def answer_bytes(self, key: bytes) -> bytes | None:
        """The canonical JSON bytes of ``key``'s answer, or None (not in the table)."""
        a = self._entries.get(key)
        return None if a is None else a.raw

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        """``(key bytes, answer bytes)`` of every entry, in index order (by hash, then key)."""
        return ((k, a.raw) for k, a in self._entries.items())


_MISS = object()


def _value_key_fn(fields: tuple[str, ...] | None) -> Callable[[Any], Any]:
    """``value_key(obj)``: the value key of ``obj`` for ``fields`` (see :class:`TableIndex`), or
    None."""
    if fields is None:
        return lambda obj: None
    miss = _MISS
    if len(fields) == 1:
        one = fields[0]

        def value_key(obj: Any) -> Any:
            if obj.__class__ is dict and len(obj) == 1:
                (k, v), = obj.items()
                c = v.__class__
                if (c is str or c is int) and k.__class__ is str and k == one:
                    return v
            return None
        return value_key
    nf = len(fields)

    def value_keys(obj: Any) -> Any:
        if obj.__class__ is not dict or len(obj) != nf:
            return None
        for k in obj:
            if k.__class__ is not str:
                return None
        vals = tuple([obj.get(f, miss) for f in fields])
        for v in vals:
            c = v.__class__
            if c is not str and c is not int:
                return None
        return vals
    return value_keys


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
    keys = [blob[i:j] for i, j in zip(kp.tolist(), (kp + kl).tolist())]
    # each distinct answer (by its place in the segment) sliced and decoded once
    places, which = np.unique(ap * (1 << 32) + al, return_inverse=True)
    answers: list[_Answer] = []
    by_bytes: dict[bytes, _Answer] = {}
    for place in places.tolist():
        i = place >> 32
        ab = blob[i:i + (place & 0xFFFFFFFF)]
        got = by_bytes.get(ab)
        if got is None:
            try:
                got = by_bytes[ab] = _Answer(ab, strict_loads(ab))
            except ValueError as e:
                raise ManifestError(f"{where}: an answer is not JSON: {e}") from None
        answers.append(got)
    entries: dict[bytes, _Answer] = dict(zip(keys, np.array(answers, dtype=object)[which].tolist() if n else []))
    if len(entries) != n:
        raise ManifestError(f"{where}: {n - len(entries)} key(s) appear twice in the index")
    if n:
        wrong = first_wrong_hash(blob, n, address)
        if wrong >= 0:
            raise ManifestError(f"{where}: index entry {wrong}'s hash is not the FNV-1a 64 of its key")
    return TableIndex(entries, digest=digest, address=address, nbytes=nbytes, margin=margin, nonconformity=nonconf,
                      fields=_fields_of(keys[0]) if n else None, fresh=any(a.fresh for a in by_bytes.values()))


def _fields_of(key: bytes) -> tuple[str, ...] | None:
    """The sorted field names of a table key that is a JSON object, else None."""
    try:
        obj = strict_loads(key)
    except ValueError:
        return None
    return tuple(sorted(obj)) if obj.__class__ is dict and obj else None


def self_check_sample(table: TableIndex, k: int = SELF_CHECK_SAMPLE) -> list[bytes]:
    """At most ``k`` keys of ``table`` evenly spaced over its index order (first and last
    included): the keys the loader runs through the code."""
    n = table.entries
    if n == 0:
        return []
    keys = list(table._entries)
    if n <= k:
        return keys
    return [keys[round(i * (n - 1) / (k - 1))] for i in range(k)]


def check_against_code(table: TableIndex, run_text: Callable[[list[str]], list[Any]], source: str) -> list[bytes]:
    """Refuse a table the code does not answer as declared: ``run_text(texts)`` (the code's
    outputs for canonical input texts, through ``run_batch``) must equal the table's hit output
    on every key of :func:`self_check_sample`.

    Returns:
        The keys compared (each answered as declared).

    Raises:
        ManifestError: an output differs (naming the first key).
    """
    keys = self_check_sample(table)
    if not keys:
        return []
    try:
        outs = run_text([k.decode("utf-8") for k in keys])
    except OutputError as e:
        raise ManifestError(f"{source}: model.table declares keys the code does not answer ({e})") from None
    for key, out in zip(keys, outs):
        if out != table.hit(key):
            raise ManifestError(f"{source}: model.table declares an answer for {key[:60]!r} that the code does not "
                                f"give ({str(out)[:80]})")
    return keys


__all__ = ["ENTRY", "FNV64_OFFSET_BASIS", "FNV64_PRIME", "LAYOUT", "TableIndex", "VECTOR_MIN_KEYS", "check_against_code",
           "fnv1a64", "fnv1a64_many", "read_table", "self_check_sample", "table_declaration"]
