"""Test artifacts written as WAT, assembled with wasmtime.wat2wasm, plus the manifest section.

Only the runtime's own dependencies are used (no ``auto``): the manifest is canonical JSON
written here, appended as the ``auto.manifest`` custom section
(:func:`auto_runtime.wasm_sections.custom_section`, checked against fixed bytes in
test_wasm_sections.py).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import wasmtime

from auto_runtime.wasm_sections import custom_section

CALIBRATION = [round(0.05 * i, 2) for i in range(1, 20)]  # 0.05 .. 0.95, n = 19

INPUT_SCHEMA = {
    "type": "object",
    "properties": {"ticket": {"type": "string", "maxLength": 2000}},
    "required": ["ticket"],
    "additionalProperties": False,
}

BASE_MANIFEST: dict[str, Any] = {
    "format": "auto.artifact/1",
    "task": "echo",
    "generation": 1,
    "compiled_as": "specialist",
    "interface": {"input": INPUT_SCHEMA, "output": {}},
    "abi": {"exports": ["memory", "alloc", "run", "run_batch"], "encoding": "canonical-json"},
    "capabilities": [],
    "guard": {"method": "conformal-novelty", "alpha": 0.1, "n": len(CALIBRATION),
              "calibration_scores": CALIBRATION, "threshold": 0.9, "coverage_heldout": 0.9},
    "latency_us": {"p50": None, "p95": None},
    "cost_usd_micros_per_call": 0,
}


def canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")


def manifest(**overrides: Any) -> dict[str, Any]:
    m = copy.deepcopy(BASE_MANIFEST)
    for k, v in overrides.items():
        if v is _DELETE:
            m.pop(k, None)
        else:
            m[k] = v
    return m


class _Delete:
    pass


_DELETE = _Delete()
DELETE: Any = _DELETE


def build(wat: str, man: dict[str, Any] | None = None, *, raw_manifest: bytes | None = None,
          with_manifest: bool = True) -> bytes:
    """Assemble ``wat`` and append the manifest section."""
    wasm = bytes(wasmtime.wat2wasm(wat))
    if not with_manifest:
        return wasm
    payload = raw_manifest if raw_manifest is not None else canonical(man if man is not None else manifest())
    return wasm + custom_section("auto.manifest", payload)


def _wat_bytes(s: str) -> str:
    return "".join(c if c not in '"\\' else "\\" + c for c in s)


PRELUDE = """
  (memory (export "memory") 1)
  (func $ensure (param $end i32)
    (block $done
      (loop $grow
        (br_if $done (i32.le_u (local.get $end) (i32.shl (memory.size) (i32.const 16))))
        (if (i32.eq (memory.grow (i32.const 1)) (i32.const -1)) (then unreachable))
        (br $grow))))
  (func (export "alloc") (param $n i32) (result i32)
    (call $ensure (i32.add (i32.const 1024) (local.get $n)))
    (i32.const 1024))
"""


def echo_wat(nonconformity: str = "0.500000000", *, long_nonconformity: str | None = None,
             long_threshold: int = 1_000_000, margin: str = "1.000000000") -> str:
    """The ABI-following echo artifact.

    ``run`` answers ``{"answer": <the input object>, "margin": m, "nonconformity": s}`` where ``s``
    is ``long_nonconformity`` when the input's canonical JSON is longer than ``long_threshold``
    bytes, else ``nonconformity``. ``run_batch`` scans the input array (strings and nesting
    aware) and answers each item the same way.
    """
    long_nc = long_nonconformity or nonconformity
    suf_a = f',"margin":{margin},"nonconformity":{nonconformity}}}'
    suf_b = f',"margin":{margin},"nonconformity":{long_nc}}}'
    assert len(suf_a) == len(suf_b), "both nonconformity strings must have the same length"
    suflen = len(suf_a)
    return f"""
