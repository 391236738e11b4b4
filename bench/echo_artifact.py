"""The echo artifact: a WebAssembly module that follows the artifact ABI and does almost no work.

``run`` answers ``{"answer": <the input object>, "margin": 1.000000000, "nonconformity":
0.500000000}``: the input's canonical JSON copied between a fixed prefix and suffix.
``run_batch`` scans the input array once (aware of strings, escapes and nesting) and answers
each top-level item the same way, as a JSON array. Its own work is a few memory copies, so the
time of a call is the runtime's overhead (:mod:`bench.call_overhead`).

The manifest is built on the runtime's constants (``auto_runtime.manifest``) with a
``conformal-novelty`` guard over 19 calibration scores 0.05 … 0.95 (α = 0.1), so the echo's
fixed nonconformity 0.5 passes it and every call is tier-1.
"""

from __future__ import annotations

from typing import Any

import wasmtime
from auto_runtime.jsonio import canonical_bytes
from auto_runtime.manifest import ABI_EXPORTS, FORMAT, MANIFEST_SECTION
from auto_runtime.wasm_sections import custom_section

CALIBRATION = [round(0.05 * i, 2) for i in range(1, 20)]

MANIFEST: dict[str, Any] = {
    "format": FORMAT,
    "task": "echo",
    "generation": 1,
    "compiled_as": "specialist",
    "interface": {"input": {"type": "object", "properties": {"ticket": {"type": "string", "maxLength": 2000}},
                            "required": ["ticket"], "additionalProperties": False},
                  "output": {}},
    "abi": {"exports": list(ABI_EXPORTS), "encoding": "canonical-json"},
    "capabilities": [],
    "guard": {"method": "conformal-novelty", "alpha": 0.1, "n": len(CALIBRATION),
              "calibration_scores": CALIBRATION, "threshold": 0.9, "coverage_heldout": 0.9},
    "latency_us": {"p50": None, "p95": None},
    "cost_usd_micros_per_call": 0,
}
"""The echo artifact's manifest (task ``echo``, input ``{"ticket": str}``)."""

_PREFIX = '{"answer":'
_SUFFIX = ',"margin":1.000000000,"nonconformity":0.500000000}'


