;; The CPU backend's dense products in WebAssembly with 128-bit SIMD (f64x2): the fast path of
;; src/backend/cpu-dense.ts and cpu-lora.ts, whose plain TypeScript loops are the reference. Each output sums its
;; own products in the reference's order (k, or n, ascending, from +0), one output per f64 lane, and is scaled and
;; added as the reference does, so the results are equal bit for bit.
;;   matmul:          v[t, n] = (Σ_k x[t, k]·w[n, k] + bias[n])·scale     x̂·Wᵀ (a linear layer), LoRA shrink/expand
;;   matmulBackward:  v[t, k] = (Σ_n g[t, n]·w[n, k])·scale               dy·W (its input gradient), outer products
;;   out = f32(v), or f32(out + v) when accumulating (the LoRA delta onto y, the LoRA gradient onto dx)
;; Memory: imported and shared (src/backend/cpu-arena.ts), so the weights live in it and are read in place. Byte
;; addresses come from the caller: x and g in f64, w in f32 rows of K, bias in f32 padded with zeros to nPad = N
;; rounded up to 4; out in f32 rows of nPad (matmul) or kPad = K rounded up to 8 (matmulBackward). The padding is
;; computed and never read back: matmul reads rows past N as row N - 1, and matmulBackward reads up to 7 values
;; past a row's end, so every block in the arena ends with 32 bytes of slack.
;; Geometry: matmul holds a 4-row tile (rows n..n+3 as two f64x2 pairs) for one token over k, four k at a time:
;; the rows' four f32 are interleaved pairwise (unpcklps/unpckhps) and promoted, x[t, k] is splat; the rows stay
;; in L1 while the tokens pass. matmulBackward holds 8 columns (k..k+7, four f64x2) for one token over n.

