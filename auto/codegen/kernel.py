"""The generated part of an artifact: ``$eval``, specialized to one model.

``$eval`` featurizes the field's string (the n-gram loops unrolled per ``n`` with their FNV-1a
start states folded in; four start offsets hashed at once in i32x4 lanes), computes
``x = count / norm`` for each touched bucket, accumulates the dot products of every touched
bucket against its contiguous block of ``H`` f32 weights in f64 (two rows per f64x2 lane pair,
a group of rows per pass so the accumulators stay in registers), applies the heads and writes
the answer object. Every row sums its terms in first-touch order, exactly as
:meth:`auto.models.specialist.train.CompiledModel.scores` does, so results are bit-identical.
"""

from __future__ import annotations

import numpy as np

from auto.models.specialist.features import FNV_OFFSET_BASIS, FNV_PRIME, WORD_TAG

from .layout import GROUP, TABLE, Layout
from .wat import f64_text, i32_const


def count_ngram(L: Layout, b_expr: str, weight: int = 1) -> list[str]:
    """Count one n-gram whose bucket byte offset (bucket * 4) is ``b_expr``; it adds ``weight``."""
    if weight == 1:
        # sum of squared counts, kept exactly: (c + 1)^2 - c^2 = 2c + 1
        dsq = "(i32.add (i32.shl (local.get $c) (i32.const 1)) (i32.const 1))"
    else:
        # (c + w)^2 - c^2 = 2wc + w^2
        dsq = f"(i32.add (i32.mul (local.get $c) (i32.const {2 * weight})) (i32.const {weight * weight}))"
    return [
        f"(local.set $b {b_expr})",
        f"(local.set $c (i32.load offset={L.counts} (local.get $b)))",
        # branch-free first-touch bookkeeping: always write the slot, advance on a new bucket
        f"(i32.store offset={L.touched} (i32.shl (local.get $nt) (i32.const 2)) (local.get $b))",
        "(local.set $nt (i32.add (local.get $nt) (i32.eqz (local.get $c))))",
        f"(i32.store offset={L.counts} (local.get $b) (i32.add (local.get $c) (i32.const {weight})))",
        f"(local.set $sq (i64.add (local.get $sq) (i64.extend_i32_u {dsq})))"]


def word_loop(spec, L: Layout) -> list[str]:
    """Word n-gram hashing and counting over the framed text at $buf (length $len), after the byte
    n-grams (:func:`auto.models.specialist.features.word_sequence`): a word byte is an ASCII digit,
    an ASCII lower-case letter or a byte >= 0x80; the framed text ends with 0x03, so every word ends
    inside it."""
    if not spec.word_max:
        return []
    mask4 = (spec.buckets - 1) << 2
    P = i32_const(FNV_PRIME)
    h0 = i32_const(((FNV_OFFSET_BASIS ^ WORD_TAG) * FNV_PRIME) & 0xFFFFFFFF)
    w = spec.word_weight

    def bucket(h: str) -> str:
        return f"(i32.and (i32.shl {h} (i32.const 2)) (i32.const {mask4}))"

    end = count_ngram(L, bucket("(local.get $hw)"), w)
    if spec.word_max >= 2:
        pair = f"(i32.mul (i32.xor (i32.mul (local.get $hp) (i32.const {P})) (local.get $hw)) (i32.const {P}))"
        end += [f"(if (local.get $hasp) (then {' '.join(count_ngram(L, bucket(pair), w))}))"]
    end += ["(local.set $hp (local.get $hw))", "(local.set $hasp (i32.const 1))", "(local.set $inw (i32.const 0))"]
    isw = ("(i32.or (i32.or (i32.lt_u (i32.sub (local.get $by) (i32.const 48)) (i32.const 10)) "
           "(i32.lt_u (i32.sub (local.get $by) (i32.const 97)) (i32.const 26))) "
           "(i32.ge_u (local.get $by) (i32.const 128)))")
    return [
        "(local.set $i (local.get $buf))",
        "(local.set $lim (i32.add (local.get $buf) (local.get $len)))",
        "(local.set $inw (i32.const 0))",
        "(local.set $hasp (i32.const 0))",
        "(block $wd (loop $wl",
        "  (br_if $wd (i32.ge_u (local.get $i) (local.get $lim)))",
        "  (local.set $by (i32.load8_u (local.get $i)))",
        f"  (if {isw}",
        f"    (then (if (i32.eqz (local.get $inw)) (then (local.set $hw (i32.const {h0})) (local.set $inw (i32.const 1))))",
        f"          (local.set $hw (i32.mul (i32.xor (local.get $hw) (local.get $by)) (i32.const {P}))))",
        "    (else (if (local.get $inw) (then",
        *("      " + x for x in end),
        "    ))))",
        "  (local.set $i (i32.add (local.get $i) (i32.const 1)))",
        "  (br $wl)))"]