def _wat_string(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"')


WAT = f"""
(module
  (memory (export "memory") 1)
  (data (i32.const 16) "{_wat_string(_PREFIX)}")
  (data (i32.const 64) "{_wat_string(_SUFFIX)}")
  ;; grow the memory until byte offset $end is addressable
  (func $ensure (param $end i32)
    (block $done
      (loop $grow
        (br_if $done (i32.le_u (local.get $end) (i32.shl (memory.size) (i32.const 16))))
        (if (i32.eq (memory.grow (i32.const 1)) (i32.const -1)) (then unreachable))
        (br $grow))))
  (func (export "alloc") (param $n i32) (result i32)
    (call $ensure (i32.add (i32.const 1024) (local.get $n)))
    (i32.const 1024))
  ;; write prefix, the item's bytes, suffix at $out; returns the end
  (func $answer (param $out i32) (param $src i32) (param $len i32) (result i32)
    (call $ensure (i32.add (i32.add (local.get $out) (local.get $len)) (i32.const 128)))
    (memory.copy (local.get $out) (i32.const 16) (i32.const {len(_PREFIX)}))
    (memory.copy (i32.add (local.get $out) (i32.const {len(_PREFIX)})) (local.get $src) (local.get $len))
    (memory.copy (i32.add (i32.add (local.get $out) (i32.const {len(_PREFIX)})) (local.get $len))
                 (i32.const 64) (i32.const {len(_SUFFIX)}))
    (i32.add (i32.add (local.get $out) (local.get $len)) (i32.const {len(_PREFIX) + len(_SUFFIX)})))
  ;; (ptr << 32) | len of the output [$start, $end)
  (func $result (param $start i32) (param $end i32) (result i64)
    (i64.or (i64.shl (i64.extend_i32_u (local.get $start)) (i64.const 32))
            (i64.extend_i32_u (i32.sub (local.get $end) (local.get $start)))))
  ;; outputs start after the input, 8-byte aligned
  (func $out_base (param $p i32) (param $n i32) (result i32)
    (i32.and (i32.add (i32.add (local.get $p) (local.get $n)) (i32.const 7)) (i32.const -8)))
  (func (export "run") (param $p i32) (param $n i32) (result i64)
    (local $o i32)
    (local.set $o (call $out_base (local.get $p) (local.get $n)))
    (call $result (local.get $o) (call $answer (local.get $o) (local.get $p) (local.get $n))))
  (func (export "run_batch") (param $p i32) (param $n i32) (result i64)
    (local $o i32) (local $cur i32) (local $i i32) (local $c i32) (local $depth i32)
    (local $in_str i32) (local $esc i32) (local $start i32) (local $first i32)
    (local.set $o (call $out_base (local.get $p) (local.get $n)))
    (call $ensure (i32.add (local.get $o) (i32.const 16)))
    (i32.store8 (local.get $o) (i32.const 91))                       ;; [
    (local.set $cur (i32.add (local.get $o) (i32.const 1)))
    (local.set $first (i32.const 1))
    (block $end
      (loop $scan
        (br_if $end (i32.ge_u (local.get $i) (local.get $n)))
        (local.set $c (i32.load8_u (i32.add (local.get $p) (local.get $i))))
        (if (local.get $in_str)
          (then
            (if (local.get $esc)
              (then (local.set $esc (i32.const 0)))
              (else
                (if (i32.eq (local.get $c) (i32.const 92)) (then (local.set $esc (i32.const 1))))   ;; backslash
                (if (i32.eq (local.get $c) (i32.const 34)) (then (local.set $in_str (i32.const 0)))))))
          (else
            (if (i32.eq (local.get $c) (i32.const 34)) (then (local.set $in_str (i32.const 1))))    ;; "
            (if (i32.or (i32.eq (local.get $c) (i32.const 91)) (i32.eq (local.get $c) (i32.const 123)))
              (then                                                   ;; [ or {{ opens a level
                (local.set $depth (i32.add (local.get $depth) (i32.const 1)))
                (if (i32.eq (local.get $depth) (i32.const 1))
                  (then (local.set $start (i32.add (local.get $i) (i32.const 1)))))))
            (if (i32.and (i32.eq (local.get $depth) (i32.const 1))
                         (i32.or (i32.eq (local.get $c) (i32.const 44)) (i32.eq (local.get $c) (i32.const 93))))
              (then                                                   ;; , or ] ends a top-level item
                (if (i32.gt_u (local.get $i) (local.get $start))
                  (then
                    (if (i32.eqz (local.get $first))
                      (then
                        (i32.store8 (local.get $cur) (i32.const 44))
                        (local.set $cur (i32.add (local.get $cur) (i32.const 1)))))
                    (local.set $first (i32.const 0))
                    (local.set $cur (call $answer (local.get $cur)
                                              (i32.add (local.get $p) (local.get $start))
                                              (i32.sub (local.get $i) (local.get $start))))))
                (local.set $start (i32.add (local.get $i) (i32.const 1)))))
            (if (i32.or (i32.eq (local.get $c) (i32.const 93)) (i32.eq (local.get $c) (i32.const 125)))
              (then (local.set $depth (i32.sub (local.get $depth) (i32.const 1)))))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $scan)))
    (call $ensure (i32.add (local.get $cur) (i32.const 1)))
    (i32.store8 (local.get $cur) (i32.const 93))                     ;; ]
    (call $result (local.get $o) (i32.add (local.get $cur) (i32.const 1))))
)
"""
"""The module's WebAssembly text."""


def echo_artifact() -> bytes:
    """The echo artifact's bytes: :data:`WAT` assembled, then the canonical :data:`MANIFEST` as
    the ``auto.manifest`` custom section."""
    return bytes(wasmtime.wat2wasm(WAT)) + custom_section(MANIFEST_SECTION, canonical_bytes(MANIFEST))
