;; The SVD crossover's two heavy loops on the CPU, in WebAssembly with 128-bit SIMD (f64x2): the fast path of
;; src/backend/stacked-vectors.ts, whose plain TypeScript loops (gramReference, combineReference) are the
;; reference. Both sum in the reference's order, lane by lane, so the results are equal bit for bit.
;;   v_i[k] = data[bases[i] + k·stride]      i < n, k < length     (data: f32 at byte 0 of the memory)
;;   gram:     sums[i, j] += Σ_k v_i[k]·v_j[k]       for j >= i (and some j < i: the caller reads j >= i only)
;;   combine:  data[bases[n + j] + k·stride] = f32(Σ_i mix[i, j]·v_i[k])   for j < keep
;; Memory (byte addresses passed in by the caller, 16-byte aligned): data f32; bases i32 [n (+ keep)];
;; block f64 [BLOCK, width] scratch; sums f64 [width, width] (zeroed by the caller); mix f64 [n, keepWidth];
;; result f64 [BLOCK, keepWidth] scratch. width = n rounded up to 4, keepWidth = keep rounded up to 4.
;; Geometry: k runs in blocks of BLOCK = 128 values, gathered (f32 -> f64) into `block`, one row per k. gram holds
;; a 2 × 4 tile of sums (rows i, i+1; columns j..j+3) in four f64x2 registers over a block's rows, then adds it to
;; `sums`: one tile per (i pair, j quad) with j quad >= i's quad. combine holds a 2 × 4 tile (rows k, k+1; outputs
;; j..j+3) over i. Columns of `block` past n and rows past a block's count are never written: what they hold only
;; reaches sums and results that are never read.

