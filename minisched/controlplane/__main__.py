"""`python -m minisched.controlplane build|up|where`.

build: build (or verify the cached) binaries with hack/build-controlplane.sh.
up:    run a control plane until Ctrl-C; print the kubeconfig path (also written to
       local_kubeconfig_path(), so MINISCHED_BACKEND=local connects to it; stopping removes that
       copy only if it is still this plane's, and `up` refuses to start while the plane a copy
       there names still answers: a second plane takes MINISCHED_LOCAL_KUBECONFIG=another/path). `--plane kind` (the
       default, `make cluster-local`) sets it up as `make cluster-up`'s kind cluster:
       kube-controller-manager, default admission, kind's four nodes and 15 system pods, KWOK
       keeping fake and chapter nodes alive. `--plane envtest` is the lighter setup most tests use:
       no controller-manager, no nodes or pods but yours.
where: print where the binaries are, or how to build them.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import socket
import sys
import threading
from pathlib import Path
from types import FrameType
from urllib.parse import urlsplit

import yaml

from minisched.cluster.local import LOCAL_KUBECONFIG_ENV
from minisched.controlplane import (
    BinariesNotFound,
    ControlPlane,
    ControlPlaneOptions,
    fake_node,
    find_binaries,
    local_kubeconfig_path,
)
from minisched.controlplane.binaries import run_build_script


def _up(args: argparse.Namespace) -> int:
    try:
        find_binaries()
    except BinariesNotFound as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    target = local_kubeconfig_path()
    other = _answering_server(target)
    if other is not None:
        print(f"error: {target} is the kubeconfig of another control plane, which still answers at {other}; "
              f"stop that one first, or give this one its own path: {LOCAL_KUBECONFIG_ENV}=/some/other/kubeconfig",
              file=sys.stderr)
        return 1
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    kind_like = args.plane == "kind"
    components = (
        "etcd, kube-apiserver, kube-controller-manager, kube-scheduler, KWOK and kind's nodes and system pods"
        if kind_like
        else "etcd, kube-apiserver and KWOK"
    )
    print(f"starting {components} ...", file=sys.stderr, flush=True)
    with ControlPlane(ControlPlaneOptions(keep_logs=args.keep_logs, kind_like=kind_like)) as cp:
        if args.nodes:
            from minisched.cluster.real import RealCluster

            cluster = RealCluster.from_kubeconfig(path=str(cp.kubeconfig))
            try:
                for i in range(args.nodes):
                    cluster.create("nodes", fake_node(f"kwok-node-{i}"))
            finally:
                cluster.close()
        ours: bytes | None = None  # what this plane wrote to the shared path, if it did
        other = _answering_server(target)  # another `up` may have finished starting while this one did
        if other is not None:
            print(f"warning: another control plane, answering at {other}, put its kubeconfig at {target} while "
                  f"this one started; it stays there (MINISCHED_BACKEND=local reaches that one), and this plane's "
                  f"is {cp.kubeconfig}", file=sys.stderr)
            kubeconfig = Path(cp.kubeconfig)
        else:
            if target.exists():  # a plane that stopped without cleaning up (killed): nothing answers there
                print(f"replacing {target}, left by a control plane that no longer answers", file=sys.stderr)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(cp.kubeconfig, target)
            target.chmod(0o600)
            ours, kubeconfig = target.read_bytes(), target
        print(f"API server {cp.server}; logs in {cp.log_dir}", file=sys.stderr)
        print(f"export KUBECONFIG={kubeconfig}" + ("   # or MINISCHED_BACKEND=local" if ours is not None else ""),
              file=sys.stderr)
        print(kubeconfig, flush=True)
        print("running; Ctrl-C to stop", file=sys.stderr, flush=True)
        try:
            while not stop.wait(1.0):
                dead = [name for name, proc in cp.processes.items() if not proc.running()]
                if dead:
                    print(f"error: {', '.join(dead)} exited; logs in {cp.log_dir}", file=sys.stderr)
                    cp.mark_failed()
                    return 1
        finally:
            if ours is not None:
                _remove_if_ours(target, ours)
            print("stopping", file=sys.stderr)
    return 0


def _answering_server(kubeconfig: Path, timeout: float = 1.0) -> str | None:
    """The API server `kubeconfig` names if something accepts connections there, else None (no
    file, not a kubeconfig we can read, or its plane is gone)."""
    try:
        config = yaml.safe_load(kubeconfig.read_text())
        server = str(config["clusters"][0]["cluster"]["server"])
        url = urlsplit(server)
        host, port = url.hostname, url.port or (443 if url.scheme == "https" else 80)
    except (OSError, yaml.YAMLError, KeyError, IndexError, TypeError, ValueError):
        return None
    if host is None:
        return None
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return server
    except OSError:
        return None


def _remove_if_ours(target: Path, ours: bytes) -> None:
    """Remove the shared kubeconfig only if it is still the one this plane wrote: another plane
    (started with it gone, or by hand) may have put its own there since, and keeps running."""
    try:
        if target.read_bytes() == ours:
            target.unlink(missing_ok=True)
    except FileNotFoundError:
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m minisched.controlplane",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="build the binaries (cached by version)")
    build.add_argument("--force", action="store_true", help="rebuild even if the cache is up to date")
    up = sub.add_parser("up", help="run a local control plane until Ctrl-C")
    up.add_argument(
        "--plane",
        choices=("kind", "envtest"),
        default="kind",
        help="kind (default): set up as `make cluster-up`'s kind cluster (kube-controller-manager, default "
        "admission, kind's 4 nodes and 15 system pods); envtest: etcd, kube-apiserver and KWOK only",
    )
    up.add_argument("--nodes", type=int, default=0, help="create this many KWOK fake nodes")
    up.add_argument("--keep-logs", action="store_true", help="keep component logs after stopping")
    sub.add_parser("where", help="print where the binaries are")
    args = parser.parse_args(argv)
    if args.command == "build":
        return run_build_script(force=args.force)
    if args.command == "up":
        return _up(args)
    try:
        binaries = find_binaries()
    except BinariesNotFound as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(binaries.directory)
    return 0


if __name__ == "__main__":
    sys.exit(main())
