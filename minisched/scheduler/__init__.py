"""The scheduler: a kube-scheduler-shaped framework, its default plugins, and the runtime around them.

- `framework/`: extension points, Status, PodInfo, profiles, the Framework runtime, diagnosis and
  the per-attempt decision record.
- `plugins/`: the default plugins, one a module (DefaultPreemption among them).
- `pod_info`: PodInfo, a pod parsed once (also importable from `framework.types`).
- `snapshot`: the numpy NodeTable every cycle filters and scores.
- `queue`: the SchedulingQueue (activeQ, backoffQ, unschedulable, gated).
- `cache`: nodes and assigned pods, with assume / forget / confirm.
- `events`: Events, PodScheduled conditions and nominations written back to the cluster.
- `scheduler`: the Scheduler that ties them to informers and binds on a thread pool.
  One class over files named as kube's: `scheduler` (construction, frameworks, lifecycle),
  `schedule_one` (the scheduling and binding cycles), `eventhandlers` (the informer handlers),
  `handle` (the Handle plugins get, pods waiting at Permit), `workers`, `stats`.

Import the module you need (e.g. `from minisched.scheduler.scheduler import Scheduler`); this
package imports nothing on its own, so the lower modules stay cheap to import.
"""
