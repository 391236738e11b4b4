"""The fuzz targets: ``TARGETS[name]`` is a :class:`Target` whose ``one_input(data)`` checks what
must hold for any ``data`` (bytes).

A target raises :class:`Finding` when a check fails; any exception outside the target's
``allowed`` errors is a crash too. ``allowed`` are the documented refusals (a malformed artifact
is a :class:`~auto_runtime.errors.MalformedArtifact`, a bad regex a ``RegexError``, a bad record an
``IngestError``...). ``seeds()`` gives the corpus a run starts from (real artifacts, patterns,
records, streams). Each target sets itself up lazily, once per process.
"""

from __future__ import annotations

import json
import os
import random
import re
import tempfile
from dataclasses import dataclass, field
from typing import Any, Callable


class Finding(AssertionError):
    """A check that must hold for every input did not."""


@dataclass
class Target:
    """One fuzz target.

    Attributes:
        name: the target's name; one_input: ``data -> None`` (raises on a finding);
        seeds: ``() -> list[bytes]``; allowed: the exception types that are documented refusals.
    """

    name: str
    one_input: Callable[[bytes], None]
    seeds: Callable[[], list[bytes]]
    allowed: Callable[[], tuple[type[BaseException], ...]] = field(default=lambda: ())


def _fdp(data: bytes) -> random.Random:
    """A deterministic stream of choices drawn from ``data`` (for structured inputs)."""
    return random.Random(data)


# ----------------------------------------------------------------------------- wasm_sections


def _sections_one(data: bytes) -> None:
    from auto_runtime import wasm_sections

    info = wasm_sections.parse(data)
    for sec in info.sections:
        if not (0 <= sec.offset <= sec.offset + sec.size <= len(data)):
            raise Finding(f"section {sec.id} [{sec.offset}, +{sec.size}] outside the {len(data)}-byte input")
    for name, payload in info.custom_sections:
        if len(payload) > len(data) or not isinstance(name, str):
            raise Finding("custom section larger than the input")


def _artifact_seeds() -> list[bytes]:
    from fuzz import seeds

    return list(seeds.artifacts().values())


def _malformed() -> tuple[type[BaseException], ...]:
    from auto_runtime.errors import MalformedArtifact

    return (MalformedArtifact,)


# ----------------------------------------------------------------------------- artifact_load

_LOAD_INPUTS = [{"t": "IT needs $45 for cables", "ticket": "refund my invoice", "request": "IT needs $45 for cables"}]


def _load_one(data: bytes) -> None:
    from auto_runtime import Artifact, Limits

    art = Artifact.load(data, limits=Limits(fuel=10**8, timeout_ms=5000))
    for inp in _LOAD_INPUTS:
        try:
            out = art.call(inp)
        except _call_refusals():
            continue
        if not isinstance(out, dict):
            raise Finding(f"a call answered {type(out).__name__}, not an object")


def _call_refusals() -> tuple[type[BaseException], ...]:
    from auto_runtime.errors import InputSchemaError, LimitError, OutputError, TrapError

    return (InputSchemaError, LimitError, OutputError, TrapError)


def _artifact_errors() -> tuple[type[BaseException], ...]:
    from auto_runtime.errors import ArtifactError

    return (ArtifactError,)


# ----------------------------------------------------------------------------- manifest

_MANIFESTS: list[tuple[bytes, dict[str, Any]]] = []
_JSON_ONLY = [None, True, False, 0, -1, 1, 2, 10**6, 2**63, -(2**63) - 1, 0.5, -0.0, 1e300, "", "x", "stack",
              "conformal-novelty", "selective-risk", "program", "none", "string", "object", "number", [], {}]


def _manifest_setup() -> list[tuple[bytes, dict[str, Any]]]:
    """``(code without its manifest, manifest without its digest)`` of every seed artifact."""
    if not _MANIFESTS:
        from auto_runtime import wasm_sections
        from auto_runtime.manifest import DIGEST_KEY, read_manifest

        from fuzz import seeds

        for wasm in seeds.artifacts().values():
            last = wasm_sections.parse(wasm).sections[-1]  # emit appends the manifest section last
            header = 1 + len(wasm_sections.encode_uleb(last.size))
            man = {k: v for k, v in read_manifest(wasm).items() if k != DIGEST_KEY}
            _MANIFESTS.append((wasm[: last.offset - header], man))
    return _MANIFESTS


