  ;; ---- program runtime (hand-written; auto.codegen.program_lower fills in the at-sign tokens) ----
  ;; The library every program artifact shares, after the prelude and $eq (auto.codegen.table_lower):
  ;; string operations, number parsing, a Pike VM ($search), JSON writers.
  ;; Globals: $fv (the field's text payload), $top (arena top), $oom (an allocation failed),
  ;; $pv (a parsed number), $rt / $rv (the program's result), $et / $ev (its evidence), and the
  ;; Pike VM's state ($vm_*).
  ;; Tokens: ESCTAB / HEXTAB (addresses of the JSON escape table and the hex digits),
  ;; TRUE / FALSE / NULL (text payloads of the JSON literals), each between at-signs.
  ;; Values are a tag (i32) and a payload (i64): see auto.codegen.program_expr.
  (global $fv (mut i64) (i64.const 0))
  (global $top (mut i32) (i32.const 0))
  (global $oom (mut i32) (i32.const 0))
  (global $pv (mut i64) (i64.const 0))
  (global $rt (mut i32) (i32.const 0))
  (global $rv (mut i64) (i64.const 0))
  (global $et (mut i32) (i32.const 0))
  (global $ev (mut i64) (i64.const 0))
  (global $vm_prog (mut i32) (i32.const 0))
  (global $vm_ns (mut i32) (i32.const 0))
  (global $vm_mark (mut i32) (i32.const 0))
  (global $vm_cur (mut i32) (i32.const 0))
  (global $vm_stk (mut i32) (i32.const 0))
  (global $vm_tp (mut i32) (i32.const 0))
  (global $vm_tn (mut i32) (i32.const 0))

  (func $ptr (param $x i64) (result i32) (i32.wrap_i64 (i64.shr_u (local.get $x) (i64.const 32))))
  (func $len (param $x i64) (result i32) (i32.wrap_i64 (local.get $x)))

  ;; can n more bytes be written at d? (grows memory; sets $oom and answers 0 when it cannot)
  (func $room (param $d i32) (param $n i64) (result i32)
    (if (call $ensure (i64.add (i64.extend_i32_u (local.get $d)) (local.get $n)))
      (then (return (i32.const 1))))
    (global.set $oom (i32.const 1))
    (i32.const 0))

  ;; n bytes at the arena top (8-aligned) -> their address, or 0 (and $oom set)
  (func $reserve (param $n i64) (result i32)
    (local $p i32)
    (local.set $p (global.get $top))
    (if (i32.eqz (call $room (local.get $p) (local.get $n))) (then (return (i32.const 0))))
    (global.set $top (i32.and (i32.add (i32.add (local.get $p) (i32.wrap_i64 (local.get $n)))
                                       (i32.const 7)) (i32.const -8)))
    (local.get $p))

  ;; ---- text ----
  ;; ASCII lower-case (up = 0) or upper-case (up = 1) copy of text x
  (func $case (param $x i64) (param $up i32) (result i64)
    (local $s i32) (local $n i32) (local $d i32) (local $i i32) (local $c i32) (local $lo i32)
    (local.set $s (call $ptr (local.get $x)))
    (local.set $n (call $len (local.get $x)))
    (local.set $d (call $reserve (i64.extend_i32_u (local.get $n))))
    (if (i32.eqz (local.get $d)) (then (return (i64.const 0))))
    (local.set $lo (select (i32.const 97) (i32.const 65) (local.get $up)))
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (local.set $c (i32.load8_u (i32.add (local.get $s) (local.get $i))))
        (if (i32.lt_u (i32.sub (local.get $c) (local.get $lo)) (i32.const 26))
          (then (local.set $c (i32.xor (local.get $c) (i32.const 32)))))
        (i32.store8 (i32.add (local.get $d) (local.get $i)) (local.get $c))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $l)))
    (call $pack (local.get $d) (local.get $n)))

  ;; is c one of the ASCII whitespace bytes " \t\n\r\f\v"?
  (func $isws (param $c i32) (result i32)
    (i32.or (i32.eq (local.get $c) (i32.const 32))
            (i32.lt_u (i32.sub (local.get $c) (i32.const 9)) (i32.const 5))))

  ;; text x without ASCII whitespace at either end (a view)
  (func $strip (param $x i64) (result i64)
    (local $s i32) (local $e i32)
    (local.set $s (call $ptr (local.get $x)))
    (local.set $e (i32.add (local.get $s) (call $len (local.get $x))))
    (block $d1
      (loop $l1
        (br_if $d1 (i32.ge_u (local.get $s) (local.get $e)))
        (br_if $d1 (i32.eqz (call $isws (i32.load8_u (local.get $s)))))
        (local.set $s (i32.add (local.get $s) (i32.const 1)))
        (br $l1)))
    (block $d2
      (loop $l2
        (br_if $d2 (i32.ge_u (local.get $s) (local.get $e)))
        (br_if $d2 (i32.eqz (call $isws (i32.load8_u (i32.sub (local.get $e) (i32.const 1))))))
        (local.set $e (i32.sub (local.get $e) (i32.const 1)))
        (br $l2)))
    (call $pack (local.get $s) (i32.sub (local.get $e) (local.get $s))))

  ;; are texts x and y byte-equal?
  (func $eqb (param $x i64) (param $y i64) (result i32)
    (local $n i32)
    (local.set $n (call $len (local.get $x)))
    (if (i32.ne (local.get $n) (call $len (local.get $y))) (then (return (i32.const 0))))
    (call $eq (call $ptr (local.get $x)) (call $ptr (local.get $y)) (local.get $n)))

  ;; Same: are the values (ta, va) and (tb, vb) the same JSON value? Equal tags, then: null;
  ;; int / float / bool payloads equal; texts and records (canonical JSON text) byte-equal; lists
  ;; of the same count with byte-equal texts
  (func $same (param $ta i32) (param $va i64) (param $tb i32) (param $vb i64) (result i32)
    (local $n i32) (local $k i32) (local $pa i32) (local $pb i32)
    (if (i32.ne (local.get $ta) (local.get $tb)) (then (return (i32.const 0))))
    (if (i32.eqz (local.get $ta)) (then (return (i32.const 1))))
    (if (i32.le_u (local.get $ta) (i32.const 3)) (then (return (i64.eq (local.get $va) (local.get $vb)))))
    (if (i32.ne (local.get $ta) (i32.const 5)) (then (return (call $eqb (local.get $va) (local.get $vb)))))
    (local.set $n (call $len (local.get $va)))
    (if (i32.ne (local.get $n) (call $len (local.get $vb))) (then (return (i32.const 0))))
    (local.set $pa (call $ptr (local.get $va)))
    (local.set $pb (call $ptr (local.get $vb)))
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (local.get $k) (local.get $n)))
        (if (i32.eqz (call $eqb (i64.load (i32.add (local.get $pa) (i32.shl (local.get $k) (i32.const 3))))
                                (i64.load (i32.add (local.get $pb) (i32.shl (local.get $k) (i32.const 3))))))
          (then (return (i32.const 0))))
        (local.set $k (i32.add (local.get $k) (i32.const 1)))
        (br $l)))
    (i32.const 1))

  ;; offset (from s) of the first occurrence of the m bytes at q in [s + from, s + n), or -1
  (func $find (param $s i32) (param $n i32) (param $q i32) (param $m i32) (param $from i32) (result i32)
    (local $i i32) (local $last i32) (local $c0 i32)
    (if (i32.eqz (local.get $m)) (then (return (local.get $from))))
    (if (i32.gt_u (local.get $m) (local.get $n)) (then (return (i32.const -1))))
    (local.set $last (i32.sub (local.get $n) (local.get $m)))
    (local.set $c0 (i32.load8_u (local.get $q)))
    (local.set $i (local.get $from))
    (block $done
      (loop $l
        (br_if $done (i32.gt_u (local.get $i) (local.get $last)))
        (if (i32.eq (i32.load8_u (i32.add (local.get $s) (local.get $i))) (local.get $c0))
          (then
            (if (call $eq (i32.add (local.get $s) (local.get $i)) (local.get $q) (local.get $m))
              (then (return (local.get $i))))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $l)))
    (i32.const -1))

  ;; \b at offset i of the n bytes at p: exactly one of the bytes before and at i is a word byte
  ;; (outside the text counts as a non-word byte), as the Pike VM's ASSERT asserts it
  (func $bnd (param $p i32) (param $n i32) (param $i i32) (result i32)
    (i32.ne
      (if (result i32) (i32.gt_u (local.get $i) (i32.const 0))
        (then (call $isword (i32.load8_u (i32.add (local.get $p) (i32.sub (local.get $i) (i32.const 1))))))
        (else (i32.const 0)))
      (if (result i32) (i32.lt_u (local.get $i) (local.get $n))
        (then (call $isword (i32.load8_u (i32.add (local.get $p) (local.get $i)))))
        (else (i32.const 0)))))

  ;; search(x, /(\b)?literal(\b)?/): the first occurrence of the text s in x with a word boundary
  ;; at its start (left = 1) and / or end (right = 1), as a view into x, or -1. The leftmost match
  ;; of a literal between assertions is its first occurrence where they hold, so this is what the
  ;; Pike VM finds, in one scan.
  (func $findw (param $x i64) (param $s i64) (param $left i32) (param $right i32) (result i64)
    (local $p i32) (local $n i32) (local $m i32) (local $from i32) (local $at i32)
    (local.set $p (call $ptr (local.get $x)))
    (local.set $n (call $len (local.get $x)))
    (local.set $m (call $len (local.get $s)))
    (block $none
      (loop $next
        (local.set $at (call $find (local.get $p) (local.get $n) (call $ptr (local.get $s)) (local.get $m) (local.get $from)))
        (br_if $none (i32.lt_s (local.get $at) (i32.const 0)))
        (if (i32.and
              (i32.or (i32.eqz (local.get $left)) (call $bnd (local.get $p) (local.get $n) (local.get $at)))
              (i32.or (i32.eqz (local.get $right))
                      (call $bnd (local.get $p) (local.get $n) (i32.add (local.get $at) (local.get $m)))))
          (then (return (call $pack (i32.add (local.get $p) (local.get $at)) (local.get $m)))))
        (local.set $from (i32.add (local.get $at) (i32.const 1)))
        (br $next)))
    (i64.const -1))

  ;; kind 0: s in x; 1: x.startswith(s); 2: x.endswith(s)
  (func $has (param $x i64) (param $s i64) (param $kind i32) (result i32)
    (local $n i32) (local $m i32)
    (local.set $n (call $len (local.get $x)))
    (local.set $m (call $len (local.get $s)))
    (if (i32.eqz (local.get $kind))
      (then (return (i32.ge_s (call $find (call $ptr (local.get $x)) (local.get $n)
                                          (call $ptr (local.get $s)) (local.get $m) (i32.const 0))
                              (i32.const 0)))))
    (if (i32.gt_u (local.get $m) (local.get $n)) (then (return (i32.const 0))))
    (call $eq (i32.add (call $ptr (local.get $x))
                       (select (i32.const 0) (i32.sub (local.get $n) (local.get $m))
                               (i32.eq (local.get $kind) (i32.const 1))))
              (call $ptr (local.get $s)) (local.get $m)))

  ;; x.split(sep) (sep non-empty) -> list payload (an array of text payloads in the arena)
  (func $split (param $x i64) (param $sep i64) (result i64)
    (local $s i32) (local $n i32) (local $q i32) (local $m i32) (local $k i32) (local $i i32)
    (local $a i32) (local $at i32) (local $j i32)
    (local.set $s (call $ptr (local.get $x)))
    (local.set $n (call $len (local.get $x)))
    (local.set $q (call $ptr (local.get $sep)))
    (local.set $m (call $len (local.get $sep)))
    (local.set $k (i32.const 1))
    (block $d1
      (loop $l1
        (local.set $i (call $find (local.get $s) (local.get $n) (local.get $q) (local.get $m) (local.get $i)))
        (br_if $d1 (i32.lt_s (local.get $i) (i32.const 0)))
        (local.set $k (i32.add (local.get $k) (i32.const 1)))
        (local.set $i (i32.add (local.get $i) (local.get $m)))
        (br $l1)))
    (local.set $a (call $reserve (i64.shl (i64.extend_i32_u (local.get $k)) (i64.const 3))))
    (if (i32.eqz (local.get $a)) (then (return (i64.const 0))))
    (local.set $i (i32.const 0))
    (block $d2
      (loop $l2
        (local.set $at (call $find (local.get $s) (local.get $n) (local.get $q) (local.get $m) (local.get $i)))
        (br_if $d2 (i32.lt_s (local.get $at) (i32.const 0)))
        (i64.store (i32.add (local.get $a) (i32.shl (local.get $j) (i32.const 3)))
          (call $pack (i32.add (local.get $s) (local.get $i)) (i32.sub (local.get $at) (local.get $i))))
        (local.set $j (i32.add (local.get $j) (i32.const 1)))
        (local.set $i (i32.add (local.get $at) (local.get $m)))
        (br $l2)))
    (i64.store (i32.add (local.get $a) (i32.shl (local.get $j) (i32.const 3)))
      (call $pack (i32.add (local.get $s) (local.get $i)) (i32.sub (local.get $n) (local.get $i))))
    (call $pack (local.get $a) (local.get $k)))

  ;; sep.join(list xs) -> text in the arena
  (func $join (param $xs i64) (param $sep i64) (result i64)
    (local $a i32) (local $k i32) (local $i i32) (local $tot i64) (local $d i32) (local $o i32)
    (local $e i64) (local $m i32)
    (local.set $a (call $ptr (local.get $xs)))
    (local.set $k (call $len (local.get $xs)))
    (local.set $m (call $len (local.get $sep)))
    (block $d1
      (loop $l1
        (br_if $d1 (i32.ge_u (local.get $i) (local.get $k)))
        (local.set $tot (i64.add (local.get $tot) (i64.extend_i32_u
          (call $len (i64.load (i32.add (local.get $a) (i32.shl (local.get $i) (i32.const 3))))))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $l1)))
    (if (local.get $k)
      (then (local.set $tot (i64.add (local.get $tot)
        (i64.mul (i64.extend_i32_u (i32.sub (local.get $k) (i32.const 1))) (i64.extend_i32_u (local.get $m)))))))
    (if (i64.gt_u (local.get $tot) (i64.const 0x7fff0000))
      (then (global.set $oom (i32.const 1)) (return (i64.const 0))))
    (local.set $d (call $reserve (local.get $tot)))
    (if (i32.eqz (local.get $d)) (then (return (i64.const 0))))
    (local.set $o (local.get $d))
    (local.set $i (i32.const 0))
    (block $d2
      (loop $l2
        (br_if $d2 (i32.ge_u (local.get $i) (local.get $k)))
        (if (local.get $i)
          (then (local.set $o (call $copy (local.get $o) (call $ptr (local.get $sep)) (local.get $m)))))
        (local.set $e (i64.load (i32.add (local.get $a) (i32.shl (local.get $i) (i32.const 3)))))
        (local.set $o (call $copy (local.get $o) (call $ptr (local.get $e)) (call $len (local.get $e))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $l2)))
    (call $pack (local.get $d) (i32.sub (local.get $o) (local.get $d))))

  ;; list xs [i] (i < 0 counts from the end) -> text payload, or -1 when out of range
  (func $index (param $xs i64) (param $i i32) (result i64)
    (local $k i32)
    (local.set $k (call $len (local.get $xs)))
    (if (i32.lt_s (local.get $i) (i32.const 0)) (then (local.set $i (i32.add (local.get $i) (local.get $k)))))
    (if (i32.or (i32.lt_s (local.get $i) (i32.const 0)) (i32.ge_s (local.get $i) (local.get $k)))
      (then (return (i64.const -1))))
    (i64.load (i32.add (call $ptr (local.get $xs)) (i32.shl (local.get $i) (i32.const 3)))))

  ;; byte offset of code point k (0 <= k <= code points) in the n bytes at s
  (func $cp_off (param $s i32) (param $n i32) (param $k i32) (result i32)
    (local $i i32)
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (if (i32.ne (i32.and (i32.load8_u (i32.add (local.get $s) (local.get $i))) (i32.const 0xC0))
                    (i32.const 0x80))
          (then
            (br_if $done (i32.eqz (local.get $k)))
            (local.set $k (i32.sub (local.get $k) (i32.const 1)))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $l)))
    (local.get $i))

  ;; a Python slice index (has = 0: the default dflt) normalized against length n
  (func $norm (param $i i32) (param $has i32) (param $dflt i32) (param $n i32) (result i32)
    (if (i32.eqz (local.get $has)) (then (return (local.get $dflt))))
    (if (i32.lt_s (local.get $i) (i32.const 0))
      (then
        (local.set $i (i32.add (local.get $i) (local.get $n)))
        (if (i32.lt_s (local.get $i) (i32.const 0)) (then (local.set $i (i32.const 0))))))
    (if (i32.gt_s (local.get $i) (local.get $n)) (then (local.set $i (local.get $n))))
    (local.get $i))

  ;; x[start:stop] in code points (flags: bit 0 start given, bit 1 stop given) -> a view
  (func $slice (param $x i64) (param $start i32) (param $stop i32) (param $flags i32) (result i64)
    (local $s i32) (local $n i32) (local $cps i32) (local $i i32) (local $a i32) (local $b i32)
    (local.set $s (call $ptr (local.get $x)))
    (local.set $n (call $len (local.get $x)))
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (local.set $cps (i32.add (local.get $cps)
          (i32.ne (i32.and (i32.load8_u (i32.add (local.get $s) (local.get $i))) (i32.const 0xC0))
                  (i32.const 0x80))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $l)))
    (local.set $a (call $norm (local.get $start) (i32.and (local.get $flags) (i32.const 1))
                              (i32.const 0) (local.get $cps)))
    (local.set $b (call $norm (local.get $stop) (i32.and (local.get $flags) (i32.const 2))
                              (local.get $cps) (local.get $cps)))
    (if (i32.le_s (local.get $b) (local.get $a)) (then (return (call $pack (local.get $s) (i32.const 0)))))
    (local.set $a (call $cp_off (local.get $s) (local.get $n) (local.get $a)))
    (local.set $b (call $cp_off (local.get $s) (local.get $n) (local.get $b)))
    (call $pack (i32.add (local.get $s) (local.get $a)) (i32.sub (local.get $b) (local.get $a))))

  ;; ---- numbers ----
  ;; Parse the stripped text x: mode 0 int, 1 float, 2 money (one optional "$" after the sign).
  ;; Grammar: -? $? digits (a comma only between two digits) then, for modes 1 and 2, an optional
  ;; "." and 1-4 digits. Returns 1 and sets $pv (an i64; ten-thousandths for floats), or 0 (null):
  ;; a syntax error, an int outside i64, or |float| >= 10**14.
  (func $parse (param $x i64) (param $mode i32) (result i32)
    (local $p i32) (local $e i32) (local $neg i32) (local $acc i64) (local $d i64) (local $c i32)
    (local $lim i64) (local $nd i32) (local $fd i32) (local $fr i64)
    (local.set $x (call $strip (local.get $x)))
    (local.set $p (call $ptr (local.get $x)))
    (local.set $e (i32.add (local.get $p) (call $len (local.get $x))))
    (if (i32.and (i32.lt_u (local.get $p) (local.get $e)) (i32.eq (i32.load8_u (local.get $p)) (i32.const 45)))
      (then (local.set $neg (i32.const 1)) (local.set $p (i32.add (local.get $p) (i32.const 1)))))
    (if (i32.and (i32.eq (local.get $mode) (i32.const 2))
                 (i32.and (i32.lt_u (local.get $p) (local.get $e)) (i32.eq (i32.load8_u (local.get $p)) (i32.const 36))))
      (then (local.set $p (i32.add (local.get $p) (i32.const 1)))))
    ;; magnitude limit: ints 2**63 - 1 (2**63 when negative); floats 10**14 - 1 (integer part)
    (local.set $lim (select (i64.add (i64.const 0x7fffffffffffffff) (i64.extend_i32_u (local.get $neg)))
                            (i64.const 99999999999999) (i32.eqz (local.get $mode))))
    (block $int
      (loop $l
        (br_if $int (i32.ge_u (local.get $p) (local.get $e)))
        (local.set $c (i32.load8_u (local.get $p)))
        (if (i32.lt_u (i32.sub (local.get $c) (i32.const 48)) (i32.const 10))
          (then
            (local.set $d (i64.extend_i32_u (i32.sub (local.get $c) (i32.const 48))))
            (if (i64.gt_u (local.get $acc) (i64.div_u (i64.sub (local.get $lim) (local.get $d)) (i64.const 10)))
              (then (return (i32.const 0))))
            (local.set $acc (i64.add (i64.mul (local.get $acc) (i64.const 10)) (local.get $d)))
            (local.set $nd (i32.add (local.get $nd) (i32.const 1)))
            (local.set $p (i32.add (local.get $p) (i32.const 1)))
            (br $l)))
        (br_if $int (i32.ne (local.get $c) (i32.const 44)))
        ;; a comma: a digit before it (nd > 0 and the previous byte) and a digit after it
        (br_if $int (i32.eqz (local.get $nd)))
        (br_if $int (i32.ge_u (i32.sub (i32.load8_u (i32.sub (local.get $p) (i32.const 1))) (i32.const 48)) (i32.const 10)))
        (br_if $int (i32.ge_u (i32.add (local.get $p) (i32.const 1)) (local.get $e)))
        (br_if $int (i32.ge_u (i32.sub (i32.load8_u offset=1 (local.get $p)) (i32.const 48)) (i32.const 10)))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (br $l)))
    (if (i32.eqz (local.get $nd)) (then (return (i32.const 0))))
    (if (i32.eqz (local.get $mode))
      (then
        (if (i32.ne (local.get $p) (local.get $e)) (then (return (i32.const 0))))
        (global.set $pv (select (i64.sub (i64.const 0) (local.get $acc)) (local.get $acc) (local.get $neg)))
        (return (i32.const 1))))
    (if (i32.lt_u (local.get $p) (local.get $e))
      (then
        (if (i32.ne (i32.load8_u (local.get $p)) (i32.const 46)) (then (return (i32.const 0))))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (block $fd
          (loop $l
            (br_if $fd (i32.ge_u (local.get $p) (local.get $e)))
            (local.set $c (i32.sub (i32.load8_u (local.get $p)) (i32.const 48)))
            (if (i32.ge_u (local.get $c) (i32.const 10)) (then (return (i32.const 0))))
            (if (i32.ge_u (local.get $fd) (i32.const 4)) (then (return (i32.const 0))))
            (local.set $fr (i64.add (i64.mul (local.get $fr) (i64.const 10)) (i64.extend_i32_u (local.get $c))))
            (local.set $fd (i32.add (local.get $fd) (i32.const 1)))
            (local.set $p (i32.add (local.get $p) (i32.const 1)))
            (br $l)))
        (if (i32.eqz (local.get $fd)) (then (return (i32.const 0))))
        (loop $pad
          (if (i32.lt_u (local.get $fd) (i32.const 4))
            (then
              (local.set $fr (i64.mul (local.get $fr) (i64.const 10)))
              (local.set $fd (i32.add (local.get $fd) (i32.const 1)))
              (br $pad))))))
    (local.set $acc (i64.add (i64.mul (local.get $acc) (i64.const 10000)) (local.get $fr)))
    (global.set $pv (select (i64.sub (i64.const 0) (local.get $acc)) (local.get $acc) (local.get $neg)))
    (i32.const 1))

  ;; ---- JSON writers: each checks $room first and writes nothing when memory is exhausted ----
  ;; the unsigned decimal digits of v at d
  (func $wdigits (param $d i32) (param $v i64) (result i32)
    (local $n i32) (local $t i64) (local $k i32)
    (local.set $n (i32.const 1))
    (local.set $t (local.get $v))
    (block $done
      (loop $l
        (br_if $done (i64.lt_u (local.get $t) (i64.const 10)))
        (local.set $t (i64.div_u (local.get $t) (i64.const 10)))
        (local.set $n (i32.add (local.get $n) (i32.const 1)))
        (br $l)))
    (local.set $k (local.get $n))
    (loop $l
      (local.set $k (i32.sub (local.get $k) (i32.const 1)))
      (i32.store8 (i32.add (local.get $d) (local.get $k))
        (i32.add (i32.const 48) (i32.wrap_i64 (i64.rem_u (local.get $v) (i64.const 10)))))
      (local.set $v (i64.div_u (local.get $v) (i64.const 10)))
      (br_if $l (local.get $k)))
    (i32.add (local.get $d) (local.get $n)))

  ;; an i64 as Python's str(int)
  (func $wint (param $d i32) (param $v i64) (result i32)
    (if (i32.eqz (call $room (local.get $d) (i64.const 24))) (then (return (local.get $d))))
    (if (i64.lt_s (local.get $v) (i64.const 0))
      (then
        (i32.store8 (local.get $d) (i32.const 45))
        (local.set $d (i32.add (local.get $d) (i32.const 1)))
        (local.set $v (i64.sub (i64.const 0) (local.get $v)))))
    (call $wdigits (local.get $d) (local.get $v)))

  ;; k (0..4) fraction digits of f, zero-padded, at d
  (func $wfrac (param $d i32) (param $f i64) (param $k i32) (result i32)
    (local $e i32)
    (local.set $e (i32.add (local.get $d) (local.get $k)))
    (block $done
      (loop $l
        (br_if $done (i32.eqz (local.get $k)))
        (local.set $k (i32.sub (local.get $k) (i32.const 1)))
        (i32.store8 (i32.add (local.get $d) (local.get $k))
          (i32.add (i32.const 48) (i32.wrap_i64 (i64.rem_u (local.get $f) (i64.const 10)))))
        (local.set $f (i64.div_u (local.get $f) (i64.const 10)))
        (br $l)))
    (local.get $e))

  ;; A float of v ten-thousandths as Python's repr(v / 10000) (the binary64 nearest to the
  ;; exact value, printed as the shortest decimal that reads back as it; ties to even digits).
  ;; Below 10**11 (at most 15 significant digits) that is the exact decimal without trailing
  ;; zeros ("1.5", "-2.0"); above, the shortest of the value rounded to k = 0..4 decimals whose
  ;; nearest binary64 is the same. Exact integer arithmetic: the binary64 is D / 2**16 there.
  (func $wfloat (param $d i32) (param $v i64) (result i32)
    (local $m i64) (local $f i64) (local $k i32) (local $x f64) (local $dd i64) (local $dh i64)
    (local $dl i64) (local $bits i64) (local $u i64) (local $p i64) (local $num i64) (local $r i64)
    (local $n i64) (local $diff i64) (local $lim i64) (local $ok i32) (local $even i32)
    (if (i32.eqz (call $room (local.get $d) (i64.const 32))) (then (return (local.get $d))))
    (local.set $m (local.get $v))
    (if (i64.lt_s (local.get $v) (i64.const 0))
      (then
        (i32.store8 (local.get $d) (i32.const 45))
        (local.set $d (i32.add (local.get $d) (i32.const 1)))
        (local.set $m (i64.sub (i64.const 0) (local.get $v)))))
    (if (i64.lt_u (local.get $m) (i64.const 1000000000000000))
      (then
        (local.set $d (call $wdigits (local.get $d) (i64.div_u (local.get $m) (i64.const 10000))))
        (i32.store8 (local.get $d) (i32.const 46))
        (local.set $d (i32.add (local.get $d) (i32.const 1)))
        (local.set $f (i64.rem_u (local.get $m) (i64.const 10000)))
        (if (i64.eqz (local.get $f))
          (then
            (i32.store8 (local.get $d) (i32.const 48))
            (return (i32.add (local.get $d) (i32.const 1)))))
        (local.set $k (i32.const 4))
        (block $done
          (loop $l
            (br_if $done (i64.ne (i64.rem_u (local.get $f) (i64.const 10)) (i64.const 0)))
            (local.set $f (i64.div_u (local.get $f) (i64.const 10)))
            (local.set $k (i32.sub (local.get $k) (i32.const 1)))
            (br $l)))
        (return (call $wfrac (local.get $d) (local.get $f) (local.get $k)))))
    ;; 10**11 <= x < 10**14: q + r / 10**4 rounds correctly (see the module docstring)
    (local.set $x (f64.add (f64.convert_i64_u (i64.div_u (local.get $m) (i64.const 10000)))
                           (f64.div (f64.convert_i64_u (i64.rem_u (local.get $m) (i64.const 10000)))
                                    (f64.const 10000))))
    (local.set $dd (i64.trunc_f64_u (f64.mul (local.get $x) (f64.const 65536))))
    (local.set $dh (i64.shr_u (local.get $dd) (i64.const 16)))
    (local.set $dl (i64.and (local.get $dd) (i64.const 0xFFFF)))
    (local.set $bits (i64.reinterpret_f64 (local.get $x)))
    ;; ulp in units of 2**-16: 2**(exponent - 52 + 16)
    (local.set $u (i64.shl (i64.const 1)
      (i64.sub (i64.and (i64.shr_u (local.get $bits) (i64.const 52)) (i64.const 0x7FF)) (i64.const 1059))))
    (local.set $even (i64.eqz (i64.and (local.get $bits) (i64.const 1))))
    (local.set $p (i64.const 1))
    (loop $try
      ;; the value rounded to k decimals (ties to an even last digit): n / p
      (local.set $num (i64.mul (local.get $dl) (local.get $p)))
      (local.set $f (i64.shr_u (local.get $num) (i64.const 16)))
      (local.set $r (i64.and (local.get $num) (i64.const 0xFFFF)))
      (if (i32.or (i64.gt_u (local.get $r) (i64.const 0x8000))
                  (i32.and (i64.eq (local.get $r) (i64.const 0x8000))
                           (i32.wrap_i64 (i64.and (i64.add (i64.mul (local.get $dh) (local.get $p)) (local.get $f))
                                                  (i64.const 1)))))
        (then (local.set $f (i64.add (local.get $f) (i64.const 1)))))
      (local.set $n (i64.add (i64.mul (local.get $dh) (local.get $p)) (local.get $f)))
      ;; (n / p - x) * p * 2**16, and the half-ulp bound in the same units (a quarter ulp below
      ;; a power of two, where the next smaller binary64 is closer)
      (local.set $diff (i64.sub (i64.shl (local.get $f) (i64.const 16)) (local.get $num)))
      (local.set $lim (i64.mul (local.get $u) (local.get $p)))
      (if (i32.and (i64.lt_s (local.get $diff) (i64.const 0))
                   (i64.eqz (i64.and (local.get $bits) (i64.const 0xFFFFFFFFFFFFF))))
        (then (local.set $diff (i64.shl (local.get $diff) (i64.const 1)))))
      (if (i64.lt_s (local.get $diff) (i64.const 0))
        (then (local.set $diff (i64.sub (i64.const 0) (local.get $diff)))))
      (local.set $diff (i64.shl (local.get $diff) (i64.const 1)))
      (local.set $ok (i32.or (i64.lt_u (local.get $diff) (local.get $lim))
                             (i32.and (i64.eq (local.get $diff) (local.get $lim)) (local.get $even))))
      (if (i32.and (i32.eqz (local.get $ok)) (i32.lt_u (local.get $k) (i32.const 4)))
        (then
          (local.set $k (i32.add (local.get $k) (i32.const 1)))
          (local.set $p (i64.mul (local.get $p) (i64.const 10)))
          (br $try))))
    (local.set $d (call $wdigits (local.get $d) (i64.div_u (local.get $n) (local.get $p))))
    (i32.store8 (local.get $d) (i32.const 46))
    (local.set $d (i32.add (local.get $d) (i32.const 1)))
    (if (i32.eqz (local.get $k))
      (then
        (i32.store8 (local.get $d) (i32.const 48))
        (return (i32.add (local.get $d) (i32.const 1)))))
    (call $wfrac (local.get $d) (i64.rem_u (local.get $n) (local.get $p)) (local.get $k)))

  ;; a JSON string of the text x, escaped as Python's json with ensure_ascii=False
  (func $wstr (param $d i32) (param $x i64) (result i32)
    (local $s i32) (local $e i32) (local $c i32) (local $r i32)
    (local.set $s (call $ptr (local.get $x)))
    (local.set $e (i32.add (local.get $s) (call $len (local.get $x))))
    (if (i32.eqz (call $room (local.get $d)
                   (i64.add (i64.mul (i64.extend_i32_u (call $len (local.get $x))) (i64.const 6)) (i64.const 2))))
      (then (return (local.get $d))))
    (i32.store8 (local.get $d) (i32.const 34))
    (local.set $d (i32.add (local.get $d) (i32.const 1)))
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (local.get $s) (local.get $e)))
        (local.set $c (i32.load8_u (local.get $s)))
        (local.set $s (i32.add (local.get $s) (i32.const 1)))
        (if (i32.and (i32.ge_u (local.get $c) (i32.const 32))
                     (i32.and (i32.ne (local.get $c) (i32.const 34)) (i32.ne (local.get $c) (i32.const 92))))
          (then
            (i32.store8 (local.get $d) (local.get $c))
            (local.set $d (i32.add (local.get $d) (i32.const 1)))
            (br $l)))
        (i32.store8 (local.get $d) (i32.const 92))
        (local.set $r (i32.load8_u offset=@ESCTAB@ (local.get $c)))
        (if (local.get $r)
          (then
            (i32.store8 offset=1 (local.get $d) (local.get $r))
            (local.set $d (i32.add (local.get $d) (i32.const 2))))
          (else
            ;; \u00XX, lowercase hex
            (i32.store offset=1 (local.get $d) (i32.const 0x00303075))
            (i32.store8 offset=4 (local.get $d) (i32.add (i32.const 48) (i32.shr_u (local.get $c) (i32.const 4))))
            (i32.store8 offset=5 (local.get $d)
              (i32.load8_u offset=@HEXTAB@ (i32.and (local.get $c) (i32.const 15))))
            (local.set $d (i32.add (local.get $d) (i32.const 6)))))
        (br $l)))
    (i32.store8 (local.get $d) (i32.const 34))
    (i32.add (local.get $d) (i32.const 1)))

  ;; n constant bytes at s
  (func $wraw (param $d i32) (param $x i64) (result i32)
    (if (i32.eqz (call $room (local.get $d) (i64.extend_i32_u (call $len (local.get $x)))))
      (then (return (local.get $d))))
    (call $copy (local.get $d) (call $ptr (local.get $x)) (call $len (local.get $x))))

  ;; a list of texts as a JSON array
  (func $wlist (param $d i32) (param $xs i64) (result i32)
    (local $a i32) (local $k i32) (local $i i32)
    (local.set $a (call $ptr (local.get $xs)))
    (local.set $k (call $len (local.get $xs)))
    (if (i32.eqz (call $room (local.get $d) (i64.const 2))) (then (return (local.get $d))))
    (i32.store8 (local.get $d) (i32.const 91))
    (local.set $d (i32.add (local.get $d) (i32.const 1)))
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (local.get $i) (local.get $k)))
        (if (local.get $i)
          (then
            (if (i32.eqz (call $room (local.get $d) (i64.const 1))) (then (return (local.get $d))))
            (i32.store8 (local.get $d) (i32.const 44))
            (local.set $d (i32.add (local.get $d) (i32.const 1)))))
        (local.set $d (call $wstr (local.get $d)
                            (i64.load (i32.add (local.get $a) (i32.shl (local.get $i) (i32.const 3))))))
        (if (global.get $oom) (then (return (local.get $d))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $l)))
    (if (i32.eqz (call $room (local.get $d) (i64.const 1))) (then (return (local.get $d))))
    (i32.store8 (local.get $d) (i32.const 93))
    (i32.add (local.get $d) (i32.const 1)))

  ;; any value (tag t, payload v) as canonical JSON
  (func $wval (param $d i32) (param $t i32) (param $v i64) (result i32)
    (if (i32.eq (local.get $t) (i32.const 1)) (then (return (call $wint (local.get $d) (local.get $v)))))
    (if (i32.eq (local.get $t) (i32.const 2)) (then (return (call $wfloat (local.get $d) (local.get $v)))))
    (if (i32.eq (local.get $t) (i32.const 3))
      (then (return (call $wraw (local.get $d) (select (i64.const @TRUE@) (i64.const @FALSE@)
                                                       (i32.wrap_i64 (local.get $v)))))))
    (if (i32.eq (local.get $t) (i32.const 4)) (then (return (call $wstr (local.get $d) (local.get $v)))))
    (if (i32.eq (local.get $t) (i32.const 5)) (then (return (call $wlist (local.get $d) (local.get $v)))))
    (if (i32.eq (local.get $t) (i32.const 6)) (then (return (call $wraw (local.get $d) (local.get $v)))))
    (call $wraw (local.get $d) (i64.const @NULL@)))

  ;; ---- Pike VM ----
  ;; word byte for \b: ASCII [A-Za-z0-9_]
  (func $isword (param $c i32) (result i32)
    (i32.or (i32.or (i32.lt_u (i32.sub (local.get $c) (i32.const 48)) (i32.const 10))
                    (i32.lt_u (i32.sub (i32.or (local.get $c) (i32.const 32)) (i32.const 97)) (i32.const 26)))
            (i32.eq (local.get $c) (i32.const 95))))

  ;; does assertion kind (0 start, 1 end, 2 word boundary, 3 not a boundary) hold at pos?
  (func $assert (param $kind i32) (param $pos i32) (result i32)
    (local $b i32) (local $a i32)
    (if (i32.eqz (local.get $kind)) (then (return (i32.eqz (local.get $pos)))))
    (if (i32.eq (local.get $kind) (i32.const 1)) (then (return (i32.eq (local.get $pos) (global.get $vm_tn)))))
    (if (local.get $pos)
      (then (local.set $b (call $isword (i32.load8_u (i32.sub (i32.add (global.get $vm_tp) (local.get $pos)) (i32.const 1)))))))
    (if (i32.lt_u (local.get $pos) (global.get $vm_tn))
      (then (local.set $a (call $isword (i32.load8_u (i32.add (global.get $vm_tp) (local.get $pos)))))))
    (i32.xor (i32.ne (local.get $a) (local.get $b)) (i32.eq (local.get $kind) (i32.const 3))))

  ;; Add the thread (pc, slots $vm_cur) at text position pos to the list (n entries of 4 + 4*ns
  ;; bytes) following JMP / SPLIT / SAVE / ASSERT in priority order; each pc once per stamp.
  ;; $vm_cur is restored before returning. Returns the new entry count.
  (func $addthread (param $list i32) (param $n i32) (param $pc i32) (param $pos i32) (param $stamp i32) (result i32)
    (local $sp i32) (local $a i32) (local $ins i32) (local $op i32) (local $ns4 i32) (local $e i32)
    (local.set $ns4 (i32.shl (global.get $vm_ns) (i32.const 2)))
    (local.set $sp (global.get $vm_stk))
    (i32.store (local.get $sp) (local.get $pc))
    (local.set $sp (i32.add (local.get $sp) (i32.const 8)))
    (block $empty
      (loop $pop
        (br_if $empty (i32.eq (local.get $sp) (global.get $vm_stk)))
        (local.set $sp (i32.sub (local.get $sp) (i32.const 8)))
        (local.set $pc (i32.load (local.get $sp)))
        (if (i32.lt_s (local.get $pc) (i32.const 0))
          (then
            ;; restore slot -1 - pc
            (i32.store (i32.add (global.get $vm_cur) (i32.shl (i32.sub (i32.const -1) (local.get $pc)) (i32.const 2)))
                       (i32.load offset=4 (local.get $sp)))
            (br $pop)))
        (block $stop
          (loop $follow
            (local.set $e (i32.add (global.get $vm_mark) (i32.shl (local.get $pc) (i32.const 2))))
            (br_if $stop (i32.eq (i32.load (local.get $e)) (local.get $stamp)))
            (i32.store (local.get $e) (local.get $stamp))
            (local.set $ins (i32.add (global.get $vm_prog) (i32.mul (local.get $pc) (i32.const 12))))
            (local.set $op (i32.load (local.get $ins)))
            (local.set $a (i32.load offset=4 (local.get $ins)))
            (if (i32.eq (local.get $op) (i32.const 2))
              (then (local.set $pc (local.get $a)) (br $follow)))
            (if (i32.eq (local.get $op) (i32.const 1))
              (then
                (i32.store (local.get $sp) (i32.load offset=8 (local.get $ins)))
                (local.set $sp (i32.add (local.get $sp) (i32.const 8)))
                (local.set $pc (local.get $a))
                (br $follow)))
            (if (i32.eq (local.get $op) (i32.const 3))
              (then
                (local.set $e (i32.add (global.get $vm_cur) (i32.shl (local.get $a) (i32.const 2))))
                (i32.store (local.get $sp) (i32.sub (i32.const -1) (local.get $a)))
                (i32.store offset=4 (local.get $sp) (i32.load (local.get $e)))
                (local.set $sp (i32.add (local.get $sp) (i32.const 8)))
                (i32.store (local.get $e) (local.get $pos))
                (local.set $pc (i32.add (local.get $pc) (i32.const 1)))
                (br $follow)))
            (if (i32.eq (local.get $op) (i32.const 4))
              (then
                (br_if $stop (i32.eqz (call $assert (local.get $a) (local.get $pos))))
                (local.set $pc (i32.add (local.get $pc) (i32.const 1)))
                (br $follow)))
            ;; BYTE or MATCH: the thread waits in the list
            (local.set $e (i32.add (local.get $list) (i32.mul (local.get $n) (i32.add (local.get $ns4) (i32.const 4)))))
            (i32.store (local.get $e) (local.get $pc))
            (memory.copy (i32.add (local.get $e) (i32.const 4)) (global.get $vm_cur) (local.get $ns4))
            (local.set $n (i32.add (local.get $n) (i32.const 1)))))
        (br $pop)))
    (local.get $n))

  ;; First leftmost-first match of the program (ni instructions at prog, ns slots) in text x ->
  ;; the text payload of capture group g, or -1 (no match, or the group did not take part).
  ;; The VM's memory comes from the arena and is released before returning.
  (func $search (param $x i64) (param $prog i32) (param $ni i32) (param $ns i32) (param $g i32) (param $first i32) (result i64)
    (local $save i32) (local $base i32) (local $tsz i32) (local $cl i32) (local $nl i32)
    (local $best i32) (local $cc i32) (local $nc i32) (local $pos i32) (local $tn i32)
    (local $matched i32) (local $i i32) (local $th i32) (local $ins i32) (local $c i32)
    (local $s i32) (local $e i32) (local $ns4 i32) (local $set i32)
    (local.set $ns4 (i32.shl (local.get $ns) (i32.const 2)))
    (local.set $tsz (i32.add (local.get $ns4) (i32.const 4)))
    (local.set $save (global.get $top))
    ;; marks 4*ni | cur ns4 | best ns4 | stack 8*(2*ni+2) | clist ni*tsz | nlist ni*tsz
    (local.set $base (call $reserve (i64.extend_i32_u
      (i32.add (i32.add (i32.shl (local.get $ni) (i32.const 2)) (i32.shl (local.get $ns4) (i32.const 1)))
               (i32.add (i32.shl (i32.add (i32.shl (local.get $ni) (i32.const 1)) (i32.const 2)) (i32.const 3))
                        (i32.shl (i32.mul (local.get $ni) (local.get $tsz)) (i32.const 1)))))))
    (if (i32.eqz (local.get $base)) (then (return (i64.const -1))))
    (global.set $vm_prog (local.get $prog))
    (global.set $vm_ns (local.get $ns))
    (global.set $vm_tp (call $ptr (local.get $x)))
    (local.set $tn (call $len (local.get $x)))
    (global.set $vm_tn (local.get $tn))
    (global.set $vm_mark (local.get $base))
    (memory.fill (local.get $base) (i32.const 0) (i32.shl (local.get $ni) (i32.const 2)))
    (global.set $vm_cur (i32.add (local.get $base) (i32.shl (local.get $ni) (i32.const 2))))
    (local.set $best (i32.add (global.get $vm_cur) (local.get $ns4)))
    (global.set $vm_stk (i32.add (local.get $best) (local.get $ns4)))
    (local.set $cl (i32.add (global.get $vm_stk) (i32.shl (i32.add (i32.shl (local.get $ni) (i32.const 1)) (i32.const 2)) (i32.const 3))))
    (local.set $nl (i32.add (local.get $cl) (i32.mul (local.get $ni) (local.get $tsz))))
    (block $done
      (loop $step
        ;; a new lowest-priority thread at each code-point start until something matched
        (if (i32.eqz (local.get $matched))
          (then
            ;; no live thread: skip to the next byte that may start a match (first: a 256-byte
            ;; table, or 0 when the program can match without consuming a byte)
            (if (i32.and (i32.eqz (local.get $cc)) (i32.ne (local.get $first) (i32.const 0)))
              (then
                (block $found
                  (loop $scan
                    (br_if $done (i32.ge_u (local.get $pos) (local.get $tn)))
                    (br_if $found (i32.load8_u (i32.add (local.get $first)
                      (i32.load8_u (i32.add (global.get $vm_tp) (local.get $pos))))))
                    (local.set $pos (i32.add (local.get $pos) (i32.const 1)))
                    (br $scan)))))
            (if (i32.or (i32.ge_u (local.get $pos) (local.get $tn))
                        (i32.ne (i32.and (i32.load8_u (i32.add (global.get $vm_tp) (local.get $pos))) (i32.const 0xC0))
                                (i32.const 0x80)))
              (then
                (memory.fill (global.get $vm_cur) (i32.const 0xFF) (local.get $ns4))
                (local.set $cc (call $addthread (local.get $cl) (local.get $cc) (i32.const 0) (local.get $pos)
                                                (i32.add (local.get $pos) (i32.const 1))))))))
        (br_if $done (i32.and (i32.eqz (local.get $cc)) (local.get $matched)))
        (local.set $nc (i32.const 0))
        (local.set $i (i32.const 0))
        (local.set $th (local.get $cl))
        (block $cut
          (loop $each
            (br_if $cut (i32.ge_u (local.get $i) (local.get $cc)))
            (local.set $ins (i32.add (local.get $prog) (i32.mul (i32.load (local.get $th)) (i32.const 12))))
            (if (i32.eq (i32.load (local.get $ins)) (i32.const 5))
              (then
                (memory.copy (local.get $best) (i32.add (local.get $th) (i32.const 4)) (local.get $ns4))
                (local.set $matched (i32.const 1))
                (br $cut)))
            (if (i32.lt_u (local.get $pos) (local.get $tn))
              (then
                (local.set $c (i32.load8_u (i32.add (global.get $vm_tp) (local.get $pos))))
                (local.set $set (i32.load offset=4 (local.get $ins)))
                (if (i32.and (i32.shr_u (i32.load8_u (i32.add (local.get $set) (i32.shr_u (local.get $c) (i32.const 3))))
                                        (i32.and (local.get $c) (i32.const 7)))
                             (i32.const 1))
                  (then
                    (memory.copy (global.get $vm_cur) (i32.add (local.get $th) (i32.const 4)) (local.get $ns4))
                    (local.set $nc (call $addthread (local.get $nl) (local.get $nc)
                                     (i32.add (i32.load (local.get $th)) (i32.const 1))
                                     (i32.add (local.get $pos) (i32.const 1))
                                     (i32.add (local.get $pos) (i32.const 2))))))))
            (local.set $th (i32.add (local.get $th) (local.get $tsz)))
            (local.set $i (i32.add (local.get $i) (i32.const 1)))
            (br $each)))
        (local.set $th (local.get $cl))
        (local.set $cl (local.get $nl))
        (local.set $nl (local.get $th))
        (local.set $cc (local.get $nc))
        (br_if $done (i32.ge_u (local.get $pos) (local.get $tn)))
        (local.set $pos (i32.add (local.get $pos) (i32.const 1)))
        (br $step)))
    (global.set $top (local.get $save))
    (if (i32.eqz (local.get $matched)) (then (return (i64.const -1))))
    (local.set $s (i32.load (i32.add (local.get $best) (i32.shl (local.get $g) (i32.const 3)))))
    (local.set $e (i32.load offset=4 (i32.add (local.get $best) (i32.shl (local.get $g) (i32.const 3)))))
    (if (i32.or (i32.lt_s (local.get $s) (i32.const 0)) (i32.lt_s (local.get $e) (local.get $s)))
      (then (return (i64.const -1))))
    (call $pack (i32.add (global.get $vm_tp) (local.get $s)) (i32.sub (local.get $e) (local.get $s))))