(module
  {PRELUDE}
  (data (i32.const 16) "{{\\"answer\\":")
  (data (i32.const 64) "{_wat_bytes(suf_a)}")
  (data (i32.const 256) "{_wat_bytes(suf_b)}")
  (func $emit (param $out i32) (param $src i32) (param $len i32) (result i32)
    (call $ensure (i32.add (i32.add (local.get $out) (local.get $len)) (i32.const 512)))
    (memory.copy (local.get $out) (i32.const 16) (i32.const 10))
    (memory.copy (i32.add (local.get $out) (i32.const 10)) (local.get $src) (local.get $len))
    (memory.copy (i32.add (i32.add (local.get $out) (i32.const 10)) (local.get $len))
                 (select (i32.const 256) (i32.const 64)
                         (i32.gt_u (local.get $len) (i32.const {long_threshold})))
                 (i32.const {suflen}))
    (i32.add (i32.add (local.get $out) (local.get $len)) (i32.const {10 + suflen})))
  (func $pack (param $p i32) (param $end i32) (result i64)
    (i64.or (i64.shl (i64.extend_i32_u (local.get $p)) (i64.const 32))
            (i64.extend_i32_u (i32.sub (local.get $end) (local.get $p)))))
  (func $out_base (param $p i32) (param $n i32) (result i32)
    (i32.and (i32.add (i32.add (local.get $p) (local.get $n)) (i32.const 7)) (i32.const -8)))
  (func (export "run") (param $p i32) (param $n i32) (result i64)
    (local $o i32)
    (local.set $o (call $out_base (local.get $p) (local.get $n)))
    (call $pack (local.get $o) (call $emit (local.get $o) (local.get $p) (local.get $n))))
  (func (export "run_batch") (param $p i32) (param $n i32) (result i64)
    (local $o i32) (local $cur i32) (local $i i32) (local $c i32) (local $depth i32)
    (local $instr i32) (local $esc i32) (local $start i32) (local $first i32)
    (local.set $o (call $out_base (local.get $p) (local.get $n)))
    (call $ensure (i32.add (local.get $o) (i32.const 16)))
    (i32.store8 (local.get $o) (i32.const 91))
    (local.set $cur (i32.add (local.get $o) (i32.const 1)))
    (local.set $first (i32.const 1))
    (block $end
      (loop $scan
        (br_if $end (i32.ge_u (local.get $i) (local.get $n)))
        (local.set $c (i32.load8_u (i32.add (local.get $p) (local.get $i))))
        (if (local.get $instr)
          (then
            (if (local.get $esc)
              (then (local.set $esc (i32.const 0)))
              (else
                (if (i32.eq (local.get $c) (i32.const 92)) (then (local.set $esc (i32.const 1))))
                (if (i32.eq (local.get $c) (i32.const 34)) (then (local.set $instr (i32.const 0)))))))
          (else
            (if (i32.eq (local.get $c) (i32.const 34)) (then (local.set $instr (i32.const 1))))
            (if (i32.or (i32.eq (local.get $c) (i32.const 91)) (i32.eq (local.get $c) (i32.const 123)))
              (then
                (local.set $depth (i32.add (local.get $depth) (i32.const 1)))
                (if (i32.eq (local.get $depth) (i32.const 1))
                  (then (local.set $start (i32.add (local.get $i) (i32.const 1)))))))
            (if (i32.and (i32.eq (local.get $depth) (i32.const 1))
                         (i32.or (i32.eq (local.get $c) (i32.const 44)) (i32.eq (local.get $c) (i32.const 93))))
              (then
                (if (i32.gt_u (local.get $i) (local.get $start))
                  (then
                    (if (i32.eqz (local.get $first))
                      (then
                        (i32.store8 (local.get $cur) (i32.const 44))
                        (local.set $cur (i32.add (local.get $cur) (i32.const 1)))))
                    (local.set $first (i32.const 0))
                    (local.set $cur (call $emit (local.get $cur)
                                              (i32.add (local.get $p) (local.get $start))
                                              (i32.sub (local.get $i) (local.get $start))))))
                (local.set $start (i32.add (local.get $i) (i32.const 1)))))
            (if (i32.or (i32.eq (local.get $c) (i32.const 93)) (i32.eq (local.get $c) (i32.const 125)))
              (then (local.set $depth (i32.sub (local.get $depth) (i32.const 1)))))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $scan)))
    (call $ensure (i32.add (local.get $cur) (i32.const 1)))
    (i32.store8 (local.get $cur) (i32.const 93))
    (local.set $cur (i32.add (local.get $cur) (i32.const 1)))
    (call $pack (local.get $o) (local.get $cur)))
)
"""


def abi_wat(run_body: str, *, extra: str = "", imports: str = "", memory: str | None = None) -> str:
    """A module with the ABI exports whose ``run`` and ``run_batch`` share ``run_body``."""
    prelude = PRELUDE if memory is None else PRELUDE.replace(
        '(memory (export "memory") 1)', memory)
    return f"""
(module
  {imports}
  {prelude}
  {extra}
  (func $body (param $p i32) (param $n i32) (result i64)
    {run_body})
  (func (export "run") (param $p i32) (param $n i32) (result i64)
    (call $body (local.get $p) (local.get $n)))
  (func (export "run_batch") (param $p i32) (param $n i32) (result i64)
    (call $body (local.get $p) (local.get $n)))
)
"""


def const_output_wat(text: str) -> str:
    """``run`` returns the constant bytes ``text`` (stored at offset 16)."""
    raw = text.encode()
    return abi_wat(
        f"(i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const {len(raw)}))",
        extra=f'(data (i32.const 16) "{_wat_bytes(text)}")',
    )


_COUNTER_TEXT = '{"answer":0,"margin":1.000000000,"nonconformity":0.500000000}'
COUNTER_WAT = abi_wat(
    """
    (global.set $calls (i32.add (global.get $calls) (i32.const 1)))
    (if (i32.eq (global.get $calls) (i32.const 3)) (then unreachable))
    (i32.store8 (i32.const 26) (i32.add (i32.const 48) (global.get $calls)))
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const %d))
    """ % len(_COUNTER_TEXT),
    extra='(global $calls (mut i32) (i32.const 0))\n'
          f'  (data (i32.const 16) "{_wat_bytes(_COUNTER_TEXT)}")',
)
"""``run`` counts its calls in a global and answers the count; the 3rd call traps."""

LOOP_WAT = abi_wat("(loop $l (br $l)) (i64.const 0)")
GROW_BOMB_WAT = abi_wat(
    "(loop $l (br_if $l (i32.ne (memory.grow (i32.const 1)) (i32.const -1)))) unreachable"
)
UNREACHABLE_WAT = abi_wat("unreachable")
BAD_POINTER_WAT = abi_wat("(i64.const 0x7FFFFFF000000064)")
BAD_LENGTH_WAT = abi_wat("(i64.const 0x00000000FFFFFFFF)")


TOOL_IMPORTS = """
  (import "auto" "tool_call" (func $tool_call (param i32 i32) (result i32)))
  (import "auto" "tool_result" (func $tool_result (param i32) (result i32)))
  (import "auto" "commit" (func $commit (param i32 i32) (result i32)))
