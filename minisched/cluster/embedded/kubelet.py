"""A stand-in for kubelets, in the spirit of KWOK: explicit, on demand, never automatic.

Nothing runs pods in the embedded cluster, so bound pods would stay Pending and graceful deletions
would wait forever. `Kubelet(cluster).sync()` does what kubelets (or KWOK's stages) would: start
bound pods (phase Running, Ready) and finish pending graceful deletions. It uses only the Cluster
API, so it works on any backend.
"""

from __future__ import annotations

from typing import Any

from minisched.clock import RealClock, rfc3339
from minisched.cluster.base import Cluster
from minisched.errors import Conflict, NotFound
from minisched.resources import PODS

Object = dict[str, Any]
HOST_IP = "10.0.0.1"


class Kubelet:
    def __init__(self, cluster: Cluster, *, nodes: set[str] | None = None) -> None:
        """Act for `nodes` only, or for every node when None."""
        self.cluster = cluster
        self.nodes = nodes
        self.clock = getattr(cluster, "clock", None) or RealClock()
        self._next_ip = 0

    def _mine(self, pod: Object) -> bool:
        node = (pod.get("spec") or {}).get("nodeName")
        return bool(node) and (self.nodes is None or node in self.nodes)

    def sync(self) -> dict[str, int]:
        """Start every bound Pending pod and finish every pending graceful deletion, once.
        Returns how many pods were started and deleted."""
        started = deleted = 0
        for pod in self.cluster.list(PODS)["items"]:
            if not self._mine(pod):
                continue
            meta = pod["metadata"]
            try:
                if meta.get("deletionTimestamp"):
                    self.cluster.delete(PODS, meta["name"], meta["namespace"], grace_period_seconds=0,
                                        preconditions={"uid": meta["uid"]})
                    deleted += 1
                elif (pod.get("status") or {}).get("phase") == "Pending":
                    self.start(pod)
                    started += 1
            except (NotFound, Conflict):
                continue  # changed under us; the next sync sees the new state
        return {"started": started, "deleted": deleted}

    def start(self, pod: Object) -> Object:
        """Report `pod` Running and Ready, as its kubelet would once the containers start."""
        now = rfc3339(self.clock.now())
        self._next_ip += 1
        ip = f"10.244.{self._next_ip // 250}.{self._next_ip % 250 + 1}"
        containers = (pod.get("spec") or {}).get("containers") or []
        conditions = [
            {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": now}
            for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
        ]
        status = {
            "phase": "Running",
            "conditions": conditions,
            # hostIPs with hostIP: where KWOK started the pod first (kind, the kind-like plane), the
            # API server refuses a hostIP that differs from the hostIPs it already holds.
            "hostIP": HOST_IP,
            "hostIPs": [{"ip": HOST_IP}],
            "podIP": ip,
            "podIPs": [{"ip": ip}],
            "startTime": now,
            "containerStatuses": [
                {"name": c.get("name"), "image": c.get("image"), "imageID": "", "ready": True, "started": True,
                 "restartCount": 0, "state": {"running": {"startedAt": now}}}
                for c in containers
            ],
        }
        meta = pod["metadata"]
        return self.cluster.patch(PODS, meta["name"], {"status": status}, meta["namespace"], subresource="status")

    def finish(self, namespace: str, name: str, *, succeeded: bool = True) -> Object:
        """The pod's containers exited: phase Succeeded (or Failed)."""
        phase = "Succeeded" if succeeded else "Failed"
        patch = {"status": {"phase": phase, "conditions": [{"type": "Ready", "status": "False"}]}}
        return self.cluster.patch(PODS, name, patch, namespace, subresource="status")