(module
  (memory (export "memory") 1)

  ;; block[k, i] = f64(v_i[k0 + k]) for i < n, k < count
  (func $gather (param $bases i32) (param $n i32) (param $k0 i32) (param $count i32) (param $stride i32) (param $block i32) (param $width i32)
    (local $i i32) (local $k i32) (local $src i32) (local $dst i32) (local $srcStep i32) (local $rowBytes i32)
    (local.set $srcStep (i32.shl (local.get $stride) (i32.const 2)))
    (local.set $rowBytes (i32.shl (local.get $width) (i32.const 3)))
    (block $done (loop $vectors
      (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
      (local.set $src (i32.shl
        (i32.add (i32.load (i32.add (local.get $bases) (i32.shl (local.get $i) (i32.const 2))))
                 (i32.mul (local.get $k0) (local.get $stride)))
        (i32.const 2)))
      (local.set $dst (i32.add (local.get $block) (i32.shl (local.get $i) (i32.const 3))))
      (local.set $k (local.get $count))
      (block $end (loop $values
        (br_if $end (i32.eqz (local.get $k)))
        (f64.store (local.get $dst) (f64.promote_f32 (f32.load (local.get $src))))
        (local.set $src (i32.add (local.get $src) (local.get $srcStep)))
        (local.set $dst (i32.add (local.get $dst) (local.get $rowBytes)))
        (local.set $k (i32.sub (local.get $k) (i32.const 1)))
        (br $values)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $vectors))))

  (func $blockCount (param $k0 i32) (param $length i32) (result i32)
    (select (i32.const 128) (i32.sub (local.get $length) (local.get $k0))
            (i32.gt_u (i32.sub (local.get $length) (local.get $k0)) (i32.const 128))))

  (func (export "gram") (param $bases i32) (param $n i32) (param $length i32) (param $stride i32) (param $block i32) (param $sums i32)
    (local $width i32) (local $rowBytes i32) (local $k0 i32) (local $count i32) (local $i i32) (local $j i32)
    (local $k i32) (local $row i32) (local $at i32)
    (local $s0 v128) (local $s1 v128) (local $s2 v128) (local $s3 v128)
    (local $x0 v128) (local $x1 v128) (local $y0 v128) (local $y1 v128)
    (local.set $width (i32.and (i32.add (local.get $n) (i32.const 3)) (i32.const -4)))
    (local.set $rowBytes (i32.shl (local.get $width) (i32.const 3)))
    (block $blocksDone (loop $blocks
      (br_if $blocksDone (i32.ge_u (local.get $k0) (local.get $length)))
      (local.set $count (call $blockCount (local.get $k0) (local.get $length)))
      (call $gather (local.get $bases) (local.get $n) (local.get $k0) (local.get $count) (local.get $stride) (local.get $block) (local.get $width))
      (local.set $i (i32.const 0))
      (block $iDone (loop $iPairs
        (br_if $iDone (i32.ge_u (local.get $i) (local.get $width)))
        (local.set $j (i32.and (local.get $i) (i32.const -4)))
        (block $jDone (loop $jQuads
          (br_if $jDone (i32.ge_u (local.get $j) (local.get $width)))
          (local.set $s0 (v128.const i64x2 0 0))
          (local.set $s1 (v128.const i64x2 0 0))
          (local.set $s2 (v128.const i64x2 0 0))
          (local.set $s3 (v128.const i64x2 0 0))
          (local.set $row (local.get $block))
          (local.set $k (local.get $count))
          (block $kDone (loop $ks
            (br_if $kDone (i32.eqz (local.get $k)))
            (local.set $x0 (v128.load64_splat (i32.add (local.get $row) (i32.shl (local.get $i) (i32.const 3)))))
            (local.set $x1 (v128.load64_splat offset=8 (i32.add (local.get $row) (i32.shl (local.get $i) (i32.const 3)))))
            (local.set $y0 (v128.load (i32.add (local.get $row) (i32.shl (local.get $j) (i32.const 3)))))
            (local.set $y1 (v128.load offset=16 (i32.add (local.get $row) (i32.shl (local.get $j) (i32.const 3)))))
            (local.set $s0 (f64x2.add (local.get $s0) (f64x2.mul (local.get $x0) (local.get $y0))))
            (local.set $s1 (f64x2.add (local.get $s1) (f64x2.mul (local.get $x0) (local.get $y1))))
            (local.set $s2 (f64x2.add (local.get $s2) (f64x2.mul (local.get $x1) (local.get $y0))))
            (local.set $s3 (f64x2.add (local.get $s3) (f64x2.mul (local.get $x1) (local.get $y1))))
            (local.set $row (i32.add (local.get $row) (local.get $rowBytes)))
            (local.set $k (i32.sub (local.get $k) (i32.const 1)))
            (br $ks)))
          ;; sums[i, j..j+3] += s0, s1; sums[i+1, j..j+3] += s2, s3
          (local.set $at (i32.add (local.get $sums) (i32.shl (i32.add (i32.mul (local.get $i) (local.get $width)) (local.get $j)) (i32.const 3))))
          (v128.store (local.get $at) (f64x2.add (v128.load (local.get $at)) (local.get $s0)))
          (v128.store offset=16 (local.get $at) (f64x2.add (v128.load offset=16 (local.get $at)) (local.get $s1)))
          (local.set $at (i32.add (local.get $at) (local.get $rowBytes)))
          (v128.store (local.get $at) (f64x2.add (v128.load (local.get $at)) (local.get $s2)))
          (v128.store offset=16 (local.get $at) (f64x2.add (v128.load offset=16 (local.get $at)) (local.get $s3)))
          (local.set $j (i32.add (local.get $j) (i32.const 4)))
          (br $jQuads)))
        (local.set $i (i32.add (local.get $i) (i32.const 2)))
        (br $iPairs)))
      (local.set $k0 (i32.add (local.get $k0) (i32.const 128)))
      (br $blocks))))

  (func (export "combine") (param $bases i32) (param $n i32) (param $keep i32) (param $length i32) (param $stride i32)
        (param $mix i32) (param $block i32) (param $result i32)
    (local $width i32) (local $keepWidth i32) (local $rowBytes i32) (local $mixRowBytes i32) (local $k0 i32)
    (local $count i32) (local $k i32) (local $j i32) (local $i i32) (local $row0 i32) (local $row1 i32) (local $m i32)
    (local $at i32) (local $dst i32) (local $dstStep i32)
    (local $s0 v128) (local $s1 v128) (local $s2 v128) (local $s3 v128)
    (local $x0 v128) (local $x1 v128) (local $m0 v128) (local $m1 v128)
    (local.set $width (i32.and (i32.add (local.get $n) (i32.const 3)) (i32.const -4)))
    (local.set $keepWidth (i32.and (i32.add (local.get $keep) (i32.const 3)) (i32.const -4)))
    (local.set $rowBytes (i32.shl (local.get $width) (i32.const 3)))
    (local.set $mixRowBytes (i32.shl (local.get $keepWidth) (i32.const 3)))
    (local.set $dstStep (i32.shl (local.get $stride) (i32.const 2)))
    (block $blocksDone (loop $blocks
      (br_if $blocksDone (i32.ge_u (local.get $k0) (local.get $length)))
      (local.set $count (call $blockCount (local.get $k0) (local.get $length)))
      (call $gather (local.get $bases) (local.get $n) (local.get $k0) (local.get $count) (local.get $stride) (local.get $block) (local.get $width))
      ;; Two rows of k at a time: with an odd count the last pair reads a stale row whose results are never stored.
      (local.set $k (i32.const 0))
      (block $kDone (loop $kPairs
        (br_if $kDone (i32.ge_u (local.get $k) (local.get $count)))
        (local.set $row0 (i32.add (local.get $block) (i32.mul (local.get $k) (local.get $rowBytes))))
        (local.set $row1 (i32.add (local.get $row0) (local.get $rowBytes)))
        (local.set $j (i32.const 0))
        (block $jDone (loop $jQuads
          (br_if $jDone (i32.ge_u (local.get $j) (local.get $keepWidth)))
          (local.set $s0 (v128.const i64x2 0 0))
          (local.set $s1 (v128.const i64x2 0 0))
          (local.set $s2 (v128.const i64x2 0 0))
          (local.set $s3 (v128.const i64x2 0 0))
          (local.set $m (i32.add (local.get $mix) (i32.shl (local.get $j) (i32.const 3))))
          (local.set $i (i32.const 0))
          (block $iDone (loop $is
            (br_if $iDone (i32.ge_u (local.get $i) (local.get $n)))
            (local.set $x0 (v128.load64_splat (i32.add (local.get $row0) (i32.shl (local.get $i) (i32.const 3)))))
            (local.set $x1 (v128.load64_splat (i32.add (local.get $row1) (i32.shl (local.get $i) (i32.const 3)))))
            (local.set $m0 (v128.load (local.get $m)))
            (local.set $m1 (v128.load offset=16 (local.get $m)))
            (local.set $s0 (f64x2.add (local.get $s0) (f64x2.mul (local.get $m0) (local.get $x0))))
            (local.set $s1 (f64x2.add (local.get $s1) (f64x2.mul (local.get $m1) (local.get $x0))))
            (local.set $s2 (f64x2.add (local.get $s2) (f64x2.mul (local.get $m0) (local.get $x1))))
            (local.set $s3 (f64x2.add (local.get $s3) (f64x2.mul (local.get $m1) (local.get $x1))))
            (local.set $m (i32.add (local.get $m) (local.get $mixRowBytes)))
            (local.set $i (i32.add (local.get $i) (i32.const 1)))
            (br $is)))
          ;; result[k, j..j+3] = s0, s1; result[k+1, j..j+3] = s2, s3
          (local.set $at (i32.add (local.get $result) (i32.shl (i32.add (i32.mul (local.get $k) (local.get $keepWidth)) (local.get $j)) (i32.const 3))))
          (v128.store (local.get $at) (local.get $s0))
          (v128.store offset=16 (local.get $at) (local.get $s1))
          (local.set $at (i32.add (local.get $at) (local.get $mixRowBytes)))
          (v128.store (local.get $at) (local.get $s2))
          (v128.store offset=16 (local.get $at) (local.get $s3))
          (local.set $j (i32.add (local.get $j) (i32.const 4)))
          (br $jQuads)))
        (local.set $k (i32.add (local.get $k) (i32.const 2)))
        (br $kPairs)))
      ;; out_j[k0 + k] = f32(result[k, j]) for j < keep, k < count
      (local.set $j (i32.const 0))
      (block $outDone (loop $outputs
        (br_if $outDone (i32.ge_u (local.get $j) (local.get $keep)))
        (local.set $dst (i32.shl
          (i32.add (i32.load (i32.add (local.get $bases) (i32.shl (i32.add (local.get $n) (local.get $j)) (i32.const 2))))
                   (i32.mul (local.get $k0) (local.get $stride)))
          (i32.const 2)))
        (local.set $at (i32.add (local.get $result) (i32.shl (local.get $j) (i32.const 3))))
        (local.set $k (local.get $count))
        (block $end (loop $values
          (br_if $end (i32.eqz (local.get $k)))
          (f32.store (local.get $dst) (f32.demote_f64 (f64.load (local.get $at))))
          (local.set $dst (i32.add (local.get $dst) (local.get $dstStep)))
          (local.set $at (i32.add (local.get $at) (local.get $mixRowBytes)))
          (local.set $k (i32.sub (local.get $k) (i32.const 1)))
          (br $values)))
        (local.set $j (i32.add (local.get $j) (i32.const 1)))
        (br $outputs)))
      (local.set $k0 (i32.add (local.get $k0) (i32.const 128)))
      (br $blocks)))))