(module
  (import "env" "memory" (memory 1 65536 shared))

  ;; (f64(a[at]), f64(b[at]))
  (func $pairAt (param $a i32) (param $b i32) (result v128)
    (f64x2.replace_lane 1 (f64x2.splat (f64.promote_f32 (f32.load (local.get $a))))
                          (f64.promote_f32 (f32.load (local.get $b)))))

  ;; out[t, n] = f32(Σ_k x[t, k]·w[n, k] + bias[n]) · scale, or f32(out[t, n] + (Σ + bias[n]) · scale) when accumulating
  ;; out[0..3] = f32(v01, v23), or f32(out + v) when accumulating (no "+ 0" otherwise: it would turn -0 into +0)
  (func $store4 (param $out i32) (param $v01 v128) (param $v23 v128) (param $accumulate i32)
    (if (local.get $accumulate) (then
      (local.set $v01 (f64x2.add (f64x2.promote_low_f32x4 (v128.load64_zero (local.get $out))) (local.get $v01)))
      (local.set $v23 (f64x2.add (f64x2.promote_low_f32x4 (v128.load64_zero offset=8 (local.get $out))) (local.get $v23)))))
    (v128.store (local.get $out) (i8x16.shuffle 0 1 2 3 4 5 6 7 16 17 18 19 20 21 22 23
      (f32x4.demote_f64x2_zero (local.get $v01)) (f32x4.demote_f64x2_zero (local.get $v23)))))

  (func (export "matmul") (param $x i32) (param $T i32) (param $K i32) (param $w i32) (param $N i32) (param $bias i32) (param $out i32)
                          (param $accumulate i32) (param $scale f64)
    (local $scales v128) (local $at i32)
    (local $n i32) (local $t i32) (local $k i32) (local $rowBytes i32) (local $last i32) (local $nPad i32)
    (local $r0 i32) (local $r1 i32) (local $r2 i32) (local $r3 i32) (local $xp i32) (local $kb i32) (local $k4 i32)
    (local $b01 v128) (local $b23 v128) (local $acc01 v128) (local $acc23 v128) (local $xs v128)
    (local $lo01 v128) (local $hi01 v128) (local $lo23 v128) (local $hi23 v128)
    (local $a0 v128) (local $a1 v128) (local $a2 v128) (local $a3 v128)
    (local.set $scales (f64x2.splat (local.get $scale)))
    (local.set $rowBytes (i32.shl (local.get $K) (i32.const 2)))
    (local.set $last (i32.sub (local.get $N) (i32.const 1)))
    (local.set $nPad (i32.and (i32.add (local.get $N) (i32.const 3)) (i32.const -4)))
    (local.set $k4 (i32.and (local.get $K) (i32.const -4)))
    (block $rowsDone (loop $rows
      (br_if $rowsDone (i32.ge_u (local.get $n) (local.get $N)))
      ;; rows past N are read as row N - 1: their sums land in the padding
      (local.set $r0 (i32.add (local.get $w) (i32.mul (local.get $n) (local.get $rowBytes))))
      (local.set $r1 (i32.add (local.get $w) (i32.mul
        (select (i32.add (local.get $n) (i32.const 1)) (local.get $last) (i32.lt_u (i32.add (local.get $n) (i32.const 1)) (local.get $N)))
        (local.get $rowBytes))))
      (local.set $r2 (i32.add (local.get $w) (i32.mul
        (select (i32.add (local.get $n) (i32.const 2)) (local.get $last) (i32.lt_u (i32.add (local.get $n) (i32.const 2)) (local.get $N)))
        (local.get $rowBytes))))
      (local.set $r3 (i32.add (local.get $w) (i32.mul
        (select (i32.add (local.get $n) (i32.const 3)) (local.get $last) (i32.lt_u (i32.add (local.get $n) (i32.const 3)) (local.get $N)))
        (local.get $rowBytes))))
      (local.set $b01 (f64x2.promote_low_f32x4 (v128.load64_zero (i32.add (local.get $bias) (i32.shl (local.get $n) (i32.const 2))))))
      (local.set $b23 (f64x2.promote_low_f32x4 (v128.load64_zero offset=8 (i32.add (local.get $bias) (i32.shl (local.get $n) (i32.const 2))))))
      (local.set $t (i32.const 0))
      (block $tokensDone (loop $tokens
        (br_if $tokensDone (i32.ge_u (local.get $t) (local.get $T)))
        (local.set $acc01 (v128.const i64x2 0 0))
        (local.set $acc23 (v128.const i64x2 0 0))
        (local.set $xp (i32.add (local.get $x) (i32.shl (i32.mul (local.get $t) (local.get $K)) (i32.const 3))))
        (local.set $k (i32.const 0))
        (block $quadsDone (loop $quads
          (br_if $quadsDone (i32.ge_u (local.get $k) (local.get $k4)))
          (local.set $kb (i32.shl (local.get $k) (i32.const 2)))
          (local.set $a0 (v128.load (i32.add (local.get $r0) (local.get $kb))))
          (local.set $a1 (v128.load (i32.add (local.get $r1) (local.get $kb))))
          (local.set $a2 (v128.load (i32.add (local.get $r2) (local.get $kb))))
          (local.set $a3 (v128.load (i32.add (local.get $r3) (local.get $kb))))
          ;; lo = (a[k], b[k], a[k+1], b[k+1]), hi = (a[k+2], b[k+2], a[k+3], b[k+3])
          (local.set $lo01 (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $a0) (local.get $a1)))
          (local.set $hi01 (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $a0) (local.get $a1)))
          (local.set $lo23 (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $a2) (local.get $a3)))
          (local.set $hi23 (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $a2) (local.get $a3)))
          ;; k
          (local.set $xs (v128.load64_splat (local.get $xp)))
          (local.set $acc01 (f64x2.add (local.get $acc01) (f64x2.mul (f64x2.promote_low_f32x4 (local.get $lo01)) (local.get $xs))))
          (local.set $acc23 (f64x2.add (local.get $acc23) (f64x2.mul (f64x2.promote_low_f32x4 (local.get $lo23)) (local.get $xs))))
          ;; k + 1
          (local.set $xs (v128.load64_splat offset=8 (local.get $xp)))
          (local.set $acc01 (f64x2.add (local.get $acc01) (f64x2.mul
            (f64x2.promote_low_f32x4 (i8x16.shuffle 8 9 10 11 12 13 14 15 8 9 10 11 12 13 14 15 (local.get $lo01) (local.get $lo01))) (local.get $xs))))
          (local.set $acc23 (f64x2.add (local.get $acc23) (f64x2.mul
            (f64x2.promote_low_f32x4 (i8x16.shuffle 8 9 10 11 12 13 14 15 8 9 10 11 12 13 14 15 (local.get $lo23) (local.get $lo23))) (local.get $xs))))
          ;; k + 2
          (local.set $xs (v128.load64_splat offset=16 (local.get $xp)))
          (local.set $acc01 (f64x2.add (local.get $acc01) (f64x2.mul (f64x2.promote_low_f32x4 (local.get $hi01)) (local.get $xs))))
          (local.set $acc23 (f64x2.add (local.get $acc23) (f64x2.mul (f64x2.promote_low_f32x4 (local.get $hi23)) (local.get $xs))))
          ;; k + 3
          (local.set $xs (v128.load64_splat offset=24 (local.get $xp)))
          (local.set $acc01 (f64x2.add (local.get $acc01) (f64x2.mul
            (f64x2.promote_low_f32x4 (i8x16.shuffle 8 9 10 11 12 13 14 15 8 9 10 11 12 13 14 15 (local.get $hi01) (local.get $hi01))) (local.get $xs))))
          (local.set $acc23 (f64x2.add (local.get $acc23) (f64x2.mul
            (f64x2.promote_low_f32x4 (i8x16.shuffle 8 9 10 11 12 13 14 15 8 9 10 11 12 13 14 15 (local.get $hi23) (local.get $hi23))) (local.get $xs))))
          (local.set $xp (i32.add (local.get $xp) (i32.const 32)))
          (local.set $k (i32.add (local.get $k) (i32.const 4)))
          (br $quads)))
        ;; the last K mod 4 values, one at a time
        (block $restDone (loop $rest
          (br_if $restDone (i32.ge_u (local.get $k) (local.get $K)))
          (local.set $kb (i32.shl (local.get $k) (i32.const 2)))
          (local.set $xs (v128.load64_splat (local.get $xp)))
          (local.set $acc01 (f64x2.add (local.get $acc01) (f64x2.mul
            (call $pairAt (i32.add (local.get $r0) (local.get $kb)) (i32.add (local.get $r1) (local.get $kb))) (local.get $xs))))
          (local.set $acc23 (f64x2.add (local.get $acc23) (f64x2.mul
            (call $pairAt (i32.add (local.get $r2) (local.get $kb)) (i32.add (local.get $r3) (local.get $kb))) (local.get $xs))))
          (local.set $xp (i32.add (local.get $xp) (i32.const 8)))
          (local.set $k (i32.add (local.get $k) (i32.const 1)))
          (br $rest)))
        ;; out[t, n..n+3]
        (local.set $at (i32.add (local.get $out) (i32.shl (i32.add (i32.mul (local.get $t) (local.get $nPad)) (local.get $n)) (i32.const 2))))
        (local.set $acc01 (f64x2.mul (f64x2.add (local.get $acc01) (local.get $b01)) (local.get $scales)))
        (local.set $acc23 (f64x2.mul (f64x2.add (local.get $acc23) (local.get $b23)) (local.get $scales)))
        (call $store4 (local.get $at) (local.get $acc01) (local.get $acc23) (local.get $accumulate))
        (local.set $t (i32.add (local.get $t) (i32.const 1)))
        (br $tokens)))
      (local.set $n (i32.add (local.get $n) (i32.const 4)))
      (br $rows))))

  ;; out[t, k] = f32(Σ_n g[t, n]·w[n, k] · scale), or f32(out[t, k] + Σ · scale) when accumulating
  (func (export "matmulBackward") (param $g i32) (param $T i32) (param $N i32) (param $w i32) (param $K i32) (param $out i32)
                                  (param $accumulate i32) (param $scale f64)
    (local $scales v128)
    (local $k i32) (local $t i32) (local $n i32) (local $kPad i32) (local $rowBytes i32) (local $wp i32) (local $gp i32) (local $gEnd i32)
    (local $acc0 v128) (local $acc1 v128) (local $acc2 v128) (local $acc3 v128) (local $gs v128) (local $a v128) (local $b v128)
    (local.set $scales (f64x2.splat (local.get $scale)))
    (local.set $kPad (i32.and (i32.add (local.get $K) (i32.const 7)) (i32.const -8)))
    (local.set $rowBytes (i32.shl (local.get $K) (i32.const 2)))
    (block $columnsDone (loop $columns
      (br_if $columnsDone (i32.ge_u (local.get $k) (local.get $K)))
      (local.set $t (i32.const 0))
      (block $tokensDone (loop $tokens
        (br_if $tokensDone (i32.ge_u (local.get $t) (local.get $T)))
        (local.set $acc0 (v128.const i64x2 0 0))
        (local.set $acc1 (v128.const i64x2 0 0))
        (local.set $acc2 (v128.const i64x2 0 0))
        (local.set $acc3 (v128.const i64x2 0 0))
        (local.set $wp (i32.add (local.get $w) (i32.shl (local.get $k) (i32.const 2))))
        (local.set $gp (i32.add (local.get $g) (i32.shl (i32.mul (local.get $t) (local.get $N)) (i32.const 3))))
        (local.set $gEnd (i32.add (local.get $gp) (i32.shl (local.get $N) (i32.const 3))))
        (block $nDone (loop $ns
          (br_if $nDone (i32.ge_u (local.get $gp) (local.get $gEnd)))
          (local.set $gs (v128.load64_splat (local.get $gp)))
          (local.set $a (v128.load (local.get $wp)))
          (local.set $b (v128.load offset=16 (local.get $wp)))
          (local.set $acc0 (f64x2.add (local.get $acc0) (f64x2.mul (f64x2.promote_low_f32x4 (local.get $a)) (local.get $gs))))
          (local.set $acc1 (f64x2.add (local.get $acc1) (f64x2.mul
            (f64x2.promote_low_f32x4 (i8x16.shuffle 8 9 10 11 12 13 14 15 8 9 10 11 12 13 14 15 (local.get $a) (local.get $a))) (local.get $gs))))
          (local.set $acc2 (f64x2.add (local.get $acc2) (f64x2.mul (f64x2.promote_low_f32x4 (local.get $b)) (local.get $gs))))
          (local.set $acc3 (f64x2.add (local.get $acc3) (f64x2.mul
            (f64x2.promote_low_f32x4 (i8x16.shuffle 8 9 10 11 12 13 14 15 8 9 10 11 12 13 14 15 (local.get $b) (local.get $b))) (local.get $gs))))
          (local.set $gp (i32.add (local.get $gp) (i32.const 8)))
          (local.set $wp (i32.add (local.get $wp) (local.get $rowBytes)))
          (br $ns)))
        ;; out[t, k..k+7]
        (local.set $wp (i32.add (local.get $out) (i32.shl (i32.add (i32.mul (local.get $t) (local.get $kPad)) (local.get $k)) (i32.const 2))))
        (call $store4 (local.get $wp) (f64x2.mul (local.get $acc0) (local.get $scales)) (f64x2.mul (local.get $acc1) (local.get $scales)) (local.get $accumulate))
        (call $store4 (i32.add (local.get $wp) (i32.const 16))
          (f64x2.mul (local.get $acc2) (local.get $scales)) (f64x2.mul (local.get $acc3) (local.get $scales)) (local.get $accumulate))
        (local.set $t (i32.add (local.get $t) (i32.const 1)))
        (br $tokens)))
      (local.set $k (i32.add (local.get $k) (i32.const 8)))
      (br $columns))))
)