def _json_value(rng: random.Random, depth: int = 0) -> Any:
    r = rng.random()
    if depth > 2 or r < 0.6:
        return rng.choice(_JSON_ONLY)
    if r < 0.8:
        return [_json_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {rng.choice(["method", "components", "alpha", "threshold", "n", "type", "properties", "required",
                        "x"]): _json_value(rng, depth + 1) for _ in range(rng.randrange(4))}


def _mutate(rng: random.Random, obj: Any) -> Any:
    """``obj`` with one value somewhere in it replaced, deleted or added."""
    if isinstance(obj, dict) and obj and rng.random() < 0.8:
        k = rng.choice(sorted(obj))
        out = dict(obj)
        r = rng.random()
        if r < 0.15:
            del out[k]
        elif r < 0.3:
            out[rng.choice(["x", "extra", k + "_"])] = _json_value(rng)
        elif r < 0.55:
            out[k] = _json_value(rng)
        else:
            out[k] = _mutate(rng, obj[k])
        return out
    if isinstance(obj, list) and obj and rng.random() < 0.8:
        i = rng.randrange(len(obj))
        return obj[:i] + [_mutate(rng, obj[i])] + obj[i + 1:]
    return _json_value(rng)


def _manifest_one(data: bytes) -> None:
    from auto.emit import emit
    from auto_runtime import Artifact, Limits, TieredTask
    from auto_runtime.errors import ArtifactError

    rng = _fdp(data)
    code, man = rng.choice(_manifest_setup())
    for _ in range(1 + rng.randrange(4)):
        man = _mutate(rng, man)
    if not isinstance(man, dict):
        return
    try:
        wasm = emit(code, man)  # a valid digest: the loader's deeper checks are reached
        art = Artifact.load(wasm, limits=Limits(fuel=10**8, timeout_ms=5000))
    except ArtifactError:
        return
    tiered = TieredTask(art, reference=lambda inp: "from the reference")
    for inp in _LOAD_INPUTS + [{"ticket": "x" * rng.randrange(300)}, {}]:
        res = tiered(inp)  # a broken guard deopts, never raises; a bad input goes to the reference
        if res.tier not in ("tier-1", "tier-0", "declined"):
            raise Finding(f"tier {res.tier!r}")
        if res.tier == "tier-0" and res.answer != "from the reference":
            raise Finding("a deopt did not answer from the reference")


def _manifest_seeds() -> list[bytes]:
    return [bytes([i, 255 - i]) * (i + 2) for i in range(24)]


# ----------------------------------------------------------------------------- json_abi

_ABI: dict[str, Any] = {}


def _abi_setup() -> dict[str, Any]:
    if not _ABI:
        import wasmtime

        from fuzz import seeds

        cfg = wasmtime.Config()
        cfg.consume_fuel = True
        engine = wasmtime.Engine(cfg)
        for name, (model, code) in seeds.models().items():
            _ABI[name] = (model, wasmtime.Module(engine, code), engine)
    return _ABI


def _call_raw(module: Any, engine: Any, export: str, data: bytes) -> bytes:
    """One fresh instance, ``alloc`` + write + ``export(ptr, len)``, the output bytes (fuel-metered:
    a loop that never ends is a finding, not a hang)."""
    import wasmtime

    store = wasmtime.Store(engine)
    store.set_fuel(2 * 10**9)
    store.set_limits(memory_size=256 * 2**20)
    ex = wasmtime.Instance(store, module, []).exports(store)
    mem = ex["memory"]
    p = ex["alloc"](store, len(data))
    if p + len(data) > mem.data_len(store):
        return b'{"error":"too_large"}'  # alloc could not provide the bytes (the ABI's answer)
    mem.write(store, data, p)
    r = ex[export](store, p, len(data))
    ptr, n = (r >> 32) & 0xFFFFFFFF, r & 0xFFFFFFFF
    return bytes(mem.read(store, ptr, ptr + n))


def _program_expected(program: Any, data: bytes) -> bytes | None:
    """The interpreter's answer for a well-formed single-field input, else None (not compared)."""
    from auto.canonical import canonical_json
    from auto.codegen import MAX_INPUT
    from auto.models.program import run_program
    from auto_runtime.jsonio import strict_loads

    if len(data) > MAX_INPUT:
        return b'{"error":"too_large"}'
    try:
        obj = strict_loads(data.strip(b" \t\r\n"))
    except ValueError:
        return None
    if not (isinstance(obj, dict) and isinstance(obj.get("t"), str)):
        return None
    return canonical_json(run_program(program, {"t": obj["t"]})).encode("utf-8")


def _abi_one(data: bytes) -> None:
    from auto.codegen import ERROR_CODES, reference_run, reference_run_batch
    from auto_runtime.jsonio import strict_loads

    models = _abi_setup()
    rng = _fdp(data[:8])
    name = sorted(models)[rng.randrange(len(models))]
    model, module, engine = models[name]
    export = "run_batch" if data[:1] == b"[" else "run"
    got = _call_raw(module, engine, export, data)
    try:
        out = strict_loads(got)
    except ValueError as e:
        raise Finding(f"{name}.{export} answered bytes that are not JSON ({e}): {got[:200]!r}") from None
    if not isinstance(out, (dict, list)):
        raise Finding(f"{name}.{export} answered {got[:200]!r}")
    if isinstance(out, dict) and "error" in out and out["error"] not in ERROR_CODES:
        raise Finding(f"{name}.{export} answered an unknown error {out['error']!r}")
    if name.startswith("program"):
        if export == "run":
            want = _program_expected(model, data)
            if want is not None and got != want:
                raise Finding(f"{name}.run disagrees with the interpreter: {got[:200]!r} != {want[:200]!r}")
        return
    try:
        want = (reference_run_batch if export == "run_batch" else reference_run)(model, data)
    except RecursionError:
        return  # deeper than Python's json reader (documented: the artifact has no such limit)
    if got != want:
        raise Finding(f"{name}.{export} disagrees with its Python reference: {got[:200]!r} != {want[:200]!r}")


def _abi_seeds() -> list[bytes]:
    from fuzz import seeds

    out = [json.dumps({"t": "IT needs $45 for cables"}).encode(), json.dumps({"ticket": "refund my invoice"}).encode(),
           b'[{"ticket":"crash on login"},{"ticket":"x"}]', b'{"ticket":"\\u00e9\\ud83d\\ude00"}', b'{}', b'[]',
           b'{"t": 5}', b'  {"t":"mail bob@example.com now"}  ']
    out += [json.dumps({"ticket": t}).encode() for t, _ in seeds.tickets(5, seed=9)]
    return out


# ----------------------------------------------------------------------------- regex

_ALPHABET = "ab-.é\n "


def _python_pattern(p: str) -> str:
    """The pattern in Python's syntax (the product's own translation: ``$`` is end of text)."""
    from auto.models.program.synth.patterns import py_pattern

    return py_pattern(p)


def _python_slots(pattern: str, text: str) -> tuple[int, ...] | None:
    m = re.compile(_python_pattern(pattern), re.ASCII).search(text)
    if m is None:
        return None
    slots: list[int] = []
    for g in range(m.re.groups + 1):
        s, e = m.span(g)
        slots += [-1, -1] if s < 0 else [len(text[:s].encode()), len(text[:e].encode())]
    return tuple(slots)


def _regex_one(data: bytes) -> None:
    from auto.models.program.regex import compile_regex, pike_search

    cut = data.find(b"\x00")
    pattern = (data if cut < 0 else data[:cut]).decode("utf-8", "replace")[:80]
    rest = b"" if cut < 0 else data[cut + 1:]
    texts = [t.decode("utf-8", "replace") for t in rest.split(b"\x00")[:4]] or ["", "ab-a b"]
    prog = compile_regex(pattern)
    try:
        re.compile(_python_pattern(pattern), re.ASCII)
    except (re.error, RecursionError, OverflowError):
        raise Finding(f"compile_regex accepted {pattern!r}, which Python's re refuses") from None
    for text in texts:
        text = text[:200]
        if text == "" and r"\B" in pattern:
            continue  # Python <= 3.13 answers \B on the empty text differently (tests/test_extract_regex.py)
        got = pike_search(prog, text.encode("utf-8", "surrogatepass"))
        if "\udcff" in text or any(0xD800 <= ord(c) <= 0xDFFF for c in text):
            continue  # not UTF-8: Python compares code points, we bytes
        want = _python_slots(pattern, text)
        if got != want:
            raise Finding(f"{pattern!r} on {text!r}: Pike VM {got} != re {want}")


def _regex_seeds() -> list[bytes]:
    pats = [r"(\d+)-(\w+)", r"\b\w+@\w+\.com\b", r"(?i)WORLD", r"(a|ab)(c|bcd)?", r"^\s*(\S+)", r"[^a-z ]+",
            r"\$(\d+(?:,\d{3})*(?:\.\d+)?)", r"x{2,3}", r"\Bo", r"(?:ab|a)+b", r"[\]\\]+", r"é+$"]
    return [p.encode() + b"\x00" + t for p in pats for t in (b"12-abc and 3-de\x00mail bob@example.com now",)]


def _regex_errors() -> tuple[type[BaseException], ...]:
    from auto.models.program.regex import RegexError

    return (RegexError,)


# ----------------------------------------------------------------------------- store_ingest

_STORE: dict[str, Any] = {}
STORE_ROWS = 2000
"""Spans after which ``store_ingest`` starts a fresh store (each input verifies the whole store)."""
_JSON_LEAVES = [None, True, False, 0, -1, 2**63, -(2**64), 1.5, -0.0, 1e308, "", "é", "\x00", "\ud800", "a" * 300]


def _value(rng: random.Random, depth: int = 0) -> Any:
    r = rng.random()
    if depth > 3 or r < 0.5:
        return rng.choice(_JSON_LEAVES + [float("nan"), float("inf"), b"bytes", object()] if rng.random() < 0.05
                          else _JSON_LEAVES)
    if r < 0.75:
        return [_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {rng.choice(["a", "b", "", "é", "input"]): _value(rng, depth + 1) for _ in range(rng.randrange(4))}


def _record(rng: random.Random, kind: str) -> dict[str, Any]:
    from auto.store import new_span_id, new_trace_id

    ids = _STORE["ids"]
    tid = rng.choice(ids["traces"]) if ids["traces"] and rng.random() < 0.3 else new_trace_id()
    sid = rng.choice(ids["spans"]) if ids["spans"] and rng.random() < 0.2 else new_span_id()
    rec: dict[str, Any] = {"trace_id": tid, "name": rng.choice(["t", "", "é", "x" * 100]),
                           "started_ns": rng.choice([0, 1, 2**62, -1, 1.5, "1"]),
                           "ended_ns": rng.choice([0, 5, 2**62, None]),
                           "status": rng.choice(["ok", "error", "weird", None]), "attributes": _value(rng)}
    if kind == "span":
        rec.update({"span_id": sid, "parent_span_id": rng.choice([None, sid, "zz"]),
                    "kind": rng.choice(["task", "llm", "tool", "other"]), "task": rng.choice([None, "t", "u"]),
                    "site": rng.choice([None, "s"]), "input": _value(rng), "output": _value(rng), "error": _value(rng)})
    if rng.random() < 0.1:
        rec.pop(rng.choice(sorted(rec)))
    if rng.random() < 0.05:
        rec["digest"] = "sha256:" + "0" * 64
    return rec


def _ingest_one(data: bytes) -> None:
    from auto.errors import IngestError
    from auto.store import Store

    if not _STORE or len(_STORE["ids"]["spans"]) > STORE_ROWS:  # a fresh store: verify stays cheap
        if _STORE:
            _STORE["store"].close()
        path = os.path.join(tempfile.mkdtemp(prefix="auto-fuzz-store-"), "s.sqlite")
        _STORE.update(path=path, store=Store(path), ids={"spans": [], "traces": []})
    st, ids = _STORE["store"], _STORE["ids"]
    rng = _fdp(data)
    spans = [_record(rng, "span") for _ in range(rng.randrange(4))]
    traces = [_record(rng, "trace") for _ in range(rng.randrange(3))]
    before = st.verify()
    try:
        res = st.ingest(spans, traces)
    except IngestError:
        after = st.verify()
        if (after.spans, after.traces) != (before.spans, before.traces):
            raise Finding("a refused batch left rows behind") from None
        return
    after = st.verify()
    if not after.ok:
        raise Finding(f"the store no longer verifies after an accepted batch: {after.mismatches[:3]}")
    if after.spans != before.spans + res["spans"] or after.traces != before.traces + res["traces"]:
        raise Finding(f"ingest reported {res} but the store holds {after.spans - before.spans} new spans")
    for s in spans:
        got = st.spans(trace_id=s["trace_id"])
        if not any(g["span_id"] == s["span_id"] for g in got):
            raise Finding(f"an accepted span {s['span_id']} cannot be read back")
    ids["spans"] += [s["span_id"] for s in spans]
    ids["traces"] += [t["trace_id"] for t in traces]


def _ingest_seeds() -> list[bytes]:
    return [bytes([i]) * (i + 1) for i in range(16)]


# ----------------------------------------------------------------------------- sse


def _sse_one(data: bytes) -> None:
    from auto.canonical import canonical_json
    from auto.record.body import ContentDecoder, SSEParser
    from auto.record.completion import assemble_completion, parse_json, stream_outcome

    rng = _fdp(data[:4])
    parser, decoder = SSEParser(), ContentDecoder(rng.choice(["", "identity", "gzip", "br"]))
    i = 0
    while i < len(data):  # the same bytes in arbitrary network chunks
        n = rng.randrange(1, 64)
        parser.feed(decoder.decode(data[i:i + n]))
        i += n
    parser.close()
    output, meta, error = stream_outcome(parser.events)
    try:
        canonical_json({"output": output, "meta": meta, "error": error})
    except (TypeError, ValueError) as e:
        raise Finding(f"a stream's summary cannot be stored: {e}") from None
    try:
        body = parse_json(data)
    except ValueError:
        return
    output, meta = assemble_completion(body)
    try:
        canonical_json({"output": output, "meta": meta})
    except (TypeError, ValueError) as e:
        raise Finding(f"a body's summary cannot be stored: {e}") from None


def _sse_seeds() -> list[bytes]:
    def sse(*chunks: Any) -> bytes:
        return b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"

    tc = {"index": 0, "id": "call_a", "type": "function", "function": {"name": "f", "arguments": "{\"a\": 1}"}}
    return [
        sse({"choices": [{"index": 0, "delta": {"content": "hi"}}]}, {"choices": [], "usage": {"prompt_tokens": 1}}),
        sse({"choices": [{"index": 0, "delta": {"tool_calls": [tc, {**tc, "id": "call_b"}]}}]}),
        b"event: error\ndata: {\"error\": {\"message\": \"boom\"}}\n\n",
        json.dumps({"choices": [{"index": 0, "message": {"content": "x", "tool_calls": [tc]}}], "usage": {}}).encode(),
        b": comment\r\ndata: {\"choices\": 5}\r\n\r\ndata: NaN\n\n",
    ]


TARGETS: dict[str, Target] = {
    "wasm_sections": Target("wasm_sections", _sections_one, _artifact_seeds, _malformed),
    "artifact_load": Target("artifact_load", _load_one, _artifact_seeds, _artifact_errors),
    "manifest": Target("manifest", _manifest_one, _manifest_seeds),
    "json_abi": Target("json_abi", _abi_one, _abi_seeds),
    "regex": Target("regex", _regex_one, _regex_seeds, _regex_errors),
    "store_ingest": Target("store_ingest", _ingest_one, _ingest_seeds, lambda: (_ingest_error(),)),
    "sse": Target("sse", _sse_one, _sse_seeds),
}
"""Every target, by name."""


def _ingest_error() -> type[BaseException]:
    from auto.errors import IngestError

    return IngestError
