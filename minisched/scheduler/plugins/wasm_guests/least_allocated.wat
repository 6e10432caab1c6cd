;; A well-behaved scorer and filter for minisched's wasm plugin ABI (see minisched/scheduler/plugins/wasm.py).
;;
;; The host writes the node table's columns at input_offset(), each n little-endian i64s, in this
;; order: cpu allocatable (millicores), cpu requested, memory allocatable (bytes), memory requested,
;; pods allocatable, pods on the node. The guest writes one i64 per node right after them.
;;
;; score: least allocated, cpu and memory weighted equally, after adding the pod's requests:
;;   (free cpu * 100 / allocatable cpu + free memory * 100 / allocatable memory) / 2, a node
;;   without room for the pod scoring 0 on that resource.
;; filter: 0 (fits) or a reason bit: 1 not enough cpu, 2 not enough memory, 4 too many pods.
(module
  (memory (export "memory") 1)
  (global $base i32 (i32.const 1024))

  (func (export "input_offset") (result i32) (global.get $base))

  (func $least (param $alloc i64) (param $used i64) (result i64)
    (if (result i64) (i64.le_s (local.get $alloc) (i64.const 0))
      (then (i64.const 0))
      (else
        (if (result i64) (i64.gt_s (local.get $used) (local.get $alloc))
          (then (i64.const 0))
          (else (i64.div_s (i64.mul (i64.sub (local.get $alloc) (local.get $used)) (i64.const 100))
                           (local.get $alloc)))))))

  ;; one node, for the per-node calling convention (to measure what a call across the boundary costs)
  (func $score_one (export "score_one")
        (param $cpu_alloc i64) (param $cpu_req i64) (param $mem_alloc i64) (param $mem_req i64)
        (param $pod_cpu i64) (param $pod_mem i64) (result i64)
    (i64.div_s
      (i64.add (call $least (local.get $cpu_alloc) (i64.add (local.get $cpu_req) (local.get $pod_cpu)))
               (call $least (local.get $mem_alloc) (i64.add (local.get $mem_req) (local.get $pod_mem))))
      (i64.const 2)))

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
          (call $score_one
            (i64.load (call $at (i32.const 0) (local.get $i) (local.get $n)))
            (i64.load (call $at (i32.const 1) (local.get $i) (local.get $n)))
            (i64.load (call $at (i32.const 2) (local.get $i) (local.get $n)))
            (i64.load (call $at (i32.const 3) (local.get $i) (local.get $n)))
            (local.get $pod_cpu) (local.get $pod_mem)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (i32.const 0))

  (func (export "filter") (param $n i32) (param $pod_cpu i64) (param $pod_mem i64) (result i32)
    (local $i i32) (local $bits i64)
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (local.set $bits (i64.const 0))
        (if (i64.gt_s (i64.add (i64.load (call $at (i32.const 1) (local.get $i) (local.get $n))) (local.get $pod_cpu))
                      (i64.load (call $at (i32.const 0) (local.get $i) (local.get $n))))
          (then (local.set $bits (i64.or (local.get $bits) (i64.const 1)))))
        (if (i64.gt_s (i64.add (i64.load (call $at (i32.const 3) (local.get $i) (local.get $n))) (local.get $pod_mem))
                      (i64.load (call $at (i32.const 2) (local.get $i) (local.get $n))))
          (then (local.set $bits (i64.or (local.get $bits) (i64.const 2)))))
        (if (i64.ge_s (i64.load (call $at (i32.const 5) (local.get $i) (local.get $n)))
                      (i64.load (call $at (i32.const 4) (local.get $i) (local.get $n))))
          (then (local.set $bits (i64.or (local.get $bits) (i64.const 4)))))
        (i64.store (call $at (i32.const 6) (local.get $i) (local.get $n)) (local.get $bits))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (i32.const 0))
)
