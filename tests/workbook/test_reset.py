"""`minisched reset` on both backends: a student's namespace emptied without touching a
classmate's; an instructor's whole-cluster reset removes the nodes and CRDs the chapters made,
keeps KWOK's nodes, and puts kind's workers back to deploy/kind.yaml."""

from __future__ import annotations

import textwrap
import time
from pathlib import Path

import pytest

from minisched.cli import main
from minisched.cluster.base import Cluster
from minisched.controllers import replicaset
from minisched.controlplane.kwok import fake_node
from minisched.objects import make_node, make_pod
from minisched.resources import CRDS, EVENTS, LEASES, NAMESPACES, NODES, PODS
from minisched.workbook import ensure_namespace, kind_baseline, reset, workbook_namespace


def _lease(name: str, namespace: str) -> dict:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name, "namespace": namespace},
            "spec": {"holderIdentity": "someone"}}


def _event(name: str, namespace: str) -> dict:
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": namespace},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": namespace},
            "reason": "Test", "message": "m", "type": "Normal"}


def _names(cluster: Cluster, resource: object, namespace: str | None = None) -> set[str]:
    return {o["metadata"]["name"] for o in cluster.list(resource, namespace)["items"]}  # type: ignore[arg-type]


def test_namespace_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MINISCHED_NAMESPACE", raising=False)
    assert workbook_namespace() == "default"
    monkeypatch.setenv("MINISCHED_NAMESPACE", "student-07")
    assert workbook_namespace() == "student-07"
    monkeypatch.setenv("MINISCHED_NAMESPACE", "Student_07")
    with pytest.raises(ValueError, match="MINISCHED_NAMESPACE='Student_07' is not a namespace name"):
        workbook_namespace()


def test_reset_empties_one_namespace_and_leaves_a_classmates(cluster: Cluster) -> None:
    for ns in ("reset-a", "reset-b"):
        ensure_namespace(cluster, ns)
        ensure_namespace(cluster, ns)  # a second run finds it: no AlreadyExists
        cluster.create(PODS, make_pod("web", namespace=ns))
        cluster.create(LEASES, _lease("leader", ns))
        cluster.create(EVENTS, _event("ev", ns))
    cluster.create(CRDS, replicaset.crd())
    report = reset(cluster, "reset-a")
    assert not report.problems, report.problems
    assert report.deleted["pods"] == 1 and report.deleted["leases"] == 1
    assert _names(cluster, PODS, "reset-a") == set() and _names(cluster, LEASES, "reset-a") == set()
    assert _names(cluster, EVENTS, "reset-a") == set()
    assert _names(cluster, PODS, "reset-b") == {"web"} and _names(cluster, LEASES, "reset-b") == {"leader"}
    assert "reset-a" in _names(cluster, NAMESPACES)  # emptied, not deleted: the next run reuses it
    assert replicaset.crd()["metadata"]["name"] in _names(cluster, CRDS)  # a student's reset keeps CRDs


def test_reset_all_removes_what_the_chapters_made(cluster: Cluster, tmp_path: Path) -> None:
    kind_yaml = tmp_path / "kind.yaml"
    kind_yaml.write_text(textwrap.dedent("""\
        kind: Cluster
        apiVersion: kind.x-k8s.io/v1alpha4
        name: tc
        nodes:
          - role: control-plane
          - role: worker
            labels: {topology.kubernetes.io/zone: zone-a}
          - role: worker
            labels: {accelerator: gpu}
            kubeadmConfigPatches:
              - |
                kind: JoinConfiguration
                nodeRegistration:
                  taints:
                    - {key: accelerator, value: gpu, effect: NoSchedule}
        """))
    assert kind_baseline(kind_yaml) == {
        "tc-worker": {"labels": {"topology.kubernetes.io/zone": "zone-a"}, "taints": []},
        "tc-worker2": {"labels": {"accelerator": "gpu"},
                       "taints": [{"key": "accelerator", "value": "gpu", "effect": "NoSchedule"}]},
    }
    # the kind workers, as a chapter left them: cordoned, a label lost, a taint added or removed
    worker = fake_node("tc-worker")
    worker["spec"] = {"unschedulable": True, "taints": [{"key": "ch", "value": "x", "effect": "NoSchedule"}]}
    cluster.create(NODES, worker)
    cluster.create(NODES, fake_node("tc-worker2"))
    cluster.create(NODES, fake_node("kwok-kept"))
    cluster.create(NODES, make_node("ch01-a"))
    ensure_namespace(cluster, "reset-c")
    cluster.create(PODS, make_pod("left", namespace="reset-c"))
    cluster.create(CRDS, replicaset.crd())
    report = reset(cluster, cluster_wide=True, kind_config=kind_yaml)
    assert not report.problems, report.problems
    nodes = {n["metadata"]["name"]: n for n in cluster.list(NODES)["items"]}
    assert "ch01-a" not in nodes and "kwok-kept" in nodes
    w1, w2 = nodes["tc-worker"], nodes["tc-worker2"]
    assert not w1["spec"].get("unschedulable") and not w1["spec"].get("taints")
    assert w1["metadata"]["labels"]["topology.kubernetes.io/zone"] == "zone-a"
    assert w2["spec"]["taints"] == [{"key": "accelerator", "value": "gpu", "effect": "NoSchedule"}]
    assert w2["metadata"]["labels"]["accelerator"] == "gpu"
    assert sorted(report.restored_nodes) == ["tc-worker", "tc-worker2"]
    assert _names(cluster, PODS, "reset-c") == set()
    # a real API server finishes a CRD's deletion in the background (its cleanup finalizer)
    deadline = time.monotonic() + 20
    while replicaset.crd()["metadata"]["name"] in _names(cluster, CRDS) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert replicaset.crd()["metadata"]["name"] not in _names(cluster, CRDS)
    assert reset(cluster, cluster_wide=True, kind_config=kind_yaml).restored_nodes == []  # idempotent


def test_cli_reset_on_the_embedded_backend(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["reset", "--embedded", "--namespace", "default"]) == 0
    assert "deleted nothing" in capsys.readouterr().out
