  ;; ---- region runtime (hand-written; after the program runtime): reading tool results ----
  ;; A tool result is canonical JSON written by the host (no whitespace, sorted keys, strings
  ;; escaped as Python's json with ensure_ascii=False: only '"', '\' and control characters).
  ;; Values are a tag (i32) and a payload (i64) as in the program runtime; $jget sets $rt / $rv.

  ;; end of the JSON value starting at p, scanning no further than e; -1 when it does not end
  (func $jskip (param $p i32) (param $e i32) (result i32)
    (local $c i32) (local $depth i32) (local $instr i32)
    (block $done
      (loop $l
        (if (i32.ge_u (local.get $p) (local.get $e))
          (then
            (if (i32.or (local.get $depth) (local.get $instr)) (then (return (i32.const -1))))
            (br $done)))
        (local.set $c (i32.load8_u (local.get $p)))
        (if (local.get $instr)
          (then
            (if (i32.eq (local.get $c) (i32.const 92))
              (then (local.set $p (i32.add (local.get $p) (i32.const 2))) (br $l)))
            (local.set $p (i32.add (local.get $p) (i32.const 1)))
            (if (i32.eq (local.get $c) (i32.const 34))
              (then
                (local.set $instr (i32.const 0))
                (br_if $done (i32.eqz (local.get $depth)))))
            (br $l)))
        (if (i32.eq (local.get $c) (i32.const 34))
          (then (local.set $instr (i32.const 1)) (local.set $p (i32.add (local.get $p) (i32.const 1))) (br $l)))
        (if (i32.or (i32.eq (local.get $c) (i32.const 123)) (i32.eq (local.get $c) (i32.const 91)))
          (then
            (local.set $depth (i32.add (local.get $depth) (i32.const 1)))
            (local.set $p (i32.add (local.get $p) (i32.const 1)))
            (br $l)))
        (if (i32.or (i32.eq (local.get $c) (i32.const 125)) (i32.eq (local.get $c) (i32.const 93)))
          (then
            (br_if $done (i32.eqz (local.get $depth)))
            (local.set $depth (i32.sub (local.get $depth) (i32.const 1)))
            (local.set $p (i32.add (local.get $p) (i32.const 1)))
            (br_if $done (i32.eqz (local.get $depth)))
            (br $l)))
        (if (i32.and (i32.eqz (local.get $depth))
                     (i32.or (i32.eq (local.get $c) (i32.const 44)) (i32.eq (local.get $c) (i32.const 58))))
          (then (br $done)))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (br $l)))
    (local.get $p))

  ;; the content of the JSON string [p, q) (quotes included), unescaped, written at d -> the end
  ;; (at most q - p bytes: the caller checks the room)
  (func $junesc (param $d i32) (param $p i32) (param $q i32) (result i32)
    (local $c i32) (local $u i32)
    (local.set $p (i32.add (local.get $p) (i32.const 1)))
    (local.set $q (i32.sub (local.get $q) (i32.const 1)))
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (local.get $p) (local.get $q)))
        (local.set $c (i32.load8_u (local.get $p)))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (if (i32.eq (local.get $c) (i32.const 92))
          (then
            (local.set $c (i32.load8_u (local.get $p)))
            (local.set $p (i32.add (local.get $p) (i32.const 1)))
            (if (i32.eq (local.get $c) (i32.const 110)) (then (local.set $c (i32.const 10))))
            (if (i32.eq (local.get $c) (i32.const 114)) (then (local.set $c (i32.const 13))))
            (if (i32.eq (local.get $c) (i32.const 116)) (then (local.set $c (i32.const 9))))
            (if (i32.eq (local.get $c) (i32.const 98)) (then (local.set $c (i32.const 8))))
            (if (i32.eq (local.get $c) (i32.const 102)) (then (local.set $c (i32.const 12))))
            (if (i32.eq (local.get $c) (i32.const 117))
              (then
                ;; \u00XX for a control character (the only \u the host's encoder writes)
                (local.set $u (i32.or (i32.or
                  (i32.shl (call $hexval (i32.load8_u (local.get $p))) (i32.const 12))
                  (i32.shl (call $hexval (i32.load8_u offset=1 (local.get $p))) (i32.const 8)))
                  (i32.or (i32.shl (call $hexval (i32.load8_u offset=2 (local.get $p))) (i32.const 4))
                          (call $hexval (i32.load8_u offset=3 (local.get $p))))))
                (if (i32.ge_u (local.get $u) (i32.const 128)) (then unreachable))
                (local.set $c (local.get $u))
                (local.set $p (i32.add (local.get $p) (i32.const 4)))))))
        (i32.store8 (local.get $d) (local.get $c))
        (local.set $d (i32.add (local.get $d) (i32.const 1)))
        (br $l)))
    (local.get $d))

  ;; the text of the JSON string [p, q) (quotes included), unescaped into the arena
  (func $jstr (param $p i32) (param $q i32) (result i64)
    (local $d0 i32)
    (local.set $d0 (call $reserve (i64.extend_i32_u (i32.sub (local.get $q) (local.get $p)))))
    (if (i32.eqz (local.get $d0)) (then (return (i64.const 0))))
    (call $pack (local.get $d0) (i32.sub (call $junesc (local.get $d0) (local.get $p) (local.get $q)) (local.get $d0))))

  ;; a JSON value's text x written at d as a template's value -> the end: a JSON string as its
  ;; text (unescaped), any other value as it is (canonical JSON)
  (func $wjtext (param $d i32) (param $x i64) (result i32)
    (local $p i32) (local $n i32)
    (local.set $p (call $ptr (local.get $x)))
    (local.set $n (call $len (local.get $x)))
    (if (i32.or (i32.lt_u (local.get $n) (i32.const 2)) (i32.ne (i32.load8_u (local.get $p)) (i32.const 34)))
      (then (return (call $wraw (local.get $d) (local.get $x)))))
    (if (i32.eqz (call $room (local.get $d) (i64.extend_i32_u (local.get $n)))) (then (return (local.get $d))))
    (call $junesc (local.get $d) (local.get $p) (i32.add (local.get $p) (local.get $n))))

  ;; obj[key] for a JSON object text obj and the key's JSON text (quotes included, canonical):
  ;; a string -> text, true/false -> bool, null -> null, anything else -> its JSON text (tag 6);
  ;; not an object, or no such key -> null. Sets $rt / $rv (and $oom when the arena is full).
  (func $jget (param $obj i64) (param $key i64)
    (local $p i32) (local $e i32) (local $k i32) (local $v i32) (local $c i32) (local $n i32)
    (global.set $rt (i32.const 0))
    (global.set $rv (i64.const 0))
    (local.set $p (call $ptr (local.get $obj)))
    (local.set $e (i32.add (local.get $p) (call $len (local.get $obj))))
    (if (i32.or (i32.ge_u (local.get $p) (local.get $e))
                (i32.ne (i32.load8_u (local.get $p)) (i32.const 123)))
      (then (return)))
    (local.set $p (i32.add (local.get $p) (i32.const 1)))
    (block $done
      (loop $member
        (br_if $done (i32.ge_u (local.get $p) (local.get $e)))
        (br_if $done (i32.eq (i32.load8_u (local.get $p)) (i32.const 125)))
        (local.set $k (local.get $p))
        (local.set $p (call $jskip (local.get $p) (local.get $e)))
        (br_if $done (i32.lt_s (local.get $p) (i32.const 0)))
        (br_if $done (i32.ne (i32.load8_u (local.get $p)) (i32.const 58)))
        (local.set $v (i32.add (local.get $p) (i32.const 1)))
        (local.set $p (call $jskip (local.get $v) (local.get $e)))
        (br_if $done (i32.lt_s (local.get $p) (i32.const 0)))
        (if (call $eqb (call $pack (local.get $k) (i32.sub (local.get $v) (i32.add (local.get $k) (i32.const 1))))
                       (local.get $key))
          (then
            (local.set $c (i32.load8_u (local.get $v)))
            (local.set $n (i32.sub (local.get $p) (local.get $v)))
            (if (i32.eq (local.get $c) (i32.const 34))
              (then
                (global.set $rv (call $jstr (local.get $v) (local.get $p)))
                (global.set $rt (select (i32.const 0) (i32.const 4) (global.get $oom)))
                (return)))
            (if (call $eqb (call $pack (local.get $v) (local.get $n)) (i64.const @TRUE@))
              (then (global.set $rt (i32.const 3)) (global.set $rv (i64.const 1)) (return)))
            (if (call $eqb (call $pack (local.get $v) (local.get $n)) (i64.const @FALSE@))
              (then (global.set $rt (i32.const 3)) (global.set $rv (i64.const 0)) (return)))
            (if (call $eqb (call $pack (local.get $v) (local.get $n)) (i64.const @NULL@))
              (then (return)))
            (global.set $rt (i32.const 6))
            (global.set $rv (call $pack (local.get $v) (local.get $n)))
            (return)))
        (br_if $done (i32.ne (i32.load8_u (local.get $p)) (i32.const 44)))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (br $member))))
