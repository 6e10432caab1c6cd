"""The `minisched` command.

    minisched run [--kubeconfig PATH] [--context NAME] [--embedded] [--config profile.yaml] [--node-selector SEL]
                  [--plugin-config] [--otlp-endpoint URL [--trace-sample-ratio R] [--trace-profiles DIR]]
                  [--leader-elect ... | --shards [--shard-group NAME] [--shard-lease-duration SECONDS]
                   [--identity ID] [--lease-namespace NS] [--no-capacity-fence]]
    minisched demo [--pods N]
    minisched reset [--namespace NS] [--all] [--kubeconfig PATH] [--context NAME]

`run` schedules pods whose spec.schedulerName names one of the configured profiles (by default the
single profile "minisched") until SIGINT or SIGTERM, then shuts down gracefully: no new scheduling
cycles, running bindings finish, events are flushed. Without --kubeconfig/--context/--embedded it
uses the MINISCHED_BACKEND setting (embedded by default). MINISCHED_BUFFERS resizes the bounded
buffers a running scheduler keeps, e.g. "event-correlator=64,pod-change-log=64,cycle-log=64,
memory-samples=2" (minisched.app.SERVICE_BUFFERS has them and their default sizes): a short soak
lowers them so that they are full, and flat, after a few hundred pods instead of thousands.

`run --shards` runs one replica of a sharded scheduler (Part II §4.3): start N of them with the same
--shard-group and each schedules the pods the ring gives it, renewing its own Lease
<group>-shard-<identity> in --lease-namespace and fencing nodes through the ConfigMaps
<group>-capacity-<node> there. --no-capacity-fence turns that fence off, to show the over-commit it
prevents; never in earnest.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import signal
import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

    from minisched.observability.tracing import SchedulingTracer

log = logging.getLogger("minisched")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="minisched", description="A Kubernetes scheduler built to be read.")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-v info, -vv debug)")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="schedule pods on a cluster until SIGINT/SIGTERM",
                         epilog="environment: MINISCHED_BUFFERS=name=size,... resizes the bounded buffers "
                                "(event-correlator, pod-change-log, cycle-log, memory-samples), for short soaks")
    target = run.add_mutually_exclusive_group()
    target.add_argument("--embedded", action="store_true", help="use an in-process embedded cluster")
    target.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
    target.add_argument("--in-cluster", action="store_true",
                        help="use the service account of the pod minisched runs in (see deploy/)")
    run.add_argument("--context", help="kubeconfig context (default: its current-context)")
    run.add_argument("--config", help="KubeSchedulerConfiguration YAML (kubescheduler.config.k8s.io/v1)")
    run.add_argument("--bind-workers", type=int, default=64,
                     help="concurrent binding cycles (default 64; the real backend's connection pool is sized to it + 32)")
    run.add_argument("--cpu", default="auto",
                     help="the one CPU the process's threads run on: they take turns on one interpreter lock, "
                          "and handing it between cores costs more than a second core gives (bench/README.md). "
                          "'auto' (default): the CPU it starts on; a CPU number; 'all': every CPU it may use")
    run.add_argument("--shutdown-timeout", type=float, default=20.0,
                     help="seconds a SIGTERM/SIGINT shutdown may take, shared by every step; what is not "
                          "done by then is abandoned and logged (default 20, inside Kubernetes' 30 s grace)")
    run.add_argument("--watch-idle-timeout", type=float, default=None,
                     help="seconds a watch may stay silent before its connection is taken for dead and the "
                          "watch restarted (real clusters; default 45, 0: never)")
    run.add_argument("--node-selector", default=None,
                     help="schedule only onto nodes this label selector picks (e.g. minisched.dev/chapter=ch03-3): "
                          "the node informer lists and watches with it, as a chapter on a shared cluster needs")
    run.add_argument("--percentage-of-nodes-to-score", type=int, default=None,
                     help="0 (adaptive, as kube) .. 100; overrides the configuration")
    run.add_argument("--feature-gates", default="",
                     help="as kube-scheduler's, e.g. OpportunisticBatching=false (on by default, as in kube 1.35)")
    run.add_argument("--annotate-decisions", action="store_true",
                     help="write each pod's decision record as annotation minisched.io/decision")
    run.add_argument("--leader-elect", action="store_true",
                     help="campaign for a Lease and schedule only while leading (for several replicas)")
    run.add_argument("--lease-name", default="minisched", help="the Lease to campaign for (default minisched)")
    run.add_argument("--lease-namespace", default="kube-system", help="its namespace (default kube-system)")
    run.add_argument("--leader-elect-lease-duration", type=float, default=15.0,
                     help="seconds a standby waits after the last renewal before taking over (default 15)")
    run.add_argument("--leader-elect-renew-deadline", type=float, default=10.0,
                     help="seconds the leader keeps trying to renew before it gives up leading (default 10)")
    run.add_argument("--leader-elect-retry-period", type=float, default=2.0,
                     help="seconds between attempts to acquire or renew (default 2)")
    run.add_argument("--identity", default=None,
                     help="this candidate's (or shard replica's) identity (default: $POD_NAME or hostname, plus a uuid)")
    run.add_argument("--shards", action="store_true",
                     help="run as one replica of a sharded scheduler: no leader, each replica schedules the pods "
                          "a rendezvous ring over the live replicas' leases gives it (see --shard-group)")
    run.add_argument("--shard-group", default="minisched",
                     help="the ring's name: replicas with the same group share the work; it prefixes the Leases "
                          "(<group>-shard-<identity>) and capacity ledgers (<group>-capacity-<node>) in "
                          "--lease-namespace (default minisched)")
    run.add_argument("--shard-lease-duration", type=float, default=15.0,
                     help="seconds after its last renewal that a replica leaves the ring and its pods move to "
                          "the others; renewed every third of it (default 15)")
    run.add_argument("--no-capacity-fence", action="store_true",
                     help="with --shards, bind without reserving on the nodes' capacity ledgers: replicas then "
                          "over-commit nodes as separate schedulers do (for demonstrations only)")
    run.add_argument("--metrics-port", type=int, default=None,
                     help="serve /metrics, /healthz, /readyz and /livez on this port (0: any free port)")
    run.add_argument("--secure-serving", action="store_true", default=None,
                     help="serve the metrics port over TLS with /metrics only for callers the API server "
                          "authenticates and RBAC allows (TokenReview + SubjectAccessReview), as kube-scheduler; "
                          "the default with --in-cluster")
    run.add_argument("--tls-cert-file", default=None, help="certificate for --secure-serving (default: self-signed)")
    run.add_argument("--tls-private-key-file", default=None, help="its private key")
    run.add_argument("--metrics-bind-address", default="127.0.0.1",
                     help="address for --metrics-port (default 127.0.0.1; 0.0.0.0 in a pod, for probes)")
    run.add_argument("--memory-sample-interval", type=float, default=30.0,
                     help="seconds between samples of the memory watch on /metrics (RSS, pymalloc and glibc "
                          "malloc books, GC pauses; default 30, 0: only on SIGUSR1, which also logs them)")
    run.add_argument("--malloc-trim", action="store_true",
                     help="after each memory sample, give glibc malloc's free pages back to the system (malloc_trim)")
    run.add_argument("--plugin-config", action="store_true",
                     help="watch SchedulerPluginConfig objects and swap profiles' plugins between cycles "
                          "(creates the CRD if missing)")
    run.add_argument("--otlp-endpoint", default=None,
                     help="export a trace of sampled scheduling attempts over OTLP/HTTP to this base URL "
                          "(e.g. http://127.0.0.1:4318); OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT also enable it")
    run.add_argument("--trace-sample-ratio", type=float, default=None,
                     help="fraction of attempts traced (default: OTEL_TRACES_SAMPLER(_ARG), else 0.1 as kube)")
    run.add_argument("--trace-profiles", metavar="DIR", default=None,
                     help="run each traced scheduling cycle under cProfile and write DIR/<span id>.prof "
                          "(the attempt span's id, attribute minisched.profile.id; the last 64 kept)")

    reset = sub.add_parser("reset", help="return a cluster to the chapters' starting state (pods, leases, events, "
                                         "workbook objects; with --all also nodes, CRDs and kind workers)")
    reset_target = reset.add_mutually_exclusive_group()
    reset_target.add_argument("--kubeconfig", help="kubeconfig file (default: the MINISCHED_BACKEND setting)")
    reset_target.add_argument("--embedded", action="store_true", help=argparse.SUPPRESS)
    reset.add_argument("--context", help="kubeconfig context")
    reset.add_argument("--namespace", help="the namespace to empty (default: MINISCHED_NAMESPACE or default)")
    reset.add_argument("--all", action="store_true", dest="cluster_wide",
                       help="every non-system namespace, the nodes the chapters made, the workbook's CRDs, "
                            "minisched's leader lease, and kind workers back to deploy/kind.yaml (instructors)")

    demo = sub.add_parser("demo", help="schedule a stream of pods on the embedded cluster and report")
    demo.add_argument("--pods", type=int, default=700, help="how many pods to send (default 700)")
    demo.add_argument("--seed", type=int, default=7)
    return parser


def _real_options(args: argparse.Namespace) -> dict[str, Any]:
    """Connection settings of the real backend sized by use: one pooled connection per binding
    worker plus room for the loop, the event writer, leader election and the informers' lists."""
    idle = args.watch_idle_timeout
    options: dict[str, Any] = {"pool_maxsize": args.bind_workers + 32}
    if idle is not None:
        options["watch_idle_timeout"] = idle or None  # 0: no deadline
        options["watch_max_seconds"] = max(1.0, min(idle * 8 / 9, idle - 2)) if idle else None
    return options