def hash_loops(spec, L: Layout, simd: bool) -> list[str]:
    """n-gram hashing and counting over the framed text at $buf (length $len).

    n outer, start offset inner (the featurizer's order, which fixes the first-touch order). With
    SIMD, four consecutive start offsets are hashed at once in i32x4 lanes and counted in lane
    order, then a scalar loop takes the remaining offsets.
    """
    mask4 = (spec.buckets - 1) << 2
    P = i32_const(FNV_PRIME)
    out = []
    for n in range(spec.n_min, spec.n_max + 1):
        h0 = i32_const(((FNV_OFFSET_BASIS ^ n) * FNV_PRIME) & 0xFFFFFFFF)
        hs = [f"(local.set $h (i32.mul (i32.xor (i32.const {h0}) (i32.load8_u (local.get $i))) "
              f"(i32.const {P})))"]
        hs += [f"(local.set $h (i32.mul (i32.xor (local.get $h) (i32.load8_u offset={k} "
               f"(local.get $i))) (i32.const {P})))" for k in range(1, n)]
        scalar = hs + count_ngram(L, f"(i32.and (i32.shl (local.get $h) (i32.const 2)) (i32.const {mask4}))")
        vec = []
        if simd:
            def byte4(k: int) -> str:
                return ("(i32x4.extend_low_i16x8_u (i16x8.extend_low_i8x16_u "
                        f"(v128.load32_zero offset={k} (local.get $i))))")
            vec = [f"(local.set $hv (i32x4.mul (v128.xor (v128.const i32x4 {h0} {h0} {h0} {h0}) "
                   f"{byte4(0)}) (v128.const i32x4 {P} {P} {P} {P})))"]
            vec += [f"(local.set $hv (i32x4.mul (v128.xor (local.get $hv) {byte4(k)}) "
                    f"(v128.const i32x4 {P} {P} {P} {P})))" for k in range(1, n)]
            vec.append(f"(local.set $hv (v128.and (i32x4.shl (local.get $hv) (i32.const 2)) "
                       f"(v128.const i32x4 {mask4} {mask4} {mask4} {mask4})))")
            for lane in range(4):
                vec += count_ngram(L, f"(i32x4.extract_lane {lane} (local.get $hv))")
            vec = [
                f"(block $vd{n} (loop $v{n}",
                f"  (br_if $vd{n} (i32.gt_u (i32.add (local.get $i) (i32.const 3)) (local.get $lim)))",
                *("  " + x for x in vec),
                "  (local.set $i (i32.add (local.get $i) (i32.const 4)))",
                f"  (br $v{n})))"]
        out += [
            f"(if (i32.ge_u (local.get $len) (i32.const {n})) (then",
            "  (local.set $i (local.get $buf))",
            f"  (local.set $lim (i32.add (local.get $buf) (i32.sub (local.get $len) (i32.const {n}))))",
            *("  " + x for x in vec),
            f"  (block $sd{n} (loop $s{n}",
            f"    (br_if $sd{n} (i32.gt_u (local.get $i) (local.get $lim)))",
            *("    " + x for x in scalar),
            "    (local.set $i (i32.add (local.get $i) (i32.const 1)))",
            f"    (br $s{n})))))"]
    return out


