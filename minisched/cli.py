"""The `minisched` command.

    minisched run [--kubeconfig PATH] [--context NAME] [--embedded] [--config profile.yaml]
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
    run.add_argument("--context", help="kubeconfig context (default: its current-context)")
    run.add_argument("--config", help="KubeSchedulerConfiguration YAML (kubescheduler.config.k8s.io/v1)")
    run.add_argument("--bind-workers", type=int, default=16, help="concurrent binding cycles (default 16)")
    run.add_argument("--percentage-of-nodes-to-score", type=int, default=None,
                     help="0 (adaptive, as kube) .. 100; overrides the configuration")
    run.add_argument("--annotate-decisions", action="store_true",
                     help="write each pod's decision record as annotation minisched.io/decision")

    demo = sub.add_parser("demo", help="schedule a stream of pods on the embedded cluster and report")
    demo.add_argument("--pods", type=int, default=700, help="how many pods to send (default 700)")
    demo.add_argument("--seed", type=int, default=7)
    return parser


def _connect(args: argparse.Namespace) -> Any:
    if args.embedded:
        from minisched.cluster.embedded import EmbeddedCluster

        return EmbeddedCluster()
    if args.kubeconfig or args.context:
        from minisched.cluster.real import RealCluster

        return RealCluster.from_kubeconfig(path=args.kubeconfig, context=args.context)
    from minisched.cluster import connect

    return connect()


def cmd_run(args: argparse.Namespace) -> int:
    from minisched.scheduler.scheduler import Scheduler

    if args.percentage_of_nodes_to_score is not None and not 0 <= args.percentage_of_nodes_to_score <= 100:
        print("minisched run: --percentage-of-nodes-to-score must be 0..100", file=sys.stderr)
        return 2
    cluster = _connect(args)
    sched = Scheduler(cluster, config=args.config, bind_workers=args.bind_workers,
                      percentage_of_nodes_to_score=args.percentage_of_nodes_to_score,
                      annotate_decisions=args.annotate_decisions)
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        log.info("received %s: shutting down", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    log.info("minisched scheduling for profiles %s on the %s cluster", list(sched.frameworks), cluster.name)
    try:
        sched.run(stop)
    finally:
        cluster.close()
    s = sched.stats
    print(f"minisched: stopped; bound {s.bound}, unschedulable attempts {s.unschedulable}, "
          f"errors {s.errors}, bind conflicts {s.bind_conflicts}", file=sys.stderr)
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