def _connect(args: argparse.Namespace) -> Any:
    if args.embedded:
        from minisched.cluster.embedded import EmbeddedCluster

        return EmbeddedCluster()
    if args.in_cluster:
        from minisched.cluster.real import RealCluster

        return RealCluster.in_cluster(**_real_options(args))
    if args.kubeconfig or args.context:
        from minisched.cluster.real import RealCluster

        return RealCluster.from_kubeconfig(path=args.kubeconfig, context=args.context, **_real_options(args))
    from minisched.cluster import backend_setting, connect

    setting = backend_setting()
    return connect(setting) if setting.startswith("embedded") else connect(setting, **_real_options(args))


def log_memory(watch: Any, top: int = 10) -> None:
    """Log a memory sample taken after a full collection (RSS, pymalloc and glibc malloc books)
    and, when tracemalloc traces (`python -X tracemalloc -m minisched.cli run`), the source lines
    whose held memory grew most since the watch's baseline."""
    log.warning("memory: %s", watch.sample("SIGUSR1", collect=True).describe())
    if watch.tracing:
        for t in watch.top_differences(top):
            log.warning("memory: %+.1f KiB %+d blocks since the baseline at %s", t.size_diff / 1024, t.count_diff,
                        t.location)


def _log_memory_soon(watch: Any) -> None:
    # off the signal handler (it runs between two bytecodes of the main thread, which may hold a lock)
    threading.Thread(target=log_memory, args=(watch,), name="memory-report", daemon=True).start()


