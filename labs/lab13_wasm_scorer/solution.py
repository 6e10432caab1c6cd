"""Lab 13, the instructor's solution."""

from __future__ import annotations

WAT = r"""
(module
  (memory (export "memory") 1)
  (global $base i32 (i32.const 1024))

  (func (export "input_offset") (result i32) (global.get $base))

  ;; used * 100 / alloc, or 0 when the node has none of the resource or the pod does not fit
  (func $most (param $alloc i64) (param $used i64) (result i64)
    (if (result i64) (i64.le_s (local.get $alloc) (i64.const 0))
      (then (i64.const 0))
      (else
        (if (result i64) (i64.gt_s (local.get $used) (local.get $alloc))
          (then (i64.const 0))
          (else (i64.div_s (i64.mul (local.get $used) (i64.const 100)) (local.get $alloc)))))))

  ;; address of row $i of column $c, with $n rows per column
  (func $at (param $c i32) (param $i i32) (param $n i32) (result i32)
    (i32.add (global.get $base)
             (i32.mul (i32.add (i32.mul (local.get $c) (local.get $n)) (local.get $i)) (i32.const 8))))

  (func (export "score") (param $n i32) (param $pod_cpu i64) (param $pod_mem i64) (result i32)
    (local $i i32)
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (i64.store (call $at (i32.const 6) (local.get $i) (local.get $n))
          (i64.div_s
            (i64.add
              (call $most (i64.load (call $at (i32.const 0) (local.get $i) (local.get $n)))
                          (i64.add (i64.load (call $at (i32.const 1) (local.get $i) (local.get $n)))
                                   (local.get $pod_cpu)))
              (call $most (i64.load (call $at (i32.const 2) (local.get $i) (local.get $n)))
                          (i64.add (i64.load (call $at (i32.const 3) (local.get $i) (local.get $n)))
                                   (local.get $pod_mem))))
            (i64.const 2)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (i32.const 0))
)
"""
