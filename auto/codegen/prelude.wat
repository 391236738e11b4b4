  ;; ---- Auto artifact prelude (hand-written; auto.codegen fills in the at-sign tokens) ----
  ;; Memory map: [0, 16) unused (so no valid pointer is 0) | constants | counts (i32 [B]) |
  ;; touched (i32 [B], byte offsets bucket*4) | tree | weights | [memo table] | heap (@HEAP@...).
  ;; The specialist part (between the <specialist> and </specialist> comments) is replaced by a
  ;; plain object check where inputs need only be objects (auto.codegen.prelude.any_object).
  ;; Per call the heap holds: input [ptr, end) | scratch (decoded strings) | nesting stack | output.
  ;; Status codes: 0 ok, 1 bad_json, 2 missing_field, 3 wrong_type, 4 too_large.

  (global $end (mut i32) (i32.const 0))      ;; one past the last input byte
  (global $scratch (mut i32) (i32.const 0))  ;; decoded-string buffer
  (global $stack (mut i32) (i32.const 0))    ;; container-kind stack for skipping nested values
  (global $dend (mut i32) (i32.const 0))     ;; end of the last decoded string
  (global $status (mut i32) (i32.const 0))   ;; result of $item
  (global $sval (mut i32) (i32.const 0))     ;; opening quote of the field's string value
  (global $nt (mut i32) (i32.const 0))       ;; number of touched buckets
  (global $dirty (mut i32) (i32.const 0))    ;; counts may hold entries not in the touched list
  (global $istart (mut i32) (i32.const 0))   ;; the current item's JSON text: [istart, iend),
  (global $iend (mut i32) (i32.const 0))     ;; no surrounding whitespace (set before $eval)

  ;; ---- memory ----
  (func $ensure (param $need i64) (result i32)
    (local $have i64)
    (local.set $have (i64.shl (i64.extend_i32_u (memory.size)) (i64.const 16)))
    (if (i64.le_u (local.get $need) (local.get $have)) (then (return (i32.const 1))))
    (if (i64.gt_u (local.get $need) (i64.const 0x7fff0000)) (then (return (i32.const 0))))
    (i32.ne
      (memory.grow (i32.wrap_i64 (i64.shr_u
        (i64.add (i64.sub (local.get $need) (local.get $have)) (i64.const 65535)) (i64.const 16))))
      (i32.const -1)))

  ;; The heap start (reset on every call). When len bytes cannot be provided (len > MAX_BATCH, or
  ;; memory cannot grow) it returns the memory size in bytes: a pointer just past the end, so a
  ;; host's bounds check fails instead of the host overwriting the static data at low addresses.
  (func $alloc (export "alloc") (param $len i32) (result i32)
    (if (i32.gt_u (local.get $len) (i32.const @MAX_BATCH@))
      (then (return (i32.shl (memory.size) (i32.const 16)))))
    (if (i32.eqz (call $ensure (i64.add (i64.const @HEAP@) (i64.extend_i32_u (local.get $len)))))
      (then (return (i32.shl (memory.size) (i32.const 16)))))
    (i32.const @HEAP@))

  ;; Lay out scratch, stack and output after the input. Returns the output pointer, 1 when
  ;; [ptr, ptr+len) is not inside memory, 0 when memory cannot grow.
  (func $setup (param $ptr i32) (param $len i32) (result i32)
    (local $e i64) (local $s i32) (local $o i32)
    (local.set $e (i64.add (i64.extend_i32_u (local.get $ptr)) (i64.extend_i32_u (local.get $len))))
    (if (i64.gt_u (local.get $e) (i64.shl (i64.extend_i32_u (memory.size)) (i64.const 16)))
      (then (return (i32.const 1))))
    (if (i64.ge_u (local.get $e) (i64.const 0x7fff0000)) (then (return (i32.const 1))))
    (global.set $end (i32.wrap_i64 (local.get $e)))
    (local.set $s (i32.and (i32.add (global.get $end) (i32.const 15)) (i32.const -16)))
    (if (i32.lt_u (local.get $s) (i32.const @HEAP@)) (then (local.set $s (i32.const @HEAP@))))
    (global.set $scratch (local.get $s))
    (global.set $stack (i32.add (local.get $s) (i32.add (local.get $len) (i32.const 16))))
    (local.set $o (i32.and (i32.add (global.get $stack) (i32.add (local.get $len) (i32.const 31)))
                           (i32.const -16)))
    (if (i32.eqz (call $ensure (i64.add (i64.extend_i32_u (local.get $o))
                                        (i64.const @OUT_MAX@))))
      (then (return (i32.const 0))))
    (local.get $o))

  (func $pack (param $p i32) (param $n i32) (result i64)
    (i64.or (i64.shl (i64.extend_i32_u (local.get $p)) (i64.const 32)) (i64.extend_i32_u (local.get $n))))

  ;; the constant error object for a status code
  (func $err (param $code i32) (result i64)
    (local $t i32)
    (local.set $t (i32.add (i32.const @ERRTAB@) (i32.shl (local.get $code) (i32.const 3))))
    (call $pack (i32.load (local.get $t)) (i32.load offset=4 (local.get $t))))

  (func $copy (param $d i32) (param $s i32) (param $n i32) (result i32)
    (memory.copy (local.get $d) (local.get $s) (local.get $n))
    (i32.add (local.get $d) (local.get $n)))

  (func $copy_err (param $d i32) (param $code i32) (result i32)
    (local $t i32)
    (local.set $t (i32.add (i32.const @ERRTAB@) (i32.shl (local.get $code) (i32.const 3))))
    (call $copy (local.get $d) (i32.load (local.get $t)) (i32.load offset=4 (local.get $t))))

  ;; ---- JSON reader ----
  (func $peek (param $p i32) (result i32)
    (if (result i32) (i32.lt_u (local.get $p) (global.get $end))
      (then (i32.load8_u (local.get $p))) (else (i32.const -1))))

  (func $ws (param $p i32) (result i32)
    (local $c i32)
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (local.get $p) (global.get $end)))
        (local.set $c (i32.load8_u (local.get $p)))
        (br_if $done (i32.eqz (i32.or
          (i32.or (i32.eq (local.get $c) (i32.const 32)) (i32.eq (local.get $c) (i32.const 10)))
          (i32.or (i32.eq (local.get $c) (i32.const 13)) (i32.eq (local.get $c) (i32.const 9))))))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (br $l)))
    (local.get $p))

  (func $hexval (param $c i32) (result i32)
    (if (i32.lt_u (i32.sub (local.get $c) (i32.const 48)) (i32.const 10))
      (then (return (i32.sub (local.get $c) (i32.const 48)))))
    (local.set $c (i32.or (local.get $c) (i32.const 32)))
    (if (i32.lt_u (i32.sub (local.get $c) (i32.const 97)) (i32.const 6))
      (then (return (i32.sub (local.get $c) (i32.const 87)))))
    (i32.const -1))

  ;; four hex digits at p -> 0..0xFFFF, or -1
  (func $hex4 (param $p i32) (result i32)
    (local $v i32) (local $k i32) (local $h i32)
    (if (i32.gt_u (i32.add (local.get $p) (i32.const 4)) (global.get $end))
      (then (return (i32.const -1))))
    (loop $l
      (local.set $h (call $hexval (i32.load8_u (i32.add (local.get $p) (local.get $k)))))
      (if (i32.lt_s (local.get $h) (i32.const 0)) (then (return (i32.const -1))))
      (local.set $v (i32.or (i32.shl (local.get $v) (i32.const 4)) (local.get $h)))
      (local.set $k (i32.add (local.get $k) (i32.const 1)))
      (br_if $l (i32.lt_u (local.get $k) (i32.const 4))))
    (local.get $v))

  ;; length (2..4) of the well-formed UTF-8 sequence at p (lead byte >= 0x80), or 0
  (func $utf8 (param $p i32) (result i32)
    (local $c i32) (local $n i32) (local $lo i32) (local $hi i32) (local $k i32) (local $b i32)
    (local.set $c (i32.load8_u (local.get $p)))
    (if (i32.or (i32.lt_u (local.get $c) (i32.const 0xC2)) (i32.gt_u (local.get $c) (i32.const 0xF4)))
      (then (return (i32.const 0))))
    (local.set $n (select (i32.const 2)
      (select (i32.const 3) (i32.const 4) (i32.lt_u (local.get $c) (i32.const 0xF0)))
      (i32.lt_u (local.get $c) (i32.const 0xE0))))
    (if (i32.gt_u (i32.add (local.get $p) (local.get $n)) (global.get $end))
      (then (return (i32.const 0))))
    (local.set $lo (i32.const 0x80))
    (local.set $hi (i32.const 0xBF))
    (if (i32.eq (local.get $c) (i32.const 0xE0)) (then (local.set $lo (i32.const 0xA0))))
    (if (i32.eq (local.get $c) (i32.const 0xED)) (then (local.set $hi (i32.const 0x9F))))
    (if (i32.eq (local.get $c) (i32.const 0xF0)) (then (local.set $lo (i32.const 0x90))))
    (if (i32.eq (local.get $c) (i32.const 0xF4)) (then (local.set $hi (i32.const 0x8F))))
    (local.set $b (i32.load8_u offset=1 (local.get $p)))
    (if (i32.or (i32.lt_u (local.get $b) (local.get $lo)) (i32.gt_u (local.get $b) (local.get $hi)))
      (then (return (i32.const 0))))
    (local.set $k (i32.const 2))
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (local.get $k) (local.get $n)))
        (if (i32.ne (i32.and (i32.load8_u (i32.add (local.get $p) (local.get $k))) (i32.const 0xC0))
                    (i32.const 0x80))
          (then (return (i32.const 0))))
        (local.set $k (i32.add (local.get $k) (i32.const 1)))
        (br $l)))
    (local.get $n))

  ;; write code point cp as UTF-8 at d (ASCII-folded when fold); returns the new end
  (func $put_cp (param $d i32) (param $cp i32) (param $fold i32) (result i32)
    (if (i32.lt_u (local.get $cp) (i32.const 0x80))
      (then
        (if (i32.and (local.get $fold) (i32.lt_u (i32.sub (local.get $cp) (i32.const 65)) (i32.const 26)))
          (then (local.set $cp (i32.or (local.get $cp) (i32.const 32)))))
        (i32.store8 (local.get $d) (local.get $cp))
        (return (i32.add (local.get $d) (i32.const 1)))))
    (if (i32.lt_u (local.get $cp) (i32.const 0x800))
      (then
        (i32.store8 (local.get $d) (i32.or (i32.const 0xC0) (i32.shr_u (local.get $cp) (i32.const 6))))
        (i32.store8 offset=1 (local.get $d) (i32.or (i32.const 0x80) (i32.and (local.get $cp) (i32.const 63))))
        (return (i32.add (local.get $d) (i32.const 2)))))
    (if (i32.lt_u (local.get $cp) (i32.const 0x10000))
      (then
        (i32.store8 (local.get $d) (i32.or (i32.const 0xE0) (i32.shr_u (local.get $cp) (i32.const 12))))
        (i32.store8 offset=1 (local.get $d)
          (i32.or (i32.const 0x80) (i32.and (i32.shr_u (local.get $cp) (i32.const 6)) (i32.const 63))))
        (i32.store8 offset=2 (local.get $d) (i32.or (i32.const 0x80) (i32.and (local.get $cp) (i32.const 63))))
        (return (i32.add (local.get $d) (i32.const 3)))))
    (i32.store8 (local.get $d) (i32.or (i32.const 0xF0) (i32.shr_u (local.get $cp) (i32.const 18))))
    (i32.store8 offset=1 (local.get $d)
      (i32.or (i32.const 0x80) (i32.and (i32.shr_u (local.get $cp) (i32.const 12)) (i32.const 63))))
    (i32.store8 offset=2 (local.get $d)
      (i32.or (i32.const 0x80) (i32.and (i32.shr_u (local.get $cp) (i32.const 6)) (i32.const 63))))
    (i32.store8 offset=3 (local.get $d) (i32.or (i32.const 0x80) (i32.and (local.get $cp) (i32.const 63))))
    (i32.add (local.get $d) (i32.const 4)))

  ;; the byte a one-character escape stands for, or -1
  (func $unescape (param $e i32) (result i32)
    (if (i32.or (i32.or (i32.eq (local.get $e) (i32.const 34)) (i32.eq (local.get $e) (i32.const 92)))
                (i32.eq (local.get $e) (i32.const 47)))
      (then (return (local.get $e))))
    (if (i32.eq (local.get $e) (i32.const 98)) (then (return (i32.const 8))))
    (if (i32.eq (local.get $e) (i32.const 102)) (then (return (i32.const 12))))
    (if (i32.eq (local.get $e) (i32.const 110)) (then (return (i32.const 10))))
    (if (i32.eq (local.get $e) (i32.const 114)) (then (return (i32.const 13))))
    (if (i32.eq (local.get $e) (i32.const 116)) (then (return (i32.const 9))))
    (i32.const -1))

  ;; Validate and decode the string whose opening quote is at p into d (ASCII-folded when fold).
  ;; Returns the position after the closing quote (and sets $dend), or -1 on bad JSON: a raw
  ;; control byte, a bad escape, a lone surrogate escape, or ill-formed UTF-8.
  (func $string (param $p i32) (param $d i32) (param $fold i32) (result i32)
    (local $c i32) (local $e i32) (local $cp i32) (local $lo i32) (local $n i32) (local $end i32)
    @STRING_LOCALS@
    (local.set $end (global.get $end))
    (local.set $p (i32.add (local.get $p) (i32.const 1)))
    (block $fail
      (loop $l
        (br_if $fail (i32.ge_u (local.get $p) (local.get $end)))
@STRING_FAST@
        (local.set $c (i32.load8_u (local.get $p)))
        (if (i32.lt_u (local.get $c) (i32.const 128))
          (then
            (if (i32.eq (local.get $c) (i32.const 34))
              (then
                (global.set $dend (local.get $d))
                (return (i32.add (local.get $p) (i32.const 1)))))
            (if (i32.eq (local.get $c) (i32.const 92))
              (then
                (br_if $fail (i32.ge_u (i32.add (local.get $p) (i32.const 1)) (local.get $end)))
                (local.set $e (i32.load8_u offset=1 (local.get $p)))
                (local.set $p (i32.add (local.get $p) (i32.const 2)))
                (if (i32.eq (local.get $e) (i32.const 117))
                  (then
                    (local.set $cp (call $hex4 (local.get $p)))
                    (br_if $fail (i32.lt_s (local.get $cp) (i32.const 0)))
                    (local.set $p (i32.add (local.get $p) (i32.const 4)))
                    (br_if $fail (i32.eq (i32.and (local.get $cp) (i32.const 0xFC00)) (i32.const 0xDC00)))
                    (if (i32.eq (i32.and (local.get $cp) (i32.const 0xFC00)) (i32.const 0xD800))
                      (then
                        (br_if $fail (i32.gt_u (i32.add (local.get $p) (i32.const 6)) (local.get $end)))
                        (br_if $fail (i32.ne (i32.load16_u (local.get $p)) (i32.const 0x755C)))
                        (local.set $lo (call $hex4 (i32.add (local.get $p) (i32.const 2))))
                        (br_if $fail (i32.ne (i32.and (local.get $lo) (i32.const 0xFC00)) (i32.const 0xDC00)))
                        (local.set $cp (i32.add (i32.const 0x10000)
                          (i32.or (i32.shl (i32.and (local.get $cp) (i32.const 0x3FF)) (i32.const 10))
                                  (i32.and (local.get $lo) (i32.const 0x3FF)))))
                        (local.set $p (i32.add (local.get $p) (i32.const 6)))))
                    (local.set $d (call $put_cp (local.get $d) (local.get $cp) (local.get $fold)))
                    (br $l)))
                (local.set $c (call $unescape (local.get $e)))
                (br_if $fail (i32.lt_s (local.get $c) (i32.const 0)))
                (i32.store8 (local.get $d) (local.get $c))
                (local.set $d (i32.add (local.get $d) (i32.const 1)))
                (br $l)))
            (br_if $fail (i32.lt_u (local.get $c) (i32.const 32)))
            (if (i32.and (local.get $fold) (i32.lt_u (i32.sub (local.get $c) (i32.const 65)) (i32.const 26)))
              (then (local.set $c (i32.or (local.get $c) (i32.const 32)))))
            (i32.store8 (local.get $d) (local.get $c))
            (local.set $d (i32.add (local.get $d) (i32.const 1)))
            (local.set $p (i32.add (local.get $p) (i32.const 1)))
            (br $l)))
        (local.set $n (call $utf8 (local.get $p)))
        (br_if $fail (i32.eqz (local.get $n)))
        (memory.copy (local.get $d) (local.get $p) (local.get $n))
        (local.set $d (i32.add (local.get $d) (local.get $n)))
        (local.set $p (i32.add (local.get $p) (local.get $n)))
        (br $l)))
    (i32.const -1))

  (func $digits (param $p i32) (result i32)
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (i32.sub (call $peek (local.get $p)) (i32.const 48)) (i32.const 10)))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (br $l)))
    (local.get $p))

  ;; JSON number at p -> position after it, or -1
  (func $number (param $p i32) (result i32)
    (local $q i32) (local $c i32)
    (if (i32.eq (call $peek (local.get $p)) (i32.const 45)) (then (local.set $p (i32.add (local.get $p) (i32.const 1)))))
    (local.set $c (call $peek (local.get $p)))
    (if (i32.eq (local.get $c) (i32.const 48))
      (then (local.set $p (i32.add (local.get $p) (i32.const 1))))
      (else
        (if (i32.ge_u (i32.sub (local.get $c) (i32.const 49)) (i32.const 9)) (then (return (i32.const -1))))
        (local.set $p (call $digits (local.get $p)))))
    (if (i32.eq (call $peek (local.get $p)) (i32.const 46))
      (then
        (local.set $q (i32.add (local.get $p) (i32.const 1)))
        (local.set $p (call $digits (local.get $q)))
        (if (i32.eq (local.get $p) (local.get $q)) (then (return (i32.const -1))))))
    (if (i32.eq (i32.or (call $peek (local.get $p)) (i32.const 32)) (i32.const 101))
      (then
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (local.set $c (call $peek (local.get $p)))
        (if (i32.or (i32.eq (local.get $c) (i32.const 43)) (i32.eq (local.get $c) (i32.const 45)))
          (then (local.set $p (i32.add (local.get $p) (i32.const 1)))))
        (local.set $q (local.get $p))
        (local.set $p (call $digits (local.get $q)))
        (if (i32.eq (local.get $p) (local.get $q)) (then (return (i32.const -1))))))
    (local.get $p))

  ;; a literal of n bytes (4 or 5) whose first four bytes are w4 (little-endian) and, when n = 5,
  ;; whose last byte is b5
  (func $lit (param $p i32) (param $n i32) (param $w4 i32) (param $b5 i32) (result i32)
    (if (i32.gt_u (i32.add (local.get $p) (local.get $n)) (global.get $end)) (then (return (i32.const -1))))
    (if (i32.ne (i32.load (local.get $p)) (local.get $w4)) (then (return (i32.const -1))))
    (if (i32.and (i32.eq (local.get $n) (i32.const 5))
                 (i32.ne (i32.load8_u offset=4 (local.get $p)) (local.get $b5)))
      (then (return (i32.const -1))))
    (i32.add (local.get $p) (local.get $n)))

  ;; a scalar (string, number, true, false, null) starting with byte c at p
  (func $scalar (param $p i32) (param $c i32) (result i32)
    (if (i32.eq (local.get $c) (i32.const 34))
      (then (return (call $string (local.get $p) (global.get $scratch) (i32.const 0)))))
    (if (i32.or (i32.eq (local.get $c) (i32.const 45)) (i32.lt_u (i32.sub (local.get $c) (i32.const 48)) (i32.const 10)))
      (then (return (call $number (local.get $p)))))
    (if (i32.eq (local.get $c) (i32.const 116)) ;; true
      (then (return (call $lit (local.get $p) (i32.const 4) (i32.const 0x65757274) (i32.const 0)))))
    (if (i32.eq (local.get $c) (i32.const 102)) ;; false
      (then (return (call $lit (local.get $p) (i32.const 5) (i32.const 0x736c6166) (i32.const 101)))))
    (if (i32.eq (local.get $c) (i32.const 110)) ;; null
      (then (return (call $lit (local.get $p) (i32.const 4) (i32.const 0x6c6c756e) (i32.const 0)))))
    (i32.const -1))

  ;; `"key" ws :` at p -> position after the colon, or -1
  (func $key (param $p i32) (result i32)
    (if (i32.ne (call $peek (local.get $p)) (i32.const 34)) (then (return (i32.const -1))))
    (local.set $p (call $string (local.get $p) (global.get $scratch) (i32.const 0)))
    (if (i32.lt_s (local.get $p) (i32.const 0)) (then (return (i32.const -1))))
    (local.set $p (call $ws (local.get $p)))
    (if (i32.ne (call $peek (local.get $p)) (i32.const 58)) (then (return (i32.const -1))))
    (i32.add (local.get $p) (i32.const 1)))

  ;; Skip one JSON value at p (leading whitespace allowed) -> position after it, or -1.
  ;; Iterative: nesting depth is bounded by the input length, not by the call stack.
  (func $skip_value (param $p i32) (result i32)
    (local $d i32) (local $c i32) (local $top i32)
    (block $fail
      (loop $value
        (local.set $p (call $ws (local.get $p)))
        (local.set $c (call $peek (local.get $p)))
        (block $after
          (if (i32.eq (local.get $c) (i32.const 123))
            (then
              (local.set $p (call $ws (i32.add (local.get $p) (i32.const 1))))
              (if (i32.eq (call $peek (local.get $p)) (i32.const 125))
                (then (local.set $p (i32.add (local.get $p) (i32.const 1))) (br $after)))
              (i32.store8 (i32.add (global.get $stack) (local.get $d)) (i32.const 123))
              (local.set $d (i32.add (local.get $d) (i32.const 1)))
              (local.set $p (call $key (local.get $p)))
              (br_if $fail (i32.lt_s (local.get $p) (i32.const 0)))
              (br $value)))
          (if (i32.eq (local.get $c) (i32.const 91))
            (then
              (local.set $p (call $ws (i32.add (local.get $p) (i32.const 1))))
              (if (i32.eq (call $peek (local.get $p)) (i32.const 93))
                (then (local.set $p (i32.add (local.get $p) (i32.const 1))) (br $after)))
              (i32.store8 (i32.add (global.get $stack) (local.get $d)) (i32.const 91))
              (local.set $d (i32.add (local.get $d) (i32.const 1)))
              (br $value)))
          (local.set $p (call $scalar (local.get $p) (local.get $c)))
          (br_if $fail (i32.lt_s (local.get $p) (i32.const 0))))
        ;; a value ended at p: close containers or continue after a comma
        (loop $close
          (if (i32.eqz (local.get $d)) (then (return (local.get $p))))
          (local.set $p (call $ws (local.get $p)))
          (local.set $c (call $peek (local.get $p)))
          (local.set $top (i32.load8_u (i32.sub (i32.add (global.get $stack) (local.get $d)) (i32.const 1))))
          (if (i32.eq (local.get $c) (i32.const 44))
            (then
              (local.set $p (i32.add (local.get $p) (i32.const 1)))
              (if (i32.eq (local.get $top) (i32.const 123))
                (then
                  (local.set $p (call $key (call $ws (local.get $p))))
                  (br_if $fail (i32.lt_s (local.get $p) (i32.const 0)))))
              (br $value)))
          (br_if $fail (i32.ne (local.get $c) (i32.add (local.get $top) (i32.const 2))))
          (local.set $p (i32.add (local.get $p) (i32.const 1)))
          (local.set $d (i32.sub (local.get $d) (i32.const 1)))
          (br $close))))
    (i32.const -1))

  ;; <specialist>
  ;; is the key just decoded into scratch equal to the featurized field's name?
  (func $is_field (result i32)
    (local $k i32)
    (if (i32.ne (i32.sub (global.get $dend) (global.get $scratch)) (i32.const @FIELD_LEN@))
      (then (return (i32.const 0))))
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (local.get $k) (i32.const @FIELD_LEN@)))
        (if (i32.ne (i32.load8_u (i32.add (global.get $scratch) (local.get $k)))
                    (i32.load8_u offset=@FIELD@ (local.get $k)))
          (then (return (i32.const 0))))
        (local.set $k (i32.add (local.get $k) (i32.const 1)))
        (br $l)))
    (i32.const 1))

  ;; One task input at p (after whitespace) -> position after it, or -1 for bad JSON.
  ;; Sets $status (0 ok, 2 missing_field, 3 wrong_type) and, when ok, $sval.
  ;; Duplicate keys: the last occurrence wins (as in Python's json).
  (func $item (param $p i32) (result i32)
    (local $found i32) (local $isstr i32) (local $match i32) (local $v i32)
    (if (i32.ne (call $peek (local.get $p)) (i32.const 123))
      (then
        (global.set $status (i32.const 3))
        (return (call $skip_value (local.get $p)))))
    (local.set $p (call $ws (i32.add (local.get $p) (i32.const 1))))
    (if (i32.eq (call $peek (local.get $p)) (i32.const 125))
      (then
        (global.set $status (i32.const 2))
        (return (i32.add (local.get $p) (i32.const 1)))))
    (loop $member
      (local.set $p (call $key (local.get $p)))
      (if (i32.lt_s (local.get $p) (i32.const 0)) (then (return (i32.const -1))))
      (local.set $match (call $is_field))
      (local.set $p (call $ws (local.get $p)))
      (if (local.get $match)
        (then
          (local.set $found (i32.const 1))
          (local.set $isstr (i32.eq (call $peek (local.get $p)) (i32.const 34)))
          (local.set $v (local.get $p))))
      (local.set $p (call $skip_value (local.get $p)))
      (if (i32.lt_s (local.get $p) (i32.const 0)) (then (return (i32.const -1))))
      (local.set $p (call $ws (local.get $p)))
      (if (i32.eq (call $peek (local.get $p)) (i32.const 44))
        (then
          (local.set $p (call $ws (i32.add (local.get $p) (i32.const 1))))
          (br $member))))
    (if (i32.ne (call $peek (local.get $p)) (i32.const 125)) (then (return (i32.const -1))))
    (global.set $sval (local.get $v))
    (global.set $status
      (select (select (i32.const 0) (i32.const 3) (local.get $isstr)) (i32.const 2) (local.get $found)))
    (i32.add (local.get $p) (i32.const 1)))

  ;; decode the field's string into scratch as \x02 + folded UTF-8 + \x03; returns its length
  (func $frame (result i32)
    (i32.store8 (global.get $scratch) (i32.const 2))
    (drop (call $string (global.get $sval) (i32.add (global.get $scratch) (i32.const 1)) (i32.const 1)))
    (i32.store8 (global.get $dend) (i32.const 3))
    (i32.sub (i32.add (global.get $dend) (i32.const 1)) (global.get $scratch)))

  ;; Zero the counts left by the previous call and mark the counts dirty until $eval has
  ;; published its touched list ($nt, $dirty = 0); after an interrupted call (a trap, fuel or
  ;; deadline) the whole counts array is cleared instead.
  (func $clear
    (local $t i32) (local $e i32)
    (if (global.get $dirty)
      (then (memory.fill (i32.const @COUNTS@) (i32.const 0) (i32.const @COUNTS_BYTES@)))
      (else
        (local.set $e (i32.shl (global.get $nt) (i32.const 2)))
        (block $done
          (loop $l
            (br_if $done (i32.ge_u (local.get $t) (local.get $e)))
            (i32.store offset=@COUNTS@
              (i32.and (i32.load offset=@TOUCHED@ (local.get $t)) (i32.const @MASK4@)) (i32.const 0))
            (local.set $t (i32.add (local.get $t) (i32.const 4)))
            (br $l)))))
    (global.set $nt (i32.const 0))
    (global.set $dirty (i32.const 1)))
  ;; </specialist>

  ;; ---- writer ----
  ;; x as -?D+.DDDDDDDDD from trunc(x * 1e9) (saturating: never traps)
  (func $fixed (param $o i32) (param $x f64) (result i32)
    (local $v i64) (local $ip i64) (local $fp i64) (local $t i64) (local $n i32) (local $k i32)
    (local.set $v (i64.trunc_sat_f64_s (f64.mul (local.get $x) (f64.const 1e9))))
    (if (i64.lt_s (local.get $v) (i64.const 0))
      (then
        (i32.store8 (local.get $o) (i32.const 45))
        (local.set $o (i32.add (local.get $o) (i32.const 1)))
        (local.set $v (i64.sub (i64.const 0) (local.get $v)))))
    (local.set $ip (i64.div_u (local.get $v) (i64.const 1000000000)))
    (local.set $fp (i64.rem_u (local.get $v) (i64.const 1000000000)))
    (local.set $n (i32.const 1))
    (local.set $t (local.get $ip))
    (block $done
      (loop $l
        (br_if $done (i64.lt_u (local.get $t) (i64.const 10)))
        (local.set $t (i64.div_u (local.get $t) (i64.const 10)))
        (local.set $n (i32.add (local.get $n) (i32.const 1)))
        (br $l)))
    (local.set $k (local.get $n))
    (loop $l
      (local.set $k (i32.sub (local.get $k) (i32.const 1)))
      (i32.store8 (i32.add (local.get $o) (local.get $k))
        (i32.add (i32.const 48) (i32.wrap_i64 (i64.rem_u (local.get $ip) (i64.const 10)))))
      (local.set $ip (i64.div_u (local.get $ip) (i64.const 10)))
      (br_if $l (local.get $k)))
    (local.set $o (i32.add (local.get $o) (local.get $n)))
    (i32.store8 (local.get $o) (i32.const 46))
    (local.set $k (i32.const 9))
    (loop $l
      (i32.store8 (i32.add (local.get $o) (local.get $k))
        (i32.add (i32.const 48) (i32.wrap_i64 (i64.rem_u (local.get $fp) (i64.const 10)))))
      (local.set $fp (i64.div_u (local.get $fp) (i64.const 10)))
      (local.set $k (i32.sub (local.get $k) (i32.const 1)))
      (br_if $l (local.get $k)))
    (i32.add (local.get $o) (i32.const 10)))

  ;; ---- entry points ----
  (func $run (export "run") (param $ptr i32) (param $len i32) (result i64)
    (local $o i32) (local $p i32)
    (if (i32.gt_u (local.get $len) (i32.const @MAX_INPUT@)) (then (return (call $err (i32.const 4)))))
    (local.set $o (call $setup (local.get $ptr) (local.get $len)))
    (if (i32.eqz (local.get $o)) (then (return (call $err (i32.const 4)))))
    (if (i32.eq (local.get $o) (i32.const 1)) (then (return (call $err (i32.const 1)))))
    (global.set $istart (call $ws (local.get $ptr)))
    (local.set $p (call $item (global.get $istart)))
    (if (i32.lt_s (local.get $p) (i32.const 0)) (then (return (call $err (i32.const 1)))))
    (if (i32.ne (call $ws (local.get $p)) (global.get $end)) (then (return (call $err (i32.const 1)))))
    (if (global.get $status) (then (return (call $err (global.get $status)))))
    (global.set $iend (local.get $p))
    (call $pack (local.get $o) (i32.sub (call $eval (local.get $o)) (local.get $o))))

  (func $run_batch (export "run_batch") (param $ptr i32) (param $len i32) (result i64)
    (local $o0 i32) (local $o i32) (local $p i32) (local $q i32) (local $c i32)
    (if (i32.gt_u (local.get $len) (i32.const @MAX_BATCH@)) (then (return (call $err (i32.const 4)))))
    (local.set $o0 (call $setup (local.get $ptr) (local.get $len)))
    (if (i32.eqz (local.get $o0)) (then (return (call $err (i32.const 4)))))
    (if (i32.eq (local.get $o0) (i32.const 1)) (then (return (call $err (i32.const 1)))))
    (local.set $p (call $ws (local.get $ptr)))
    (if (i32.ne (call $peek (local.get $p)) (i32.const 91))
      (then
        (local.set $q (call $skip_value (local.get $p)))
        (if (i32.or (i32.lt_s (local.get $q) (i32.const 0))
                    (i32.ne (call $ws (local.get $q)) (global.get $end)))
          (then (return (call $err (i32.const 1)))))
        (return (call $err (i32.const 3)))))
    (local.set $o (local.get $o0))
    (i32.store8 (local.get $o) (i32.const 91))
    (local.set $o (i32.add (local.get $o) (i32.const 1)))
    (local.set $p (call $ws (i32.add (local.get $p) (i32.const 1))))
    (block $done
      (if (i32.eq (call $peek (local.get $p)) (i32.const 93))
        (then (local.set $p (i32.add (local.get $p) (i32.const 1))) (br $done)))
      (loop $each
        (global.set $istart (local.get $p))
        (local.set $q (call $item (local.get $p)))
        (if (i32.lt_s (local.get $q) (i32.const 0)) (then (return (call $err (i32.const 1)))))
        (global.set $iend (local.get $q))
        (if (i32.gt_u (i32.sub (local.get $q) (local.get $p)) (i32.const @MAX_INPUT@))
          (then (local.set $o (call $copy_err (local.get $o) (i32.const 4))))
          (else
            (if (global.get $status)
              (then (local.set $o (call $copy_err (local.get $o) (global.get $status))))
              (else (local.set $o (call $eval (local.get $o)))))))
        (local.set $p (call $ws (local.get $q)))
        (local.set $c (call $peek (local.get $p)))
        (if (i32.eq (local.get $c) (i32.const 93))
          (then (local.set $p (i32.add (local.get $p) (i32.const 1))) (br $done)))
        (if (i32.ne (local.get $c) (i32.const 44)) (then (return (call $err (i32.const 1)))))
        (local.set $p (call $ws (i32.add (local.get $p) (i32.const 1))))
        (i32.store8 (local.get $o) (i32.const 44))
        (local.set $o (i32.add (local.get $o) (i32.const 1)))
        (if (i32.eqz (call $ensure (i64.add (i64.extend_i32_u (local.get $o)) (i64.const @OUT_MAX@))))
          (then (return (call $err (i32.const 4)))))
        (br $each)))
    (if (i32.ne (call $ws (local.get $p)) (global.get $end)) (then (return (call $err (i32.const 1)))))
    (i32.store8 (local.get $o) (i32.const 93))
    (call $pack (local.get $o0) (i32.sub (i32.add (local.get $o) (i32.const 1)) (local.get $o0))))
