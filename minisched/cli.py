"""The `minisched` command.

    minisched run [--kubeconfig PATH] [--context NAME] [--embedded] [--config profile.yaml]
                  [--plugin-config] [--otlp-endpoint URL [--trace-sample-ratio R] [--trace-profiles DIR]]
    minisched demo [--pods N]

`run` schedules pods whose spec.schedulerName names one of the configured profiles (by default the
single profile "minisched") until SIGINT or SIGTERM, then shuts down gracefully: no new scheduling
cycles, running bindings finish, events are flushed. Without --kubeconfig/--context/--embedded it
uses the MINISCHED_BACKEND setting (embedded by default).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

log = logging.getLogger("minisched")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="minisched", description="A Kubernetes scheduler built to be read.")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-v info, -vv debug)")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="schedule pods on a cluster until SIGINT/SIGTERM")
    target = run.add_mutually_exclusive_group()
    target.add_argument("--embedded", action="store_true", help="use an in-process embedded cluster")
    target.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
    target.add_argument("--in-cluster", action="store_true",
                        help="use the service account of the pod minisched runs in (see deploy/)")
    run.add_argument("--context", help="kubeconfig context (default: its current-context)")
    run.add_argument("--config", help="KubeSchedulerConfiguration YAML (kubescheduler.config.k8s.io/v1)")
    run.add_argument("--bind-workers", type=int, default=64,
                     help="concurrent binding cycles (default 64, the real backend's connection pool)")
    run.add_argument("--percentage-of-nodes-to-score", type=int, default=None,
                     help="0 (adaptive, as kube) .. 100; overrides the configuration")
    run.add_argument("--annotate-decisions", action="store_true",
                     help="write each pod's decision record as annotation minisched.io/decision")
    run.add_argument("--leader-elect", action="store_true",
                     help="campaign for a Lease and schedule only while leading (for several replicas)")
    run.add_argument("--lease-name", default="minisched", help="the Lease to campaign for (default minisched)")
    run.add_argument("--lease-namespace", default="kube-system", help="its namespace (default kube-system)")
    run.add_argument("--identity", default=None,
                     help="this candidate's identity (default: $POD_NAME or hostname, plus a uuid)")
    run.add_argument("--metrics-port", type=int, default=None,
                     help="serve /metrics, /healthz, /readyz and /livez on this port (0: any free port)")
    run.add_argument("--metrics-bind-address", default="127.0.0.1",
                     help="address for --metrics-port (default 127.0.0.1; 0.0.0.0 in a pod, for probes)")
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

    demo = sub.add_parser("demo", help="schedule a stream of pods on the embedded cluster and report")
    demo.add_argument("--pods", type=int, default=700, help="how many pods to send (default 700)")
    demo.add_argument("--seed", type=int, default=7)
    return parser


def _connect(args: argparse.Namespace) -> Any:
    if args.embedded:
        from minisched.cluster.embedded import EmbeddedCluster

        return EmbeddedCluster()
    if args.in_cluster:
        from minisched.cluster.real import RealCluster

        return RealCluster.in_cluster()
    if args.kubeconfig or args.context:
        from minisched.cluster.real import RealCluster

        return RealCluster.from_kubeconfig(path=args.kubeconfig, context=args.context)
    from minisched.cluster import connect

    return connect()


def cmd_run(args: argparse.Namespace) -> int:
    from minisched.app import SchedulerApp

    if args.percentage_of_nodes_to_score is not None and not 0 <= args.percentage_of_nodes_to_score <= 100:
        print("minisched run: --percentage-of-nodes-to-score must be 0..100", file=sys.stderr)
        return 2
    if args.metrics_port is not None and not 0 <= args.metrics_port <= 65535:
        print("minisched run: --metrics-port must be 0..65535", file=sys.stderr)
        return 2
    if args.trace_sample_ratio is not None and not 0.0 <= args.trace_sample_ratio <= 1.0:
        print("minisched run: --trace-sample-ratio must be in [0, 1]", file=sys.stderr)
        return 2
    from minisched.observability.tracing import SchedulingTracer, otlp_provider

    provider = otlp_provider(args.otlp_endpoint, ratio=args.trace_sample_ratio)
    tracer = SchedulingTracer(provider, profile_dir=args.trace_profiles) if provider is not None else None
    if tracer is None and (args.trace_sample_ratio is not None or args.trace_profiles is not None):
        print("minisched run: tracing options need --otlp-endpoint or OTEL_EXPORTER_OTLP_ENDPOINT", file=sys.stderr)
        return 2
    cluster = _connect(args)
    app = SchedulerApp(
        cluster,
        config=args.config,
        scheduler_options={
            "bind_workers": args.bind_workers,
            "percentage_of_nodes_to_score": args.percentage_of_nodes_to_score,
            "annotate_decisions": args.annotate_decisions,
            "tracer": tracer,
        },
        leader_elect=args.leader_elect,
        identity=args.identity,
        lease_name=args.lease_name,
        lease_namespace=args.lease_namespace,
        metrics_port=args.metrics_port,
        metrics_host=args.metrics_bind_address,
        plugin_config=args.plugin_config,
    )
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        log.info("received %s: shutting down", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    if args.leader_elect:
        log.info("minisched %s campaigning for lease %s/%s", app.identity, args.lease_namespace, args.lease_name)
    try:
        app.run(stop)
    finally:
        cluster.close()
        if provider is not None:
            provider.shutdown()  # flushes the spans still batched
    if app.scheduler is not None:
        s = app.scheduler.stats
        print(f"minisched: stopped; bound {s.bound}, unschedulable attempts {s.unschedulable}, "
              f"errors {s.errors}, bind conflicts {s.bind_conflicts}", file=sys.stderr)
    if app.lost_lease:
        print("minisched: lost the leader lease; exiting so a supervisor restarts this replica", file=sys.stderr)
        return 1
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from minisched.demo import run_demo

    if args.pods < 1:
        print("minisched demo: --pods must be at least 1", file=sys.stderr)
        return 2
    run_demo(pods=args.pods, seed=args.seed)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.command == "run":
        return cmd_run(args)
    return cmd_demo(args)


if __name__ == "__main__":
    sys.exit(main())