def eval_locals(H2: int, simd: bool) -> list[str]:
    """The ``local`` declarations of ``$eval``: the scalars, one f64 accumulator per padded row
    (``H2`` of them) and, with SIMD, one f64x2 register per pair of rows."""
    loc = ["(local $buf i32) (local $len i32) (local $i i32) (local $lim i32) (local $h i32)",
           "(local $b i32) (local $c i32) (local $t i32) (local $tend i32) (local $w i32)",
           "(local $sq i64) (local $norm f64) (local $x f64) (local $m f64) (local $nc f64) (local $u f64) (local $sb i32)",
           "(local $arg i32) (local $best f64) (local $second f64) (local $nd i32) (local $f i32)",
           "(local $nt i32) (local $hw i32) (local $hp i32) (local $inw i32) (local $hasp i32) (local $by i32)"]
    loc.append(" ".join(f"(local $s{r} f64)" for r in range(H2)))
    if simd:
        loc.append("(local $xx v128) (local $hv v128) " + " ".join(f"(local $v{j} v128)" for j in range(H2 // 2)))
    return loc


def normalize_touched(L: Layout) -> list[str]:
    """After the counting loops: publish the touched list, take ``norm = sqrt(sum of squared
    counts)`` and store ``x_i = count_i / norm`` for every touched bucket, in first-touch order.
    Counts below ``TABLE`` read ``k / norm`` from a table computed once per call (the same IEEE
    division, so the same value); larger counts divide."""
    body = [
        # the touched list now matches the counts: publish it for the next call's $clear
        "(global.set $nt (local.get $nt))",
        "(global.set $dirty (i32.const 0))",
        "(local.set $tend (i32.shl (local.get $nt) (i32.const 2)))",
        "(local.set $norm (f64.sqrt (f64.convert_i64_u (local.get $sq))))"]
    body += [f"(f64.store offset={L.table + 8 * k} (i32.const 0) (f64.div (f64.const {k}) "
             "(local.get $norm)))" for k in range(1, TABLE)]
    xcalc = [
        f"  (local.set $c (i32.load offset={L.counts} (i32.load offset={L.touched} (local.get $t))))",
        f"  (f64.store offset={L.xs} (i32.shl (local.get $t) (i32.const 1))",
        f"    (if (result f64) (i32.lt_u (local.get $c) (i32.const {TABLE}))",
        f"      (then (f64.load offset={L.table} (i32.shl (local.get $c) (i32.const 3))))",
        "      (else (f64.div (f64.convert_i32_u (local.get $c)) (local.get $norm)))))",
        "  (local.set $t (i32.add (local.get $t) (i32.const 4)))"]
    return body + [
        "(local.set $t (i32.const 0))",
        "(block $xd (loop $xl",
        "  (br_if $xd (i32.ge_u (local.get $t) (local.get $tend)))",
        *xcalc,
        "  (br $xl)))"]


def dot_products(L: Layout, H: int, init: list[float], simd: bool) -> list[str]:
    """The ``H`` rows' dot products with the touched ``x``, starting from ``init`` (the
    intercepts, 0 for the prototypes and the padding), a group of rows at a time (the group's
    accumulators stay in registers; two rows per f64x2 lane pair with SIMD); each row still sums
    its terms in first-touch order. Leaves row ``r``'s score in ``$s<r>``."""
    H2 = L.H2
    body: list[str] = []
    lanes = 2 if simd else 1
    for g0 in range(0, H, GROUP * lanes):
        rows = range(g0, min(H2, g0 + GROUP * lanes))
        if simd:
            regs = [(f"$v{r // 2}", r) for r in rows[::2]]
            body += [f"(local.set {v} (v128.const f64x2 {f64_text(init[r])} {f64_text(init[r + 1])}))"
                     for v, r in regs]
            step = [f"  (local.set $xx (v128.load64_splat offset={L.xs} "
                    "(i32.shl (local.get $t) (i32.const 1))))"]
            step += [f"  (local.set {v} (f64x2.add (local.get {v}) (f64x2.mul (f64x2.promote_low_f32x4 "
                     f"(v128.load64_zero offset={L.weights + 4 * r} (local.get $w))) (local.get $xx))))"
                     for v, r in regs]
            done = [f"(local.set $s{r} (f64x2.extract_lane {r % 2} (local.get $v{r // 2})))"
                    for r in rows if r < H]
        else:
            body += [f"(local.set $s{r} (f64.const {f64_text(init[r])}))" for r in rows]
            step = [f"  (local.set $x (f64.load offset={L.xs} (i32.shl (local.get $t) (i32.const 1))))"]
            step += [f"  (local.set $s{r} (f64.add (local.get $s{r}) (f64.mul (f64.promote_f32 "
                     f"(f32.load offset={L.weights + 4 * r} (local.get $w))) (local.get $x))))"
                     for r in rows]
            done = []
        body += [
            "(local.set $t (i32.const 0))",
            f"(block $ad{g0} (loop $a{g0}",
            f"  (br_if $ad{g0} (i32.ge_u (local.get $t) (local.get $tend)))",
            f"  (local.set $w (i32.mul (i32.load offset={L.touched} (local.get $t)) (i32.const {H2})))",
            *step,
            "  (local.set $t (i32.add (local.get $t) (i32.const 4)))",
            f"  (br $a{g0})))",
            *done]
    return body


def novelty_head(model, R: int, H: int) -> list[str]:
    """``$nc = 1 - max(prototype scores)`` (rows ``R .. H-1``)."""
    body = [f"(local.set $best (local.get $s{R}))"]
    for k in range(R + 1, H):
        body.append(f"(if (f64.gt (local.get $s{k}) (local.get $best)) "
                    f"(then (local.set $best (local.get $s{k}))))")
    body.append("(local.set $nc (f64.sub (f64.const 1) (local.get $best)))")
    return body


def long_input_head(model) -> list[str]:
    """``$nc`` = the largest score (:meth:`auto.models.specialist.train.CompiledModel.top_score`)
    for a text longer than every training text (``model.max_bytes``); after the unexplained mass."""
    if model.max_bytes is None:
        return []
    return [f"(if (i32.gt_u (local.get $len) (i32.const {int(model.max_bytes)})) "
            f"(then (local.set $nc (f64.const {f64_text(model.top_score)}))))"]


def classification_head(model, L: Layout, R: int) -> list[str]:
    """The class index ``$arg`` and its margin ``$m``: a tree walk (leaf class and value), the
    sign of the one score of a binary linear model, or the top-2 gap over ``R`` rows."""
    if model.kind == "tree":
        T = L.tree
        return [
            "(local.set $nd (i32.const 0))",
            "(block $leaf (loop $walk",
            f"  (local.set $f (i32.load offset={T} (local.get $nd)))",
            "  (br_if $leaf (i32.lt_s (local.get $f) (i32.const 0)))",
            f"  (local.set $c (i32.load offset={L.counts} (i32.shl (local.get $f) (i32.const 2))))",
            "  (local.set $x (f64.const 0))",
            "  (if (local.get $c) (then (local.set $x (f64.div (f64.convert_i32_u (local.get $c)) "
            "(local.get $norm)))))",
            f"  (local.set $nd (select (i32.load offset={T + 4} (local.get $nd)) "
            f"(i32.load offset={T + 8} (local.get $nd))",
            "    (f64.le (f64.promote_f32 (f32.demote_f64 (local.get $x))) "
            f"(f64.load offset={T + 16} (local.get $nd)))))",
            "  (br $walk)))",
            f"(local.set $arg (i32.load offset={T + 4} (local.get $nd)))",
            f"(local.set $m (f64.load offset={T + 16} (local.get $nd)))"]
    if R == 1:
        return ["(local.set $arg (f64.gt (local.get $s0) (f64.const 0)))",
                "(local.set $m (f64.abs (local.get $s0)))"]
    body = ["(local.set $best (local.get $s0))",
            "(local.set $second (f64.const -inf))"]
    for r in range(1, R):
        body.append(
            f"(if (f64.gt (local.get $s{r}) (local.get $best)) (then "
            f"(local.set $second (local.get $best)) (local.set $best (local.get $s{r})) "
            f"(local.set $arg (i32.const {r}))) (else (if (f64.gt (local.get $s{r}) "
            f"(local.get $second)) (then (local.set $second (local.get $s{r}))))))")
    body.append("(local.set $m (f64.sub (local.get $best) (local.get $second)))")
    return body


def unexplained_head(L: Layout) -> list[str]:
    """``$nc += u``, the unexplained mass of the answer's class ``$arg``: the sum of ``x_i * x_i``
    (f64, first-touch order) over the touched buckets whose bit in the class's support bitmap is
    clear (:func:`auto.models.specialist.train.unexplained_mass`). Nothing without a bitmap."""
    if L.support is None:
        return []
    bit = ("(i32.and (i32.load8_u (i32.add (local.get $sb) (i32.shr_u (local.get $b) (i32.const 3)))) "
           "(i32.shl (i32.const 1) (i32.and (local.get $b) (i32.const 7))))")
    return [
        "(local.set $u (f64.const 0))",
        f"(local.set $sb (i32.add (i32.const {L.support}) (i32.mul (local.get $arg) (i32.const {L.support_row}))))",
        "(local.set $t (i32.const 0))",
        "(block $ud (loop $ul",
        "  (br_if $ud (i32.ge_u (local.get $t) (local.get $tend)))",
        f"  (local.set $b (i32.shr_u (i32.load offset={L.touched} (local.get $t)) (i32.const 2)))",
        f"  (if (i32.eqz {bit}) (then",
        f"    (local.set $x (f64.load offset={L.xs} (i32.shl (local.get $t) (i32.const 1))))",
        "    (local.set $u (f64.add (local.get $u) (f64.mul (local.get $x) (local.get $x))))))",
        "  (local.set $t (i32.add (local.get $t) (i32.const 4)))",
        "  (br $ul)))",
        "(local.set $nc (f64.add (local.get $nc) (local.get $u)))"]


def write_answer(L: Layout) -> list[str]:
    """Write ``{"answer": <class $arg>, "margin": $m, "nonconformity": $nc}`` at ``$o`` from the
    per-class answer prefixes and the fixed-point writer; leaves the end of what it wrote on the stack."""
    return [
        "(local.set $t (i32.shl (local.get $arg) (i32.const 3)))",
        f"(local.set $o (call $copy (local.get $o) (i32.load offset={L.clstab} (local.get $t)) "
        f"(i32.load offset={L.clstab + 4} (local.get $t))))",
        "(local.set $o (call $fixed (local.get $o) (local.get $m)))",
        f"(local.set $o (call $copy (local.get $o) (i32.const {L.nc[0]}) (i32.const {L.nc[1]})))",
        "(local.set $o (call $fixed (local.get $o) (local.get $nc)))",
        "(i32.store8 (local.get $o) (i32.const 125))",
        "(i32.add (local.get $o) (i32.const 1))"]


def eval_func(model, L: Layout, simd: bool, name: str = "$eval") -> str:
    """WAT text of ``$eval (param $o i32) (result i32)``: featurize the string at ``$sval``,
    score, write the answer object at ``$o``; returns the end of what it wrote. ``name`` renames
    the function (a memo-first artifact calls it ``$spec_eval`` behind its table lookup)."""
    spec = model.features
    R, K = model.n_rows, model.n_prototypes
    H, H2 = R + K, L.H2
    init = [float(v) for v in model.b.astype(np.float64)] + [0.0] * (H2 - R)
    body = ["(call $clear)",
            "(local.set $buf (global.get $scratch))",
            "(local.set $len (call $frame))"]
    body += hash_loops(spec, L, simd)
    body += word_loop(spec, L)
    body += normalize_touched(L)
    body += dot_products(L, H, init, simd)
    body += novelty_head(model, R, H)
    body += classification_head(model, L, R)
    body += unexplained_head(L)
    body += long_input_head(model)
    body += write_answer(L)
    return ("  ;; ---- generated: featurize, score, write one answer ----\n"
            f"  (func {name} (param $o i32) (result i32)\n    " + "\n    ".join(eval_locals(H2, simd)) + "\n    "
            + "\n    ".join(body) + ")\n")
