"""A real Kubernetes control plane for tests and `make cluster-local`, built from Go modules.

- `hack/build-controlplane.sh` (`make controlplane`) builds etcd, kube-apiserver,
  kube-controller-manager, kube-scheduler and KWOK into a version-keyed cache outside the work tree.
- `ControlPlane` runs them on loopback: envtest's setup plus KWOK for fake nodes, or with
  `ControlPlaneOptions(kind_like=True)` set up as kind's (controller-manager, default admission,
  kind's nodes and system pods: kindlike.py).
- `python -m minisched.controlplane up` runs one until Ctrl-C and writes its kubeconfig to
  `local_kubeconfig_path()`, where `MINISCHED_BACKEND=local` finds it.
"""

from __future__ import annotations

from minisched.cluster.local import LOCAL_KUBECONFIG_ENV, local_kubeconfig_path
from minisched.controlplane.binaries import (
    ETCD_VERSION,
    KUBERNETES_VERSION,
    KWOK_VERSION,
    Binaries,
    BinariesNotFound,
    binaries_available,
    find_binaries,
    how_to_build,
)
from minisched.controlplane.certs import CertificateAuthority, KeyPair
from minisched.controlplane.harness import (
    KWOK_NODE_ANNOTATION,
    POD_CIDR,
    SERVICE_CIDR,
    ControlPlane,
    ControlPlaneOptions,
    wait_for,
)
from minisched.controlplane.kindlike import KIND_POD_CIDR, KIND_SERVICE_CIDR, SYSTEM_POD_COUNT
from minisched.controlplane.kwok import CHAPTER_NODE_LABEL, create_fake_nodes, fake_node, node_is_ready
from minisched.controlplane.processes import ProcessFailed

__all__ = [
    "LOCAL_KUBECONFIG_ENV",
    "ETCD_VERSION",
    "KUBERNETES_VERSION",
    "KWOK_VERSION",
    "KWOK_NODE_ANNOTATION",
    "CHAPTER_NODE_LABEL",
    "KIND_POD_CIDR",
    "KIND_SERVICE_CIDR",
    "SYSTEM_POD_COUNT",
    "POD_CIDR",
    "SERVICE_CIDR",
    "Binaries",
    "BinariesNotFound",
    "CertificateAuthority",
    "ControlPlane",
    "ControlPlaneOptions",
    "KeyPair",
    "ProcessFailed",
    "binaries_available",
    "create_fake_nodes",
    "fake_node",
    "node_is_ready",
    "find_binaries",
    "how_to_build",
    "local_kubeconfig_path",
    "wait_for",
]
