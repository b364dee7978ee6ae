;; The CPU backend's decode attention in WebAssembly with 128-bit SIMD (f64x2): the fast path of
;; src/backend/cpu-attention.ts, whose plain TypeScript loop (attentionReference) is the reference. One call is one
;; token: every query head h against positions 0..N-1 of the token's cache slot, through its kv head kh = h / group:
;;   s_j = (Σ_d q[h, d]·k[j, kh, d])·scale           d ascending from +0, one key per f64 lane (keys j, j+1)
;;   p_j = exp(s_j − max_j s_j),  total = Σ_j p_j      j ascending; exp is JavaScript's Math.exp (imported)
;;   out[h, d] = f32((Σ_j p_j·v[j, kh, d]) / total)   j ascending from +0, one column per f64 lane (8 at a time)
;; The same sums in the same order as the reference, so the results are equal bit for bit.
;; Memory: imported and shared (src/backend/cpu-arena.ts), where the KV cache lives. Byte addresses from the
;; caller: q in f64 [heads, hd]; k, v at position 0 of the slot, kv head 0, positions rowBytes apart; scores f64
;; scratch [N + 1]; out f32 [heads, hdPad], hdPad = hd rounded up to 8. The values loop reads up to 7 values past a
;; row's end (the arena's blocks end with 32 bytes of slack) into columns that are never read back.

