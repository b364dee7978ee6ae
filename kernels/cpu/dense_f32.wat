;; The CPU backend's dense products with f32 sums (128-bit SIMD, f32x4), forward and backward: the fast paths of
;; src/backend/cpu-dense-f32.ts, whose plain loops matmulF32Reference and matmulBackwardF32Reference are the
;; references:
;;   forward   out[t, n] = f32(s + bias[n]),  s = +0, then for k ascending: s = f32(s + f32(x[t, k]·w[n, k]))
;;   backward  dx[t, k]  = s,                 s = +0, then for n ascending: s = f32(s + f32(dy[t, n]·w[n, k]))
;; Every product and every sum is rounded to f32 (f32x4.mul, then f32x4.add: IEEE, round to nearest even, the same
;; bits on every engine; never fused, never relaxed), each output in its own lane, in the reference's order: equal
;; bit for bit to it. s is never -0 (it starts at +0, and round to nearest gives +0 for an exact cancellation), so
;; adding a zero bias changes nothing and the kernels always add one (zeros where there is no bias).
;; llama.cpp sums this way (f32 lanes); dense.wat sums in f64 lanes, 2 a vector, to equal an f64 reference: these
;; take 4 a vector. Not in build.mjs's FUSED_KERNELS: a fused multiply-add rounds once where this rounds twice.
;; Each export computes the outputs of a range of rows (forward: w's rows n; backward: w's columns k), so the CPU
;; threads (src/backend/cpu-threads.ts) split those, every output summed as on one thread. Memory: imported and
;; shared (src/backend/cpu-arena.ts); byte addresses.
;;
;;   matmulBlocksF32    x [T, K] f32; w in row blocks (cpu-dense.ts rowBlocks: [⌈N/16⌉][K][16], block n/16's 16
;;                      rows' values of one k side by side, rows past N zero); bias and out rows padded to nPad = N
;;                      rounded up to 16: bias [nPad], out [T, nPad]. Tiles: a block's 16 rows (4 f32x4) by 2
;;                      tokens (8 sums, each row-block load shared by both tokens), the last token of an odd T alone.
;;   matmulF32          w row-major [N, K] f32; x staged transposed, xT [K][Tpad] (Tpad = T rounded up to 8, the
;;   matmulBackwardF32  extra tokens zero), so that one load reads x[t..t+3, k]; out transposed. Both run one tile
;;                      loop ($tilesF32) over "rows" r of R, each a sum of L steps j of w[r·rowBytes + j·stepBytes]
;;                      times xT[j][t]: forward R = N, L = K, a row's steps 4 bytes apart (w's rows); backward (xT =
;;                      dy transposed, [N][Tpad]) R = K, L = N, a row's steps K·4 bytes apart (w's columns). Bias
;;                      [R4], R4 = R rounded up to 4 (backward: zeros); outT [R4][Tpad]. Tiles: 4 rows by 8 tokens
;;                      (8 sums: w's value splat, two x vectors). Blocks of 64 tokens by 1,024 steps (backward
;;                      512, below), whose part of xT stays in L2 while the rows pass.
;;                      Rows past R are read as row R - 1: their sums land in the padding, never read back.