def buffers_setting(text: str) -> dict[str, int]:
    """MINISCHED_BUFFERS ("name=size,name=size") as SchedulerApp's `buffers`; a ValueError says what
    is wrong (an entry without '=', a size that is not an integer, an unknown name)."""
    from minisched.app import check_buffers

    buffers: dict[str, int] = {}
    for entry in filter(None, (e.strip() for e in text.split(","))):
        name, eq, size = entry.partition("=")
        if not eq or not size.strip().isdigit():
            raise ValueError(f"MINISCHED_BUFFERS: {entry!r} is not name=size (a whole number)")
        buffers[name.strip()] = int(size)
    try:
        check_buffers(buffers)
    except ValueError as err:
        raise ValueError(f"MINISCHED_BUFFERS: {err}") from None
    return buffers


def _otlp_endpoint_set(endpoint: str | None) -> bool:
    """Whether otlp_provider may return a provider (an endpoint given, or one in the environment):
    asked first so that a run without tracing does not import opentelemetry, ~40 ms of its start."""
    return bool(endpoint or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
                or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"))


def cmd_run(args: argparse.Namespace) -> int:
    from minisched.app import SchedulerApp, pin_to_one_cpu, tune_collector_for_scheduling
    from minisched.observability.threadnames import name_os_threads

    name_os_threads()  # "bind-3", "scheduler-loop"... in top -H and /proc/<pid>/task/*/comm

    if args.percentage_of_nodes_to_score is not None and not 0 <= args.percentage_of_nodes_to_score <= 100:
        print("minisched run: --percentage-of-nodes-to-score must be 0..100", file=sys.stderr)
        return 2
    if args.watch_idle_timeout is not None and (args.watch_idle_timeout != 0 and args.watch_idle_timeout < 3):
        print("minisched run: --watch-idle-timeout must be 0 (never) or at least 3 seconds", file=sys.stderr)
        return 2
    if not 0 < args.leader_elect_retry_period < args.leader_elect_renew_deadline < args.leader_elect_lease_duration:
        print("minisched run: need 0 < --leader-elect-retry-period < --leader-elect-renew-deadline < "
              "--leader-elect-lease-duration", file=sys.stderr)
        return 2
    if args.bind_workers < 1:
        print("minisched run: --bind-workers must be at least 1", file=sys.stderr)
        return 2
    if args.cpu not in ("auto", "all"):
        from minisched.app import check_cpu

        try:
            check_cpu(args.cpu)
        except ValueError as err:
            print(f"minisched run: --cpu (auto, all or a CPU number): {err}", file=sys.stderr)
            return 2
    if args.node_selector:
        from minisched.errors import BadRequest
        from minisched.selectors import parse_label_selector

        try:
            parse_label_selector(args.node_selector)
        except BadRequest as err:
            print(f"minisched run: --node-selector {args.node_selector!r} is not a label selector: {err}",
                  file=sys.stderr)
            return 2
    problem = _shard_problem(args)
    if problem:
        print(f"minisched run: {problem}", file=sys.stderr)
        return 2
    if args.shutdown_timeout < 0:
        print("minisched run: --shutdown-timeout must not be negative", file=sys.stderr)
        return 2
    if args.metrics_port is not None and not 0 <= args.metrics_port <= 65535:
        print("minisched run: --metrics-port must be 0..65535", file=sys.stderr)
        return 2
    if args.memory_sample_interval < 0:
        print("minisched run: --memory-sample-interval must not be negative", file=sys.stderr)
        return 2
    if args.trace_sample_ratio is not None and not 0.0 <= args.trace_sample_ratio <= 1.0:
        print("minisched run: --trace-sample-ratio must be in [0, 1]", file=sys.stderr)
        return 2
    from minisched.scheduler.framework.features import check_feature_gates, parse_feature_gates

    try:
        feature_gates = parse_feature_gates(args.feature_gates)
        check_feature_gates(feature_gates)
    except ValueError as err:
        print(f"minisched run: --feature-gates: {err}", file=sys.stderr)
        return 2
    try:
        buffers = buffers_setting(os.environ.get("MINISCHED_BUFFERS", ""))
    except ValueError as err:
        print(f"minisched run: {err}", file=sys.stderr)
        return 2
    if buffers:
        log.info("bounded buffers resized by MINISCHED_BUFFERS: %s",
                 ", ".join(f"{name} {size}" for name, size in buffers.items()))
    provider: TracerProvider | None = None
    tracer: SchedulingTracer | None = None
    if _otlp_endpoint_set(args.otlp_endpoint):
        from minisched.observability.tracing import SchedulingTracer, otlp_provider

        provider = otlp_provider(args.otlp_endpoint, ratio=args.trace_sample_ratio)
        tracer = SchedulingTracer(provider, profile_dir=args.trace_profiles) if provider is not None else None
    if tracer is None and (args.trace_sample_ratio is not None or args.trace_profiles is not None):
        print("minisched run: tracing options need --otlp-endpoint or OTEL_EXPORTER_OTLP_ENDPOINT", file=sys.stderr)
        return 2
    cluster = _connect(args)
    secure = args.secure_serving if args.secure_serving is not None else bool(args.in_cluster)
    tls: dict[str, Any] = {}
    if secure and args.metrics_port is not None:
        from minisched.observability.auth import DelegatedAuth, self_signed_context

        tls = {"metrics_ssl_context": self_signed_context(args.tls_cert_file, args.tls_private_key_file),
               "metrics_authorizer": DelegatedAuth(cluster)}
    app = SchedulerApp(
        cluster,
        config=args.config,
        scheduler_options={
            "bind_workers": args.bind_workers,
            "percentage_of_nodes_to_score": args.percentage_of_nodes_to_score,
            "node_selector": args.node_selector or None,
            "annotate_decisions": args.annotate_decisions,
            "tracer": tracer,
            "feature_gates": feature_gates,
        },
        leader_elect=args.leader_elect,
        identity=args.identity,
        lease_name=args.lease_name,
        lease_namespace=args.lease_namespace,
        lease_duration=args.leader_elect_lease_duration,
        renew_deadline=args.leader_elect_renew_deadline,
        retry_period=args.leader_elect_retry_period,
        metrics_port=args.metrics_port,
        metrics_host=args.metrics_bind_address,
        shutdown_timeout=args.shutdown_timeout,
        **tls,
        plugin_config=args.plugin_config,
        shards=args.shards,
        shard_group=args.shard_group,
        shard_lease_duration=args.shard_lease_duration,
        capacity_fence=not args.no_capacity_fence,
        memory_sample_interval=args.memory_sample_interval or None,
        malloc_trim=args.malloc_trim,
        buffers=buffers,
        freeze_heap=True,
    )
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        log.info("received %s: shutting down", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    if hasattr(signal, "SIGUSR1"):  # (not on Windows)
        signal.signal(signal.SIGUSR1, lambda _signum, _frame: _log_memory_soon(app.memory))
    if args.leader_elect:
        log.info("minisched %s campaigning for lease %s/%s", app.identity, args.lease_namespace, args.lease_name)
    if args.shards:
        log.info("minisched %s joining shard group %s in %s%s", app.identity, args.shard_group, args.lease_namespace,
                 " WITHOUT the capacity fence" if args.no_capacity_fence else "")
    # The process is the scheduler's (the app freezes the listed objects once its informers synced);
    # given back when main() returns into a process that goes on (a test's).
    restore_collector = tune_collector_for_scheduling()
    # One CPU for its threads (--cpu; checked above); given back as the collector's settings are.
    restore_cpus = pin_to_one_cpu(None if args.cpu == "auto" else int(args.cpu)) if args.cpu != "all" else None
    try:
        app.run(stop)
    finally:
        if restore_cpus is not None:
            restore_cpus()
        restore_collector()
        cluster.close()
        if provider is not None:
            provider.shutdown()  # flushes the spans still batched
    if app.scheduler is not None:
        s = app.scheduler.stats
        print(f"minisched: stopped; bound {s.bound}, unschedulable attempts {s.unschedulable}, "
              f"errors {s.errors}, bind conflicts {s.bind_conflicts}", file=sys.stderr)
        if app.shard is not None:
            st = app.shard.stats()
            print(f"minisched: shard {st.identity} of {st.group}: fence conflicts {st.fence_conflicts}, "
                  f"fence refusals {st.fence_refusals}, fallbacks {st.fallbacks}, ring changes {st.ring_changes}, "
                  f"pods taken over {st.pods_taken_over}, bindings refused for a stale resourceVersion "
                  f"{st.bind_stale_versions}, reservations revoked {st.revocations}", file=sys.stderr)
    code = 0
    if app.lost_lease:
        print("minisched: lost the leader lease; exiting so a supervisor restarts this replica", file=sys.stderr)
        code = 1
    report = app.scheduler.shutdown_report if app.scheduler is not None else None
    if report is not None and not report.clean:
        # The deadline abandoned work whose threads are still blocked in requests; the interpreter's
        # teardown would wait on them past the deadline. What matters is on the API server: exit now.
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def _shard_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the sharding flags, if anything."""
    if not args.shards:
        if args.no_capacity_fence:
            return "--no-capacity-fence needs --shards"
        return None
    if args.leader_elect:
        return "--shards and --leader-elect exclude each other (sharded replicas all schedule; none leads)"
    if not _DNS_LABEL.fullmatch(args.shard_group) or len(args.shard_group) > 40:
        return (f"--shard-group must be a DNS label of at most 40 characters (lowercase letters, digits, '-'; "
                f"it prefixes Lease and ConfigMap names), got {args.shard_group!r}")
    if not args.shard_lease_duration >= 3:
        return f"--shard-lease-duration must be at least 3 seconds (renewed every third of it), got {args.shard_lease_duration:g}"
    return None


def cmd_reset(args: argparse.Namespace) -> int:
    from minisched.cluster import Cluster, connect
    from minisched.workbook import reset

    cluster: Cluster
    if args.kubeconfig or args.context:
        from minisched.cluster.real import RealCluster

        cluster = RealCluster.from_kubeconfig(path=args.kubeconfig, context=args.context)
    else:
        cluster = connect("embedded" if args.embedded else None)
    try:
        report = reset(cluster, args.namespace, cluster_wide=args.cluster_wide)
    finally:
        cluster.close()
    print(report)
    return 1 if report.problems else 0


def cmd_demo(args: argparse.Namespace) -> int:
    from minisched.demo import run_demo

    if args.pods < 1:
        print("minisched demo: --pods must be at least 1", file=sys.stderr)
        return 2
    run_demo(pods=args.pods, seed=args.seed)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    # Before numpy is imported (the commands import it): minisched's arrays are a node list long,
    # too short for BLAS to split among threads, and OpenBLAS starts one per core at import and
    # spins it there (numpy's import on two cores: 0.12-0.14 CPU-s with it, 0.05-0.07 without;
    # bench/README.md, "the cyclic collector and BLAS threads").
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    args = _parser().parse_args(argv)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.command == "run":
        return cmd_run(args)
    if args.command == "reset":
        return cmd_reset(args)
    return cmd_demo(args)


if __name__ == "__main__":
    sys.exit(main())
