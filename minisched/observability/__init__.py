"""Observability: what a running scheduler tells the outside world.

- `metrics`: Prometheus metrics under kube-scheduler's and client-go's names, one registry per
  scheduler; they plug straight into the scheduler's observer hooks and the work queue.
- `adapters`: the scheduler's EventRecorder that also fills the decision log.
- `server`: one small HTTP server with /metrics, /healthz, /livez and /readyz.
- `logging`: structured JSON logs carrying a correlation id.
- `eventlog`: scheduling decisions as an append-only event log (SQLite) and projections;
  `recorder` writes each decision to it and to the JSON log.
- `promql`: what the book's PromQL computes, computed from a scrape.
- `heatmap`: the scheduling-latency heatmap, drawn from measured histogram buckets.
- `runtime`: the interpreter measured beside a running scheduler (ticker lateness, GC pauses, a
  memory watch exported as Prometheus metrics); `soak` runs rounds of pods and samples memory;
  `profiling` reads a pyinstrument profile of the scheduling loop for its hot spots.

Import the submodule you need; this package imports nothing heavy on its own.
"""
