;; A scorer that grows its memory a page (64 KiB) at a time and writes to each new page. Past the
;; store's memory limit memory.grow returns -1 (it does not trap); the guest writes to the page it
;; did not get anyway, and that write is what traps (memory out of bounds).
(module
  (memory (export "memory") 1)
  (func (export "input_offset") (result i32) (i32.const 1024))
  (func (export "score") (param $n i32) (param $pod_cpu i64) (param $pod_mem i64) (result i32)
    (local $pages i32)
    (loop $more
      (local.set $pages (memory.size))
      (drop (memory.grow (i32.const 1)))
      (i64.store (i32.mul (local.get $pages) (i32.const 65536)) (i64.const 1))
      (br $more))
    (i32.const 0))
)