"""

TOOL_CAPABILITIES = [{"module": "auto", "name": n} for n in ("commit", "tool_call", "tool_result")]


def tool_manifest(tools: list[dict[str, Any]], **overrides: Any) -> dict[str, Any]:
    """A capability artifact's manifest: program guard, the three tool imports, ``tools``."""
    base = {"capabilities": TOOL_CAPABILITIES, "tools": tools, "guard": {"method": "program"},
            "compiled_as": "region", "abi": {"exports": ["memory", "alloc", "run"], "encoding": "canonical-json"}}
    return manifest(**{**base, **overrides})


def tool_decl(name: str, effects: str = "read", *, kind: str = "tool", arguments: Any = None,
              result: Any = None) -> dict[str, Any]:
    return {"name": name, "kind": kind, "effects": effects,
            "arguments": arguments if arguments is not None else {
                "type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"],
                "additionalProperties": False},
            "result": result if result is not None else {"type": "object"}}


def tool_wat(steps: list[Any], *, loop_calls: int = 0, imports: str = TOOL_IMPORTS) -> str:
    """A capability artifact that performs ``steps`` in order, then answers the last tool result.

    Each step is ``bytes`` (a raw tool request: ``tool_call`` then ``tool_result``) or the string
    ``"commit"`` (commit ``{"answer":null,"deopt":false}``; a declined commit returns the deopt
    output ``{"answer":null,"deopt":true}``). ``loop_calls`` > 0 repeats the first request that
    many times first (for the budget). Output: ``{"answer":<last result or null>,"deopt":false}``.
    """
    data, code = [], []
    at = 2048
    commit_rec = b'{"answer":null,"deopt":false}'
    deopt = b'{"answer":null,"deopt":true}'
    prefix, suffix, null = b'{"answer":', b',"deopt":false}', b"null"
    fixed = {}
    for name, blob in (("commit", commit_rec), ("deopt", deopt), ("prefix", prefix), ("suffix", suffix), ("null", null)):
        fixed[name] = (at, len(blob))
        data.append(f'(data (i32.const {at}) "{_wat_bytes(blob.decode())}")')
        at += len(blob) + 8
    reqs = []
    for s in steps:
        if isinstance(s, bytes):
            reqs.append((at, len(s)))
            data.append(f'(data (i32.const {at}) "{_wat_bytes(s.decode())}")')
            at += len(s) + 8
    ri = 0
    if loop_calls and reqs:
        p, n = reqs[0]
        code.append(f"""(local.set $i (i32.const {loop_calls}))
    (loop $again
      (local.set $n (call $tool_call (i32.const {p}) (i32.const {n})))
      (drop (call $tool_result (i32.const 16394)))
      (local.set $i (i32.sub (local.get $i) (i32.const 1)))
      (br_if $again (local.get $i)))""")
    for s in steps:
        if s == "commit":
            cp, cn = fixed["commit"]
            dp, dn = fixed["deopt"]
            code.append(f"""(if (i32.eqz (call $commit (i32.const {cp}) (i32.const {cn})))
      (then (memory.copy (i32.const 16384) (i32.const {dp}) (i32.const {dn}))
            (return (i64.or (i64.shl (i64.const 16384) (i64.const 32)) (i64.const {dn})))))""")
        else:
            p, n = reqs[ri]
            ri += 1
            code.append(f"""(local.set $n (call $tool_call (i32.const {p}) (i32.const {n})))
    (call $ensure (i32.add (i32.const 16394) (local.get $n)))
    (drop (call $tool_result (i32.const 16394)))
    (local.set $have (i32.const 1))""")
    pp, pn = fixed["prefix"]
    sp, sn = fixed["suffix"]
    np_, nn = fixed["null"]
    body = "\n    ".join(code)
    return f"""
(module
  {imports}
  {PRELUDE}
  {chr(10).join(data)}
  (func (export "run") (param $p i32) (param $len i32) (result i64)
    (local $n i32) (local $i i32) (local $have i32) (local $end i32)
    {body}
    (call $ensure (i32.const 65536))
    (memory.copy (i32.const 16384) (i32.const {pp}) (i32.const {pn}))
    (if (i32.eqz (local.get $have))
      (then (memory.copy (i32.const 16394) (i32.const {np_}) (i32.const {nn})) (local.set $n (i32.const {nn}))))
    (local.set $end (i32.add (i32.const 16394) (local.get $n)))
    (memory.copy (local.get $end) (i32.const {sp}) (i32.const {sn}))
    (i64.or (i64.shl (i64.const 16384) (i64.const 32))
            (i64.extend_i32_u (i32.sub (i32.add (local.get $end) (i32.const {sn})) (i32.const 16384)))))
)
"""
