;; The CPU backend's training attention (causal over packed sequences, GQA) and its backward in WebAssembly: the
;; fast path of src/backend/cpu-train-attention.ts, whose references are attentionPackedReference and
;; attentionBackwardReference (src/backend/cpu-backward.ts). Token t, head h (kv head kh = h / group) attends to the
;; keys j = 0 .. pos[t] of its sequence (rows t - pos[t] + j):
;;   s_j = (Σ_d q[t, h, d]·k[j, kh, d])·scale          d ascending from +0 (f64)
;;   p_j = exp(s_j − max_j s_j) / Σ_j exp(...)            max as Math.max does it, the sum j ascending; exp is
;;                                                        JavaScript's Math.exp (imported)
;;   forward:  out[t, h, d] = f32(Σ_j p_j·v[j, kh, d])    j ascending from +0, two columns per f64 lane pair
;;   backward: dS_j = p_j·(g[t, h]·v[j] − g[t, h]·o[t, h])·scale;  dq[t, h, d] = f32(Σ_j dS_j·k[j, d]);
;;             dk[j, d] += dS_j·q[t, h, d];  dv[j, d] += p_j·g[t, h, d]   (f64, over t, h, j ascending)
;; The same operations in the same order as the references (a lane of f64x2 computes what the scalar loop does), so
;; the results are equal bit for bit. Memory: imported and shared (src/backend/cpu-arena.ts). Byte addresses from the
;; caller: q, g, o, out, dq f32 [T, heads, hd]; k, v f32 [T, kvHeads, hd]; dk, dv f64 [T, kvHeads, hd] (zeroed by
;; the caller); pos i32 [T]; p f64 scratch [T]; acc f64 scratch [hd].

