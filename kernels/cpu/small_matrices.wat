;; Small dense float64 matrices, the SVD crossover's factorisations: the fast paths of the references in
;; src/evolution/linalg.ts, step for step (the same products in the same order, the same formulas), so the results
;; are equal bit for bit.
;;
;; orthogonalizeColumns: one-sided Jacobi (Hestenes) on the columns of w (orthogonalizeColumnsReference).
;;   w [cols, rows] f64 at `w` (column j at j·rows, the columns turned in place until every pair is orthogonal)
;;   norms f64 [cols] at `norms`: scratch, the squared norms carried through a sweep's rotations
;; Per sweep: norms recomputed; for each pair p < q in row order, γ = w_p·w_q (four interleaved sums: $dot); skipped when
;; γ = 0 or |γ| <= 1e-15·sqrt(α·β); else ζ = (β - α) / 2γ, t = sign(ζ) / (|ζ| + sqrt(1 + ζ²)) (sign(0) = 1),
;; c = 1 / sqrt(1 + t²), s = c·t, (w_p, w_q) <- (c·w_p - s·w_q, s·w_p + c·w_q) two rows at a time (f64x2),
;; α <- max(0, α - tγ), β <- max(0, β + tγ). Stops after a sweep without a rotation, or after `sweeps`.
;;
;; multiply: out [rows, cols] = x [rows, inner] · y [inner, cols] (multiplyReference), row-major at `out`, `x`, `y`
;; (out disjoint from both). Row i of out is a sum of the rows of y in k order, x[i, k]·y[k, :] two columns at a
;; time (f64x2), a row skipped where x[i, k] is zero.
;;
;; Memory: 16-byte aligned regions; any row lengths (odd tails are done one value at a time).

