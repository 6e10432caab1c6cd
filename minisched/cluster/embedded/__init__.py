"""The embedded cluster: an in-process, thread-safe API server (the default backend).

    from minisched.cluster.embedded import EmbeddedCluster, Kubelet
    cluster = EmbeddedCluster(clock=VirtualClock())

Modules, one concept each: store (objects, resourceVersion), watchhub (history window, per-watch
queues), kinds (per-resource strategy flags), admission (defaults, Priority plugin), validation
(422/400 answers), pods (graceful deletion, binding, eviction and PDBs), crds (custom resources),
events (the two Event APIs over one storage), faults (injected failures), kubelet (KWOK-like
helper), volumes (the PV controller's binding and a fake external provisioner, opt-in: volumes bind
only while a PersistentVolumeController runs, as on a cluster whose kube-controller-manager does it),
statuses (error messages), jsonvalues (copy, merge patch), server (EmbeddedCluster).
"""

from minisched.cluster.embedded.faults import Faults
from minisched.cluster.embedded.kubelet import Kubelet
from minisched.cluster.embedded.server import EmbeddedCluster
from minisched.cluster.embedded.volumes import FakeProvisioner, PersistentVolumeController

__all__ = ["EmbeddedCluster", "FakeProvisioner", "Faults", "Kubelet", "PersistentVolumeController"]