(module
  (import "env" "memory" (memory 1 65536 shared))

  ;; The 16 rows of a block (wp = its first k: [K][16] f32) against tokens x0, x1 (f32 [K]), k ascending:
  ;; (x0's rows 0-3, 4-7, 8-11, 12-15, then x1's)
  (func $block2 (param $wp i32) (param $x0 i32) (param $x1 i32) (param $K i32) (result v128 v128 v128 v128 v128 v128 v128 v128)
    (local $xEnd i32) (local $s v128) (local $u v128) (local $v v128)
    (local $a0 v128) (local $a1 v128) (local $a2 v128) (local $a3 v128) (local $b0 v128) (local $b1 v128) (local $b2 v128) (local $b3 v128)
    (local.set $xEnd (i32.add (local.get $x0) (i32.shl (local.get $K) (i32.const 2))))
    (block $done (loop $ks
      (br_if $done (i32.ge_u (local.get $x0) (local.get $xEnd)))
      (local.set $s (v128.load32_splat (local.get $x0)))
      (local.set $u (v128.load32_splat (local.get $x1)))
      (local.set $v (v128.load offset=0 (local.get $wp)))
      (local.set $a0 (f32x4.add (local.get $a0) (f32x4.mul (local.get $v) (local.get $s)))) (local.set $b0 (f32x4.add (local.get $b0) (f32x4.mul (local.get $v) (local.get $u))))
      (local.set $v (v128.load offset=16 (local.get $wp)))
      (local.set $a1 (f32x4.add (local.get $a1) (f32x4.mul (local.get $v) (local.get $s)))) (local.set $b1 (f32x4.add (local.get $b1) (f32x4.mul (local.get $v) (local.get $u))))
      (local.set $v (v128.load offset=32 (local.get $wp)))
      (local.set $a2 (f32x4.add (local.get $a2) (f32x4.mul (local.get $v) (local.get $s)))) (local.set $b2 (f32x4.add (local.get $b2) (f32x4.mul (local.get $v) (local.get $u))))
      (local.set $v (v128.load offset=48 (local.get $wp)))
      (local.set $a3 (f32x4.add (local.get $a3) (f32x4.mul (local.get $v) (local.get $s)))) (local.set $b3 (f32x4.add (local.get $b3) (f32x4.mul (local.get $v) (local.get $u))))
      (local.set $x0 (i32.add (local.get $x0) (i32.const 4)))
      (local.set $x1 (i32.add (local.get $x1) (i32.const 4)))
      (local.set $wp (i32.add (local.get $wp) (i32.const 64)))
      (br $ks)))
    (local.get $a0) (local.get $a1) (local.get $a2) (local.get $a3) (local.get $b0) (local.get $b1) (local.get $b2) (local.get $b3))

  ;; The 16 rows of a block against token x0 alone, k ascending: (rows 0-3, 4-7, 8-11, 12-15)
  (func $block1 (param $wp i32) (param $x0 i32) (param $K i32) (result v128 v128 v128 v128)
    (local $xEnd i32) (local $s v128) (local $a0 v128) (local $a1 v128) (local $a2 v128) (local $a3 v128)
    (local.set $xEnd (i32.add (local.get $x0) (i32.shl (local.get $K) (i32.const 2))))
    (block $done (loop $ks
      (br_if $done (i32.ge_u (local.get $x0) (local.get $xEnd)))
      (local.set $s (v128.load32_splat (local.get $x0)))
      (local.set $a0 (f32x4.add (local.get $a0) (f32x4.mul (v128.load offset=0 (local.get $wp)) (local.get $s))))
      (local.set $a1 (f32x4.add (local.get $a1) (f32x4.mul (v128.load offset=16 (local.get $wp)) (local.get $s))))
      (local.set $a2 (f32x4.add (local.get $a2) (f32x4.mul (v128.load offset=32 (local.get $wp)) (local.get $s))))
      (local.set $a3 (f32x4.add (local.get $a3) (f32x4.mul (v128.load offset=48 (local.get $wp)) (local.get $s))))
      (local.set $x0 (i32.add (local.get $x0) (i32.const 4)))
      (local.set $wp (i32.add (local.get $wp) (i32.const 64)))
      (br $ks)))
    (local.get $a0) (local.get $a1) (local.get $a2) (local.get $a3))

  ;; out[0..15] = f32(v + b[0..15]): one token's sums of a block's 16 rows, plus their bias
  (func $put16 (param $out i32) (param $b i32) (param $v0 v128) (param $v1 v128) (param $v2 v128) (param $v3 v128)
    (v128.store offset=0 (local.get $out) (f32x4.add (local.get $v0) (v128.load offset=0 (local.get $b))))
    (v128.store offset=16 (local.get $out) (f32x4.add (local.get $v1) (v128.load offset=16 (local.get $b))))
    (v128.store offset=32 (local.get $out) (f32x4.add (local.get $v2) (v128.load offset=32 (local.get $b))))
    (v128.store offset=48 (local.get $out) (f32x4.add (local.get $v3) (v128.load offset=48 (local.get $b)))))

  ;; out[t, n] = f32(Σ_k x[t, k]·w[n, k] + bias[n]) (sums in f32, k ascending), w in row blocks, for the rows n in
  ;; [nFirst, nEnd) (nFirst a multiple of 16; nEnd a multiple of 16, or N)
  (func (export "matmulBlocksF32") (param $x i32) (param $T i32) (param $K i32) (param $w i32) (param $N i32) (param $bias i32) (param $out i32)
                                   (param $nFirst i32) (param $nEnd i32)
    (local $nPad i32) (local $xBytes i32) (local $n i32) (local $wp i32) (local $t i32) (local $at i32)
    (local $v0 v128) (local $v1 v128) (local $v2 v128) (local $v3 v128) (local $v4 v128) (local $v5 v128) (local $v6 v128) (local $v7 v128)
    (local.set $nPad (i32.and (i32.add (local.get $N) (i32.const 15)) (i32.const -16)))
    (local.set $xBytes (i32.shl (local.get $K) (i32.const 2)))
    (local.set $n (local.get $nFirst))
    (local.set $wp (i32.add (local.get $w) (i32.mul (i32.shr_u (local.get $nFirst) (i32.const 4)) (i32.shl (local.get $K) (i32.const 6)))))
    (block $blocksDone (loop $blocks
      (br_if $blocksDone (i32.ge_u (local.get $n) (local.get $nEnd)))
      (local.set $t (i32.const 0))
      (block $pairsDone (loop $pairs
        (br_if $pairsDone (i32.gt_u (i32.add (local.get $t) (i32.const 2)) (local.get $T)))
        (call $block2 (local.get $wp) (i32.add (local.get $x) (i32.mul (local.get $t) (local.get $xBytes)))
          (i32.add (local.get $x) (i32.mul (i32.add (local.get $t) (i32.const 1)) (local.get $xBytes))) (local.get $K))
        (local.set $v7) (local.set $v6) (local.set $v5) (local.set $v4) (local.set $v3) (local.set $v2) (local.set $v1) (local.set $v0)
        (local.set $at (i32.add (local.get $out) (i32.shl (i32.add (i32.mul (local.get $t) (local.get $nPad)) (local.get $n)) (i32.const 2))))
        (call $put16 (local.get $at) (i32.add (local.get $bias) (i32.shl (local.get $n) (i32.const 2)))
          (local.get $v0) (local.get $v1) (local.get $v2) (local.get $v3))
        (call $put16 (i32.add (local.get $at) (i32.shl (local.get $nPad) (i32.const 2))) (i32.add (local.get $bias) (i32.shl (local.get $n) (i32.const 2)))
          (local.get $v4) (local.get $v5) (local.get $v6) (local.get $v7))
        (local.set $t (i32.add (local.get $t) (i32.const 2)))
        (br $pairs)))
      (if (i32.lt_u (local.get $t) (local.get $T)) (then
        (call $block1 (local.get $wp) (i32.add (local.get $x) (i32.mul (local.get $t) (local.get $xBytes))) (local.get $K))
        (local.set $v3) (local.set $v2) (local.set $v1) (local.set $v0)
        (call $put16 (i32.add (local.get $out) (i32.shl (i32.add (i32.mul (local.get $t) (local.get $nPad)) (local.get $n)) (i32.const 2)))
          (i32.add (local.get $bias) (i32.shl (local.get $n) (i32.const 2)))
          (local.get $v0) (local.get $v1) (local.get $v2) (local.get $v3))))
      (local.set $n (i32.add (local.get $n) (i32.const 16)))
      (local.set $wp (i32.add (local.get $wp) (i32.shl (local.get $K) (i32.const 6))))
      (br $blocks))))

;; Rows r0..r3 of w (`steps` values each, stepBytes apart) against the 8 tokens whose x[·, j] start at xp (xT:
  ;; j's row of tPadBytes), j ascending, the sums going on from a0..d1 ($start8's): (r0·tokens 0-3, r0·4-7,
  ;; r1·0-3, ..., r3·4-7). A down-counter ends the loop, not an address: the backward product's last row address +
  ;; steps·stepBytes may pass 4 GiB. (The starting sums come in as parameters: loading them in here, under an `if`, ran
  ;; the loop at 0.75x the speed in V8.)
  (func $rows4x8 (param $r0 i32) (param $r1 i32) (param $r2 i32) (param $r3 i32) (param $xp i32) (param $steps i32) (param $stepBytes i32) (param $tPadBytes i32)
                 (param $a0 v128) (param $a1 v128) (param $b0 v128) (param $b1 v128) (param $c0 v128) (param $c1 v128) (param $d0 v128) (param $d1 v128)
                 (result v128 v128 v128 v128 v128 v128 v128 v128)
    (local $xa v128) (local $xb v128) (local $s v128)
    (block $done (loop $loop
      (br_if $done (i32.eqz (local.get $steps)))
      (local.set $xa (v128.load offset=0 (local.get $xp)))
      (local.set $xb (v128.load offset=16 (local.get $xp)))
      (local.set $s (v128.load32_splat (local.get $r0)))
      (local.set $a0 (f32x4.add (local.get $a0) (f32x4.mul (local.get $s) (local.get $xa)))) (local.set $a1 (f32x4.add (local.get $a1) (f32x4.mul (local.get $s) (local.get $xb))))
      (local.set $s (v128.load32_splat (local.get $r1)))
      (local.set $b0 (f32x4.add (local.get $b0) (f32x4.mul (local.get $s) (local.get $xa)))) (local.set $b1 (f32x4.add (local.get $b1) (f32x4.mul (local.get $s) (local.get $xb))))
      (local.set $s (v128.load32_splat (local.get $r2)))
      (local.set $c0 (f32x4.add (local.get $c0) (f32x4.mul (local.get $s) (local.get $xa)))) (local.set $c1 (f32x4.add (local.get $c1) (f32x4.mul (local.get $s) (local.get $xb))))
      (local.set $s (v128.load32_splat (local.get $r3)))
      (local.set $d0 (f32x4.add (local.get $d0) (f32x4.mul (local.get $s) (local.get $xa)))) (local.set $d1 (f32x4.add (local.get $d1) (f32x4.mul (local.get $s) (local.get $xb))))
      (local.set $r0 (i32.add (local.get $r0) (local.get $stepBytes)))
      (local.set $r1 (i32.add (local.get $r1) (local.get $stepBytes)))
      (local.set $r2 (i32.add (local.get $r2) (local.get $stepBytes)))
      (local.set $r3 (i32.add (local.get $r3) (local.get $stepBytes)))
      (local.set $xp (i32.add (local.get $xp) (local.get $tPadBytes)))
      (local.set $steps (i32.sub (local.get $steps) (i32.const 1)))
      (br $loop)))
    (local.get $a0) (local.get $a1) (local.get $b0) (local.get $b1) (local.get $c0) (local.get $c1) (local.get $d0) (local.get $d1))

  ;; The partial sums a tile starts from: +0s for the first chunk, else outT's rows at out (tPadBytes apart)
  (func $start8 (param $out i32) (param $tPadBytes i32) (param $first i32) (result v128 v128 v128 v128 v128 v128 v128 v128)
    (if (result v128 v128 v128 v128 v128 v128 v128 v128) (local.get $first)
      (then (v128.const i32x4 0 0 0 0) (v128.const i32x4 0 0 0 0) (v128.const i32x4 0 0 0 0) (v128.const i32x4 0 0 0 0)
            (v128.const i32x4 0 0 0 0) (v128.const i32x4 0 0 0 0) (v128.const i32x4 0 0 0 0) (v128.const i32x4 0 0 0 0))
      (else (v128.load offset=0 (local.get $out)) (v128.load offset=16 (local.get $out))
            (v128.load offset=0 (i32.add (local.get $out) (local.get $tPadBytes))) (v128.load offset=16 (i32.add (local.get $out) (local.get $tPadBytes)))
            (v128.load offset=0 (i32.add (local.get $out) (i32.mul (local.get $tPadBytes) (i32.const 2)))) (v128.load offset=16 (i32.add (local.get $out) (i32.mul (local.get $tPadBytes) (i32.const 2))))
            (v128.load offset=0 (i32.add (local.get $out) (i32.mul (local.get $tPadBytes) (i32.const 3)))) (v128.load offset=16 (i32.add (local.get $out) (i32.mul (local.get $tPadBytes) (i32.const 3)))))))

  ;; Address of row min(r, R - 1) of w: rows past R are read as row R - 1, their sums land in the padding
  (func $row (param $w i32) (param $r i32) (param $R i32) (param $rowBytes i32) (result i32)
    (i32.add (local.get $w) (i32.mul (local.get $rowBytes)
      (select (local.get $r) (i32.sub (local.get $R) (i32.const 1)) (i32.lt_u (local.get $r) (local.get $R))))))

  ;; outT[r, t..t+7] = f32(v + bias[r]) after the last chunk, v before it (+0 added: v is never -0): one row's sums
  ;; over 8 tokens
  (func $put8 (param $out i32) (param $b i32) (param $last i32) (param $v0 v128) (param $v1 v128)
    (local $bs v128)
    (if (local.get $last) (then (local.set $bs (v128.load32_splat (local.get $b)))))
    (v128.store offset=0 (local.get $out) (f32x4.add (local.get $v0) (local.get $bs)))
    (v128.store offset=16 (local.get $out) (f32x4.add (local.get $v1) (local.get $bs))))

  ;; The tile loop of both exports below: outT[r, t] = f32(Σ_{j < L} w[r·rowBytes + j·stepBytes]·xT[j][t] + bias[r])
  ;; (sums in f32, j ascending) for the rows r in [rFirst, rEnd) of R (rFirst a multiple of 4; rEnd a multiple of 4,
  ;; or R); xT [L][Tpad], Tpad a multiple of 8; bias [R rounded up to 4]; outT [R rounded up to 4][Tpad].
  ;; Blocks: 64 tokens by `chunk` steps j, whose part of xT (chunk·256 bytes) stays in L2 while every row passes; a
  ;; sum goes on from the partial sums its previous chunk left in outT (f32 values, stored and loaded unchanged: the
  ;; same roundings in the same order, bit for bit the sum of one pass). Chunks: forward 1,024 steps (256 KiB of xT,
  ;; a quarter of a core's L2 here); backward 512, so that the w lines a row group touches (a 64-byte line for each
  ;; 16 bytes it reads) stay in L1 while the block's tokens pass: 1,024 ran the 0.5B down and gate|up projections'
  ;; backward products at 0.9x the speed, 256 and 512 their forward ones at 0.8-1.0x (outT, 2.5 MiB a token block
  ;; at N = 9,728, read back per chunk). One pass over all L with token blocks sized by L (8 tokens at L = 9,728)
  ;; ran the gate|up backward product (a w value's steps 3.5 KiB apart, a page each) at 0.85x dense.wasm, 2.8x
  ;; slower than chunks (bench/cpu-f32-lanes.ts's shapes, ad hoc A/B, 11:43-11:49 UTC). The price of one loop for
  ;; both: the forward-only loop it replaced (constant steps of 4 bytes, no chunks) ran the q and gate|up forward
  ;; products 1.07-1.12x as fast as this, the down projection's as fast (A/B 11:51-11:53 UTC; constant steps or an
  ;; address-ended loop here won back under 3%).
  (func $tilesF32 (param $xT i32) (param $Tpad i32) (param $L i32) (param $w i32) (param $R i32) (param $rowBytes i32) (param $stepBytes i32)
                  (param $bias i32) (param $outT i32) (param $rFirst i32) (param $rEnd i32) (param $chunk i32)
    (local $tPadBytes i32) (local $tb i32) (local $tEnd i32) (local $j i32) (local $steps i32) (local $last i32)
    (local $r i32) (local $t i32) (local $at i32) (local $r0 i32) (local $r1 i32) (local $r2 i32) (local $r3 i32)
    (local $v0 v128) (local $v1 v128) (local $v2 v128) (local $v3 v128) (local $v4 v128) (local $v5 v128) (local $v6 v128) (local $v7 v128)
    (local.set $tPadBytes (i32.shl (local.get $Tpad) (i32.const 2)))
    (block $tokenBlocksDone (loop $tokenBlocks
      (br_if $tokenBlocksDone (i32.ge_u (local.get $tb) (local.get $Tpad)))
      (local.set $tEnd (select (i32.add (local.get $tb) (i32.const 64)) (local.get $Tpad)
                               (i32.lt_u (i32.add (local.get $tb) (i32.const 64)) (local.get $Tpad))))
      (local.set $j (i32.const 0))
      (block $chunksDone (loop $chunks
        (local.set $steps (select (local.get $chunk) (i32.sub (local.get $L) (local.get $j))
                                  (i32.lt_u (i32.add (local.get $j) (local.get $chunk)) (local.get $L))))
        (local.set $last (i32.ge_u (i32.add (local.get $j) (local.get $steps)) (local.get $L)))
        (local.set $r (local.get $rFirst))
        (block $rowsDone (loop $rows
          (br_if $rowsDone (i32.ge_u (local.get $r) (local.get $rEnd)))
          (local.set $r0 (i32.add (call $row (local.get $w) (local.get $r) (local.get $R) (local.get $rowBytes)) (i32.mul (local.get $j) (local.get $stepBytes))))
          (local.set $r1 (i32.add (call $row (local.get $w) (i32.add (local.get $r) (i32.const 1)) (local.get $R) (local.get $rowBytes)) (i32.mul (local.get $j) (local.get $stepBytes))))
          (local.set $r2 (i32.add (call $row (local.get $w) (i32.add (local.get $r) (i32.const 2)) (local.get $R) (local.get $rowBytes)) (i32.mul (local.get $j) (local.get $stepBytes))))
          (local.set $r3 (i32.add (call $row (local.get $w) (i32.add (local.get $r) (i32.const 3)) (local.get $R) (local.get $rowBytes)) (i32.mul (local.get $j) (local.get $stepBytes))))
          (local.set $t (local.get $tb))
          (block $tilesDone (loop $tiles
            (br_if $tilesDone (i32.ge_u (local.get $t) (local.get $tEnd)))
            (local.set $at (i32.add (local.get $outT) (i32.shl (i32.add (i32.mul (local.get $r) (local.get $Tpad)) (local.get $t)) (i32.const 2))))
            (call $rows4x8 (local.get $r0) (local.get $r1) (local.get $r2) (local.get $r3)
              (i32.add (local.get $xT) (i32.add (i32.mul (local.get $j) (local.get $tPadBytes)) (i32.shl (local.get $t) (i32.const 2))))
              (local.get $steps) (local.get $stepBytes) (local.get $tPadBytes) (call $start8 (local.get $at) (local.get $tPadBytes) (i32.eqz (local.get $j))))
            (local.set $v7) (local.set $v6) (local.set $v5) (local.set $v4) (local.set $v3) (local.set $v2) (local.set $v1) (local.set $v0)
            (call $put8 (local.get $at) (i32.add (local.get $bias) (i32.shl (local.get $r) (i32.const 2))) (local.get $last) (local.get $v0) (local.get $v1))
            (local.set $at (i32.add (local.get $at) (local.get $tPadBytes)))
            (call $put8 (local.get $at) (i32.add (local.get $bias) (i32.shl (i32.add (local.get $r) (i32.const 1)) (i32.const 2))) (local.get $last) (local.get $v2) (local.get $v3))
            (local.set $at (i32.add (local.get $at) (local.get $tPadBytes)))
            (call $put8 (local.get $at) (i32.add (local.get $bias) (i32.shl (i32.add (local.get $r) (i32.const 2)) (i32.const 2))) (local.get $last) (local.get $v4) (local.get $v5))
            (local.set $at (i32.add (local.get $at) (local.get $tPadBytes)))
            (call $put8 (local.get $at) (i32.add (local.get $bias) (i32.shl (i32.add (local.get $r) (i32.const 3)) (i32.const 2))) (local.get $last) (local.get $v6) (local.get $v7))
            (local.set $t (i32.add (local.get $t) (i32.const 8)))
            (br $tiles)))
          (local.set $r (i32.add (local.get $r) (i32.const 4)))
          (br $rows)))
        (local.set $j (i32.add (local.get $j) (local.get $steps)))
        (br_if $chunks (i32.lt_u (local.get $j) (local.get $L)))))
      (local.set $tb (local.get $tEnd))
      (br $tokenBlocks))))

  ;; outT[n, t] = f32(Σ_k x[t, k]·w[n, k] + bias[n]) (sums in f32, k ascending), w row-major [N, K], x given
  ;; transposed (xT [K][Tpad]), for the rows n in [nFirst, nEnd): the tiles' rows are w's rows, their steps its k's
  (func (export "matmulF32") (param $xT i32) (param $Tpad i32) (param $K i32) (param $w i32) (param $N i32) (param $bias i32) (param $outT i32)
                             (param $nFirst i32) (param $nEnd i32)
    (call $tilesF32 (local.get $xT) (local.get $Tpad) (local.get $K) (local.get $w) (local.get $N)
      (i32.shl (local.get $K) (i32.const 2)) (i32.const 4) (local.get $bias) (local.get $outT) (local.get $nFirst) (local.get $nEnd) (i32.const 1024)))

  ;; dxT[k, t] = f32(Σ_n dy[t, n]·w[n, k]) (sums in f32, n ascending), w row-major [N, K], dy given transposed
  ;; (dyT [N][Tpad]), for the columns k in [kFirst, kEnd): the tiles' rows are w's columns, their steps its rows.
  ;; zeros [K rounded up to 4]: +0s, the bias the tiles add (a sum is never -0, so it changes nothing)
  (func (export "matmulBackwardF32") (param $dyT i32) (param $Tpad i32) (param $N i32) (param $w i32) (param $K i32) (param $zeros i32) (param $dxT i32)
                                     (param $kFirst i32) (param $kEnd i32)
    (call $tilesF32 (local.get $dyT) (local.get $Tpad) (local.get $N) (local.get $w) (local.get $K)
      (i32.const 4) (i32.shl (local.get $K) (i32.const 2)) (local.get $zeros) (local.get $dxT) (local.get $kFirst) (local.get $kEnd) (i32.const 512)))
)