(module
  (memory (export "memory") 1)

  ;; Σ x_i·y_i in four interleaved sums (i mod 4: two f64x2 accumulators), added as (s0 + s2) + (s1 + s3), then
  ;; the last rows % 4 in order: four chains of dependent adds instead of one.
  (func $dot (param $x i32) (param $y i32) (param $rows i32) (result f64)
    (local $sum f64) (local $end i32) (local $quadsEnd i32) (local $low v128) (local $high v128)
    (local.set $end (i32.add (local.get $x) (i32.shl (local.get $rows) (i32.const 3))))
    (local.set $quadsEnd (i32.add (local.get $x) (i32.shl (i32.and (local.get $rows) (i32.const -4)) (i32.const 3))))
    (local.set $low (f64x2.splat (f64.const 0)))
    (local.set $high (f64x2.splat (f64.const 0)))
    (block $quadsDone (loop $quads
      (br_if $quadsDone (i32.ge_u (local.get $x) (local.get $quadsEnd)))
      (local.set $low (f64x2.add (local.get $low) (f64x2.mul (v128.load (local.get $x)) (v128.load (local.get $y)))))
      (local.set $high (f64x2.add (local.get $high) (f64x2.mul (v128.load offset=16 (local.get $x)) (v128.load offset=16 (local.get $y)))))
      (local.set $x (i32.add (local.get $x) (i32.const 32)))
      (local.set $y (i32.add (local.get $y) (i32.const 32)))
      (br $quads)))
    (local.set $low (f64x2.add (local.get $low) (local.get $high)))
    (local.set $sum (f64.add (f64x2.extract_lane 0 (local.get $low)) (f64x2.extract_lane 1 (local.get $low))))
    (block $done (loop $values
      (br_if $done (i32.ge_u (local.get $x) (local.get $end)))
      (local.set $sum (f64.add (local.get $sum) (f64.mul (f64.load (local.get $x)) (f64.load (local.get $y)))))
      (local.set $x (i32.add (local.get $x) (i32.const 8)))
      (local.set $y (i32.add (local.get $y) (i32.const 8)))
      (br $values)))
    (local.get $sum))

  (func $rotate (param $x i32) (param $y i32) (param $rows i32) (param $c f64) (param $s f64)
    (local $pairsEnd i32) (local $a v128) (local $b v128) (local $cc v128) (local $ss v128) (local $af f64) (local $bf f64)
    (local.set $cc (f64x2.splat (local.get $c)))
    (local.set $ss (f64x2.splat (local.get $s)))
    (local.set $pairsEnd (i32.add (local.get $x) (i32.shl (i32.and (local.get $rows) (i32.const -2)) (i32.const 3))))
    (block $done (loop $pairs
      (br_if $done (i32.ge_u (local.get $x) (local.get $pairsEnd)))
      (local.set $a (v128.load (local.get $x)))
      (local.set $b (v128.load (local.get $y)))
      (v128.store (local.get $x) (f64x2.sub (f64x2.mul (local.get $cc) (local.get $a)) (f64x2.mul (local.get $ss) (local.get $b))))
      (v128.store (local.get $y) (f64x2.add (f64x2.mul (local.get $ss) (local.get $a)) (f64x2.mul (local.get $cc) (local.get $b))))
      (local.set $x (i32.add (local.get $x) (i32.const 16)))
      (local.set $y (i32.add (local.get $y) (i32.const 16)))
      (br $pairs)))
    (if (i32.and (local.get $rows) (i32.const 1)) (then
      (local.set $af (f64.load (local.get $x)))
      (local.set $bf (f64.load (local.get $y)))
      (f64.store (local.get $x) (f64.sub (f64.mul (local.get $c) (local.get $af)) (f64.mul (local.get $s) (local.get $bf))))
      (f64.store (local.get $y) (f64.add (f64.mul (local.get $s) (local.get $af)) (f64.mul (local.get $c) (local.get $bf)))))))

  (func (export "orthogonalizeColumns") (param $w i32) (param $rows i32) (param $cols i32) (param $norms i32) (param $sweeps i32)
    (local $sweep i32) (local $rotated i32) (local $p i32) (local $q i32) (local $j i32) (local $columnBytes i32)
    (local $wp i32) (local $wq i32) (local $np i32) (local $nq i32)
    (local $alpha f64) (local $beta f64) (local $gamma f64) (local $zeta f64) (local $t f64) (local $c f64)
    (local.set $columnBytes (i32.shl (local.get $rows) (i32.const 3)))
    (block $converged (loop $sweeps
      (br_if $converged (i32.ge_u (local.get $sweep) (local.get $sweeps)))
      (local.set $j (i32.const 0))
      (block $normsDone (loop $columns
        (br_if $normsDone (i32.ge_u (local.get $j) (local.get $cols)))
        (local.set $wp (i32.add (local.get $w) (i32.mul (local.get $j) (local.get $columnBytes))))
        (f64.store (i32.add (local.get $norms) (i32.shl (local.get $j) (i32.const 3))) (call $dot (local.get $wp) (local.get $wp) (local.get $rows)))
        (local.set $j (i32.add (local.get $j) (i32.const 1)))
        (br $columns)))
      (local.set $rotated (i32.const 0))
      (local.set $p (i32.const 0))
      (block $pDone (loop $ps
        (br_if $pDone (i32.ge_s (local.get $p) (i32.sub (local.get $cols) (i32.const 1))))
        (local.set $q (i32.add (local.get $p) (i32.const 1)))
        (block $qDone (loop $qs
          (br_if $qDone (i32.ge_u (local.get $q) (local.get $cols)))
          (local.set $wp (i32.add (local.get $w) (i32.mul (local.get $p) (local.get $columnBytes))))
          (local.set $wq (i32.add (local.get $w) (i32.mul (local.get $q) (local.get $columnBytes))))
          (local.set $np (i32.add (local.get $norms) (i32.shl (local.get $p) (i32.const 3))))
          (local.set $nq (i32.add (local.get $norms) (i32.shl (local.get $q) (i32.const 3))))
          (local.set $gamma (call $dot (local.get $wp) (local.get $wq) (local.get $rows)))
          (local.set $alpha (f64.load (local.get $np)))
          (local.set $beta (f64.load (local.get $nq)))
          (if (i32.eqz (i32.or
                (f64.eq (local.get $gamma) (f64.const 0))
                (f64.le (f64.abs (local.get $gamma)) (f64.mul (f64.const 1e-15) (f64.sqrt (f64.mul (local.get $alpha) (local.get $beta)))))))
            (then
              (local.set $rotated (i32.const 1))
              (local.set $zeta (f64.div (f64.sub (local.get $beta) (local.get $alpha)) (f64.mul (f64.const 2) (local.get $gamma))))
              (local.set $t (f64.div
                (select (f64.const 1) (f64.copysign (f64.const 1) (local.get $zeta)) (f64.eq (local.get $zeta) (f64.const 0)))
                (f64.add (f64.abs (local.get $zeta)) (f64.sqrt (f64.add (f64.const 1) (f64.mul (local.get $zeta) (local.get $zeta)))))))
              (local.set $c (f64.div (f64.const 1) (f64.sqrt (f64.add (f64.const 1) (f64.mul (local.get $t) (local.get $t))))))
              (call $rotate (local.get $wp) (local.get $wq) (local.get $rows) (local.get $c) (f64.mul (local.get $c) (local.get $t)))
              (f64.store (local.get $np) (f64.max (f64.const 0) (f64.sub (local.get $alpha) (f64.mul (local.get $t) (local.get $gamma)))))
              (f64.store (local.get $nq) (f64.max (f64.const 0) (f64.add (local.get $beta) (f64.mul (local.get $t) (local.get $gamma)))))))
          (local.set $q (i32.add (local.get $q) (i32.const 1)))
          (br $qs)))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (br $ps)))
      (br_if $converged (i32.eqz (local.get $rotated)))
      (local.set $sweep (i32.add (local.get $sweep) (i32.const 1)))
      (br $sweeps))))

  (func (export "multiply") (param $out i32) (param $x i32) (param $y i32) (param $rows i32) (param $inner i32) (param $cols i32)
    (local $i i32) (local $k i32) (local $o i32) (local $oEnd i32) (local $pairsEnd i32) (local $yk i32) (local $xik f64) (local $splat v128)
    (local $rowBytes i32)
    (local.set $rowBytes (i32.shl (local.get $cols) (i32.const 3)))
    (memory.fill (local.get $out) (i32.const 0) (i32.mul (local.get $rows) (local.get $rowBytes)))
    (block $rowsDone (loop $rowsLoop
      (br_if $rowsDone (i32.ge_u (local.get $i) (local.get $rows)))
      (local.set $k (i32.const 0))
      (block $innerDone (loop $innerLoop
        (br_if $innerDone (i32.ge_u (local.get $k) (local.get $inner)))
        (local.set $xik (f64.load (i32.add (local.get $x) (i32.shl (i32.add (i32.mul (local.get $i) (local.get $inner)) (local.get $k)) (i32.const 3)))))
        (if (f64.ne (local.get $xik) (f64.const 0)) (then
          (local.set $splat (f64x2.splat (local.get $xik)))
          (local.set $o (i32.add (local.get $out) (i32.mul (local.get $i) (local.get $rowBytes))))
          (local.set $oEnd (i32.add (local.get $o) (local.get $rowBytes)))
          (local.set $pairsEnd (i32.add (local.get $o) (i32.shl (i32.and (local.get $cols) (i32.const -2)) (i32.const 3))))
          (local.set $yk (i32.add (local.get $y) (i32.mul (local.get $k) (local.get $rowBytes))))
          (block $pairsDone (loop $pairs
            (br_if $pairsDone (i32.ge_u (local.get $o) (local.get $pairsEnd)))
            (v128.store (local.get $o) (f64x2.add (v128.load (local.get $o)) (f64x2.mul (local.get $splat) (v128.load (local.get $yk)))))
            (local.set $o (i32.add (local.get $o) (i32.const 16)))
            (local.set $yk (i32.add (local.get $yk) (i32.const 16)))
            (br $pairs)))
          (if (i32.lt_u (local.get $o) (local.get $oEnd)) (then
            (f64.store (local.get $o) (f64.add (f64.load (local.get $o)) (f64.mul (local.get $xik) (f64.load (local.get $yk)))))))))
        (local.set $k (i32.add (local.get $k) (i32.const 1)))
        (br $innerLoop)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $rowsLoop)))))