(module
  (import "env" "memory" (memory 1 65536 shared))
  (import "env" "exp" (func $exp (param f64) (result f64)))

  ;; Σ_d a[d]·b[d], d ascending from +0 (a, b f32 [n]).
  (func $dot (param $a i32) (param $b i32) (param $n i32) (result f64)
    (local $sum f64) (local $end i32)
    (local.set $end (i32.add (local.get $a) (i32.shl (local.get $n) (i32.const 2))))
    (block $done (loop $next
      (br_if $done (i32.ge_u (local.get $a) (local.get $end)))
      (local.set $sum (f64.add (local.get $sum) (f64.mul (f64.promote_f32 (f32.load (local.get $a))) (f64.promote_f32 (f32.load (local.get $b))))))
      (local.set $a (i32.add (local.get $a) (i32.const 4)))
      (local.set $b (i32.add (local.get $b) (i32.const 4)))
      (br $next)))
    (local.get $sum))

  ;; acc[d] = acc[d] + s·x[d] for d < n (acc f64, x f32), two d at a time.
  (func $axpy (param $acc i32) (param $x i32) (param $s f64) (param $n i32)
    (local $pairsEnd i32) (local $end i32) (local $ss v128)
    (local.set $ss (f64x2.splat (local.get $s)))
    (local.set $end (i32.add (local.get $x) (i32.shl (local.get $n) (i32.const 2))))
    (local.set $pairsEnd (i32.add (local.get $x) (i32.shl (i32.and (local.get $n) (i32.const -2)) (i32.const 2))))
    (block $pairsDone (loop $pairs
      (br_if $pairsDone (i32.ge_u (local.get $x) (local.get $pairsEnd)))
      (v128.store (local.get $acc) (f64x2.add (v128.load (local.get $acc))
        (f64x2.mul (local.get $ss) (f64x2.promote_low_f32x4 (v128.load64_zero (local.get $x))))))
      (local.set $acc (i32.add (local.get $acc) (i32.const 16)))
      (local.set $x (i32.add (local.get $x) (i32.const 8)))
      (br $pairs)))
    (if (i32.lt_u (local.get $x) (local.get $end))
      (then (f64.store (local.get $acc) (f64.add (f64.load (local.get $acc))
        (f64.mul (local.get $s) (f64.promote_f32 (f32.load (local.get $x)))))))))

  ;; p[0 .. count) = the probabilities of the query at qRow over count keys from kRow, kStride bytes apart.
  (func $probabilities (param $qRow i32) (param $kRow i32) (param $kStride i32) (param $count i32) (param $hd i32) (param $p i32) (param $scale f64)
    (local $sp i32) (local $end i32) (local $max f64) (local $total f64) (local $e f64)
    (local.set $end (i32.add (local.get $p) (i32.shl (local.get $count) (i32.const 3))))
    (local.set $sp (local.get $p))
    (block $scoresDone (loop $scores
      (br_if $scoresDone (i32.ge_u (local.get $sp) (local.get $end)))
      (f64.store (local.get $sp) (f64.mul (call $dot (local.get $qRow) (local.get $kRow) (local.get $hd)) (local.get $scale)))
      (local.set $kRow (i32.add (local.get $kRow) (local.get $kStride)))
      (local.set $sp (i32.add (local.get $sp) (i32.const 8)))
      (br $scores)))
    ;; max as Math.max does it (NaN wins, +0 above -0)
    (local.set $max (f64.const -inf))
    (local.set $sp (local.get $p))
    (block $maxDone (loop $maxLoop
      (br_if $maxDone (i32.ge_u (local.get $sp) (local.get $end)))
      (local.set $max (f64.max (local.get $max) (f64.load (local.get $sp))))
      (local.set $sp (i32.add (local.get $sp) (i32.const 8)))
      (br $maxLoop)))
    (local.set $sp (local.get $p))
    (block $expDone (loop $expLoop
      (br_if $expDone (i32.ge_u (local.get $sp) (local.get $end)))
      (local.set $e (call $exp (f64.sub (f64.load (local.get $sp)) (local.get $max))))
      (f64.store (local.get $sp) (local.get $e))
      (local.set $total (f64.add (local.get $total) (local.get $e)))
      (local.set $sp (i32.add (local.get $sp) (i32.const 8)))
      (br $expLoop)))
    (local.set $sp (local.get $p))
    (block $divDone (loop $divLoop
      (br_if $divDone (i32.ge_u (local.get $sp) (local.get $end)))
      (f64.store (local.get $sp) (f64.div (f64.load (local.get $sp)) (local.get $total)))
      (local.set $sp (i32.add (local.get $sp) (i32.const 8)))
      (br $divLoop))))

  ;; acc f64 [n] = +0.
  (func $zero (param $acc i32) (param $n i32)
    (local $end i32)
    (local.set $end (i32.add (local.get $acc) (i32.shl (local.get $n) (i32.const 3))))
    (block $done (loop $next
      (br_if $done (i32.ge_u (local.get $acc) (local.get $end)))
      (f64.store (local.get $acc) (f64.const 0))
      (local.set $acc (i32.add (local.get $acc) (i32.const 8)))
      (br $next))))

  ;; dst f32 [n] = f32(acc f64 [n]).
  (func $demote (param $dst i32) (param $acc i32) (param $n i32)
    (local $end i32)
    (local.set $end (i32.add (local.get $dst) (i32.shl (local.get $n) (i32.const 2))))
    (block $done (loop $next
      (br_if $done (i32.ge_u (local.get $dst) (local.get $end)))
      (f32.store (local.get $dst) (f32.demote_f64 (f64.load (local.get $acc))))
      (local.set $dst (i32.add (local.get $dst) (i32.const 4)))
      (local.set $acc (i32.add (local.get $acc) (i32.const 8)))
      (br $next))))

  (func (export "forward") (param $q i32) (param $k i32) (param $v i32) (param $pos i32) (param $T i32) (param $heads i32)
                           (param $group i32) (param $kvHeads i32) (param $hd i32) (param $p i32) (param $acc i32) (param $out i32) (param $scale f64)
    (local $t i32) (local $h i32) (local $count i32) (local $row i32) (local $kvRow i32) (local $stride i32) (local $sp i32) (local $end i32)
    (local.set $stride (i32.shl (i32.mul (local.get $kvHeads) (local.get $hd)) (i32.const 2)))
    (block $tokensDone (loop $tokens
      (br_if $tokensDone (i32.ge_u (local.get $t) (local.get $T)))
      (local.set $count (i32.add (i32.load (i32.add (local.get $pos) (i32.shl (local.get $t) (i32.const 2)))) (i32.const 1)))
      (local.set $end (i32.add (local.get $p) (i32.shl (local.get $count) (i32.const 3))))
      (local.set $h (i32.const 0))
      (block $headsDone (loop $headLoop
        (br_if $headsDone (i32.ge_u (local.get $h) (local.get $heads)))
        ;; row: byte offset of (t, h) in [T, heads, hd] f32; kvRow: of (t - pos[t], kh) in [T, kvHeads, hd] f32
        (local.set $row (i32.shl (i32.mul (i32.add (i32.mul (local.get $t) (local.get $heads)) (local.get $h)) (local.get $hd)) (i32.const 2)))
        (local.set $kvRow (i32.shl (i32.mul (i32.add (i32.mul (i32.add (i32.sub (local.get $t) (local.get $count)) (i32.const 1)) (local.get $kvHeads))
                                                     (i32.div_u (local.get $h) (local.get $group))) (local.get $hd)) (i32.const 2)))
        (call $probabilities (i32.add (local.get $q) (local.get $row)) (i32.add (local.get $k) (local.get $kvRow)) (local.get $stride) (local.get $count) (local.get $hd) (local.get $p) (local.get $scale))
        (call $zero (local.get $acc) (local.get $hd))
        (local.set $sp (local.get $p))
        (block $keysDone (loop $keys
          (br_if $keysDone (i32.ge_u (local.get $sp) (local.get $end)))
          (call $axpy (local.get $acc) (i32.add (local.get $v) (local.get $kvRow)) (f64.load (local.get $sp)) (local.get $hd))
          (local.set $kvRow (i32.add (local.get $kvRow) (local.get $stride)))
          (local.set $sp (i32.add (local.get $sp) (i32.const 8)))
          (br $keys)))
        (call $demote (i32.add (local.get $out) (local.get $row)) (local.get $acc) (local.get $hd))
        (local.set $h (i32.add (local.get $h) (i32.const 1)))
        (br $headLoop)))
      (local.set $t (i32.add (local.get $t) (i32.const 1)))
      (br $tokens))))

  (func (export "backward") (param $g i32) (param $o i32) (param $q i32) (param $k i32) (param $v i32) (param $pos i32) (param $T i32) (param $heads i32)
                            (param $group i32) (param $kvHeads i32) (param $hd i32) (param $p i32) (param $acc i32) (param $dq i32) (param $dk i32) (param $dv i32) (param $scale f64)
    (local $t i32) (local $h i32) (local $count i32) (local $row i32) (local $kvRow i32) (local $stride i32) (local $sp i32) (local $end i32)
    (local $gRow i32) (local $qRow i32) (local $dOutDotOut f64) (local $pj f64) (local $dScore f64)
    (local.set $stride (i32.shl (i32.mul (local.get $kvHeads) (local.get $hd)) (i32.const 2)))
    (block $tokensDone (loop $tokens
      (br_if $tokensDone (i32.ge_u (local.get $t) (local.get $T)))
      (local.set $count (i32.add (i32.load (i32.add (local.get $pos) (i32.shl (local.get $t) (i32.const 2)))) (i32.const 1)))
      (local.set $end (i32.add (local.get $p) (i32.shl (local.get $count) (i32.const 3))))
      (local.set $h (i32.const 0))
      (block $headsDone (loop $headLoop
        (br_if $headsDone (i32.ge_u (local.get $h) (local.get $heads)))
        (local.set $row (i32.shl (i32.mul (i32.add (i32.mul (local.get $t) (local.get $heads)) (local.get $h)) (local.get $hd)) (i32.const 2)))
        (local.set $kvRow (i32.shl (i32.mul (i32.add (i32.mul (i32.add (i32.sub (local.get $t) (local.get $count)) (i32.const 1)) (local.get $kvHeads))
                                                     (i32.div_u (local.get $h) (local.get $group))) (local.get $hd)) (i32.const 2)))
        (local.set $gRow (i32.add (local.get $g) (local.get $row)))
        (local.set $qRow (i32.add (local.get $q) (local.get $row)))
        (call $probabilities (local.get $qRow) (i32.add (local.get $k) (local.get $kvRow)) (local.get $stride) (local.get $count) (local.get $hd) (local.get $p) (local.get $scale))
        (local.set $dOutDotOut (call $dot (local.get $gRow) (i32.add (local.get $o) (local.get $row)) (local.get $hd)))
        (call $zero (local.get $acc) (local.get $hd))
        (local.set $sp (local.get $p))
        (block $keysDone (loop $keys
          (br_if $keysDone (i32.ge_u (local.get $sp) (local.get $end)))
          (local.set $pj (f64.load (local.get $sp)))
          (local.set $dScore (f64.mul (f64.mul (local.get $pj)
            (f64.sub (call $dot (local.get $gRow) (i32.add (local.get $v) (local.get $kvRow)) (local.get $hd)) (local.get $dOutDotOut))) (local.get $scale)))
          (call $axpy (local.get $acc) (i32.add (local.get $k) (local.get $kvRow)) (local.get $dScore) (local.get $hd))
          (call $axpy (i32.add (local.get $dk) (i32.shl (local.get $kvRow) (i32.const 1))) (local.get $qRow) (local.get $dScore) (local.get $hd))
          (call $axpy (i32.add (local.get $dv) (i32.shl (local.get $kvRow) (i32.const 1))) (local.get $gRow) (local.get $pj) (local.get $hd))
          (local.set $kvRow (i32.add (local.get $kvRow) (local.get $stride)))
          (local.set $sp (i32.add (local.get $sp) (i32.const 8)))
          (br $keys)))
        (call $demote (i32.add (local.get $dq) (local.get $row)) (local.get $acc) (local.get $hd))
        (local.set $h (i32.add (local.get $h) (i32.const 1)))
        (br $headLoop)))
      (local.set $t (i32.add (local.get $t) (i32.const 1)))
      (br $tokens))))
)
