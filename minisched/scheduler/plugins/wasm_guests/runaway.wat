;; A scorer that never returns: fuel (or the epoch watchdog) is what stops it.
(module
  (memory (export "memory") 1)
  (func (export "input_offset") (result i32) (i32.const 1024))
  (func (export "score") (param $n i32) (param $pod_cpu i64) (param $pod_mem i64) (result i32)
    (loop $forever (br $forever))
    (i32.const 0))
)