(module
  (import "env" "memory" (memory 1 65536 shared))
  (import "env" "exp" (func $exp (param f64) (result f64)))

  (func (export "attention") (param $q i32) (param $heads i32) (param $group i32) (param $hd i32) (param $k i32) (param $v i32)
                             (param $N i32) (param $rowBytes i32) (param $scores i32) (param $out i32) (param $hdPad i32) (param $scale f64)
    (local $h i32) (local $kh i32) (local $qh i32) (local $qp i32) (local $j i32) (local $r0 i32) (local $r1 i32)
    (local $db i32) (local $hdb i32) (local $d4b i32) (local $d i32) (local $sp i32) (local $sEnd i32) (local $vp i32) (local $o i32)
    (local $max f64) (local $total f64) (local $e f64)
    (local $acc v128) (local $a v128) (local $b v128) (local $lo v128) (local $hi v128) (local $ps v128) (local $totals v128)
    (local $acc0 v128) (local $acc1 v128) (local $acc2 v128) (local $acc3 v128)
    (local.set $hdb (i32.shl (local.get $hd) (i32.const 2)))
    (local.set $d4b (i32.and (local.get $hdb) (i32.const -16)))
    (local.set $sEnd (i32.add (local.get $scores) (i32.shl (local.get $N) (i32.const 3))))
    (block $headsDone (loop $headLoop
      (br_if $headsDone (i32.ge_u (local.get $h) (local.get $heads)))
      (local.set $kh (i32.mul (i32.div_u (local.get $h) (local.get $group)) (local.get $hdb)))
      (local.set $qh (i32.add (local.get $q) (i32.shl (i32.mul (local.get $h) (local.get $hd)) (i32.const 3))))
      ;; scores, two keys at a time (an odd last key is paired with itself)
      (local.set $j (i32.const 0))
      (block $keysDone (loop $keys
        (br_if $keysDone (i32.ge_u (local.get $j) (local.get $N)))
        (local.set $r0 (i32.add (i32.add (local.get $k) (local.get $kh)) (i32.mul (local.get $j) (local.get $rowBytes))))
        (local.set $r1 (select (i32.add (local.get $r0) (local.get $rowBytes)) (local.get $r0)
                               (i32.lt_u (i32.add (local.get $j) (i32.const 1)) (local.get $N))))
        (local.set $acc (v128.const i64x2 0 0))
        (local.set $qp (local.get $qh))
        (local.set $db (i32.const 0))
        (block $quadsDone (loop $quads
          (br_if $quadsDone (i32.ge_u (local.get $db) (local.get $d4b)))
          (local.set $a (v128.load (i32.add (local.get $r0) (local.get $db))))
          (local.set $b (v128.load (i32.add (local.get $r1) (local.get $db))))
          (local.set $lo (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $a) (local.get $b)))
          (local.set $hi (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $a) (local.get $b)))
          (local.set $acc (f64x2.add (local.get $acc) (f64x2.mul (f64x2.promote_low_f32x4 (local.get $lo)) (v128.load64_splat (local.get $qp)))))
          (local.set $acc (f64x2.add (local.get $acc) (f64x2.mul
            (f64x2.promote_low_f32x4 (i8x16.shuffle 8 9 10 11 12 13 14 15 8 9 10 11 12 13 14 15 (local.get $lo) (local.get $lo)))
            (v128.load64_splat offset=8 (local.get $qp)))))
          (local.set $acc (f64x2.add (local.get $acc) (f64x2.mul (f64x2.promote_low_f32x4 (local.get $hi)) (v128.load64_splat offset=16 (local.get $qp)))))
          (local.set $acc (f64x2.add (local.get $acc) (f64x2.mul
            (f64x2.promote_low_f32x4 (i8x16.shuffle 8 9 10 11 12 13 14 15 8 9 10 11 12 13 14 15 (local.get $hi) (local.get $hi)))
            (v128.load64_splat offset=24 (local.get $qp)))))
          (local.set $qp (i32.add (local.get $qp) (i32.const 32)))
          (local.set $db (i32.add (local.get $db) (i32.const 16)))
          (br $quads)))
        (block $restDone (loop $rest
          (br_if $restDone (i32.ge_u (local.get $db) (local.get $hdb)))
          (local.set $acc (f64x2.add (local.get $acc) (f64x2.mul
            (f64x2.replace_lane 1 (f64x2.splat (f64.promote_f32 (f32.load (i32.add (local.get $r0) (local.get $db)))))
                                  (f64.promote_f32 (f32.load (i32.add (local.get $r1) (local.get $db)))))
            (v128.load64_splat (local.get $qp)))))
          (local.set $qp (i32.add (local.get $qp) (i32.const 8)))
          (local.set $db (i32.add (local.get $db) (i32.const 4)))
          (br $rest)))
        (v128.store (i32.add (local.get $scores) (i32.shl (local.get $j) (i32.const 3)))
          (f64x2.mul (local.get $acc) (f64x2.splat (local.get $scale))))
        (local.set $j (i32.add (local.get $j) (i32.const 2)))
        (br $keys)))
      ;; softmax weights: max as Math.max does it (NaN wins, +0 above -0), then exp and their sum in order
      (local.set $max (f64.const -inf))
      (local.set $sp (local.get $scores))
      (block $maxDone (loop $maxLoop
        (br_if $maxDone (i32.ge_u (local.get $sp) (local.get $sEnd)))
        (local.set $max (f64.max (local.get $max) (f64.load (local.get $sp))))
        (local.set $sp (i32.add (local.get $sp) (i32.const 8)))
        (br $maxLoop)))
      (local.set $total (f64.const 0))
      (local.set $sp (local.get $scores))
      (block $expDone (loop $expLoop
        (br_if $expDone (i32.ge_u (local.get $sp) (local.get $sEnd)))
        (local.set $e (call $exp (f64.sub (f64.load (local.get $sp)) (local.get $max))))
        (f64.store (local.get $sp) (local.get $e))
        (local.set $total (f64.add (local.get $total) (local.get $e)))
        (local.set $sp (i32.add (local.get $sp) (i32.const 8)))
        (br $expLoop)))
      ;; values, 8 columns at a time
      (local.set $totals (f64x2.splat (local.get $total)))
      (local.set $d (i32.const 0))
      (block $columnsDone (loop $columns
        (br_if $columnsDone (i32.ge_u (local.get $d) (local.get $hd)))
        (local.set $acc0 (v128.const i64x2 0 0))
        (local.set $acc1 (v128.const i64x2 0 0))
        (local.set $acc2 (v128.const i64x2 0 0))
        (local.set $acc3 (v128.const i64x2 0 0))
        (local.set $vp (i32.add (i32.add (local.get $v) (local.get $kh)) (i32.shl (local.get $d) (i32.const 2))))
        (local.set $sp (local.get $scores))
        (block $jDone (loop $js
          (br_if $jDone (i32.ge_u (local.get $sp) (local.get $sEnd)))
          (local.set $ps (v128.load64_splat (local.get $sp)))
          (local.set $a (v128.load (local.get $vp)))
          (local.set $b (v128.load offset=16 (local.get $vp)))
          (local.set $acc0 (f64x2.add (local.get $acc0) (f64x2.mul (local.get $ps) (f64x2.promote_low_f32x4 (local.get $a)))))
          (local.set $acc1 (f64x2.add (local.get $acc1) (f64x2.mul (local.get $ps)
            (f64x2.promote_low_f32x4 (i8x16.shuffle 8 9 10 11 12 13 14 15 8 9 10 11 12 13 14 15 (local.get $a) (local.get $a))))))
          (local.set $acc2 (f64x2.add (local.get $acc2) (f64x2.mul (local.get $ps) (f64x2.promote_low_f32x4 (local.get $b)))))
          (local.set $acc3 (f64x2.add (local.get $acc3) (f64x2.mul (local.get $ps)
            (f64x2.promote_low_f32x4 (i8x16.shuffle 8 9 10 11 12 13 14 15 8 9 10 11 12 13 14 15 (local.get $b) (local.get $b))))))
          (local.set $sp (i32.add (local.get $sp) (i32.const 8)))
          (local.set $vp (i32.add (local.get $vp) (local.get $rowBytes)))
          (br $js)))
        (local.set $o (i32.add (local.get $out) (i32.shl (i32.add (i32.mul (local.get $h) (local.get $hdPad)) (local.get $d)) (i32.const 2))))
        (v128.store (local.get $o) (i8x16.shuffle 0 1 2 3 4 5 6 7 16 17 18 19 20 21 22 23
          (f32x4.demote_f64x2_zero (f64x2.div (local.get $acc0) (local.get $totals)))
          (f32x4.demote_f64x2_zero (f64x2.div (local.get $acc1) (local.get $totals)))))
        (v128.store offset=16 (local.get $o) (i8x16.shuffle 0 1 2 3 4 5 6 7 16 17 18 19 20 21 22 23
          (f32x4.demote_f64x2_zero (f64x2.div (local.get $acc2) (local.get $totals)))
          (f32x4.demote_f64x2_zero (f64x2.div (local.get $acc3) (local.get $totals)))))
        (local.set $d (i32.add (local.get $d) (i32.const 8)))
        (br $columns)))
      (local.set $h (i32.add (local.get $h) (i32.const 1)))
      (br $headLoop))))
)
