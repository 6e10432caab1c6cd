"""Pod signatures: one answer to "are these two pods alike?" for both caches that carry a cycle's
results to the next pod (kube 1.34's pod signatures, k8s.io/kube-scheduler/framework/signers.go).

Every plugin of a profile's PreFilter, Filter, PreScore and Score points signs the pod: `sign_pod`
gives the parts of the pod its verdicts and scores read, as (signer name, hashable value)
fragments, kube's SignFragments. Two plugins that read the same part of the pod use the same
signer name and the same signer function (TaintToleration and NodeUnschedulable both read
tolerations), so the framework keeps one. The profile's signature is the scheduler name and every
fragment, as a set (`PodSigner.sign`): two pods with equal signatures get equal verdicts and raw
scores on the same nodes in the same state. A plugin with no `sign_pod` leaves every pod without
a signature.

Whether a cache may use a signature is its own rule, not the signer's:

- OpportunisticBatching (batch.py) takes the next node of the last cycle's sorted scores. That is
  wrong when a node's verdict moves with pods on other nodes (topology spreading, pod affinity) or
  with state the cycle allocates (resource claims), so those plugins can refuse a pod
  (`BatchRefuser.may_batch`, the refusals of kube's SignPod), and PodTopologySpread with default
  constraints refuses them all (`EveryPodRefuser`). `PodSigner.batch_signature` is the signature of
  a pod no plugin refuses, else None: kube's SignPod.
- The reuse cache (reuse.py) re-judges the nodes that changed since the last cycle, so it needs no
  refusal: it skips a cycle whose active filters read other nodes (`reads_other_nodes`) instead.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Hashable, Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

from minisched.scheduler.framework.interface import Plugin
from minisched.scheduler.framework.status import Status
from minisched.scheduler.framework.types import PodInfo

_SUCCESS = Status.success()

# Signer names: the fragment keys of k8s.io/kube-scheduler/framework/signers.go, and for what kube
# does not sign (it refuses those pods) names in the same style.
DYNAMIC_RESOURCES = "v1.Pod.Spec.DynamicResources"
IMAGE_NAMES = "v1.Pod.Spec.CanonicalImageNames()"
LABELS = "v1.Pod.Labels"
NODE_NAME = "v1.Pod.Spec.NodeName"
NODE_AFFINITY = "v1.Pod.Spec.Affinity.NodeAffinity"
NODE_SELECTOR = "v1.Pod.Spec.Affinity.NodeSelector"
HOST_PORTS = "v1.Pod.Spec.HostPorts()"
RESOURCES = "v1.Pod.Spec.ContainerRequestsAndOverheads()"
SCHEDULER_NAME = "v1.Pod.Spec.SchedulerName"
TOLERATIONS = "v1.Pod.Spec.Tolerations"
VOLUMES = "v1.Pod.Spec.Volumes.NonSyntheticSources()"
NAMESPACE = "v1.Pod.Namespace"
OWNER_REFERENCES = "v1.Pod.OwnerReferences"
POD_AFFINITY = "v1.Pod.Spec.Affinity.PodAffinity"
TOPOLOGY_SPREAD_CONSTRAINTS = "v1.Pod.Spec.TopologySpreadConstraints"

Fragment = tuple[str, Hashable]
# a set, not a sorted tuple: no sort, and its hash is computed once (the reuse cache looks it up
# and stores it every cycle)
Signature = frozenset[Fragment]


@runtime_checkable
class SignPlugin(Plugin, Protocol):
    """kube's SignPlugin: the parts of `pod` this plugin's verdicts and scores read, as (signer
    name, hashable value) fragments. A non-success status: it cannot say (no signature at all)."""

    def sign_pod(self, pod: PodInfo) -> tuple[Sequence[Fragment], Status]: ...


@runtime_checkable
class BatchRefuser(SignPlugin, Protocol):
    """A signer whose verdict on a node can move with more than the pod and that node, for some
    pods: `may_batch` says, per pod, whether OpportunisticBatching may reuse an earlier cycle's
    order for it (non-success: no; kube's SignPod refusals)."""

    def may_batch(self, pod: PodInfo) -> Status: ...


@runtime_checkable
class EveryPodRefuser(BatchRefuser, Protocol):
    """A refuser that can tell, without a pod, that it refuses them all (PodTopologySpread with
    default constraints): then batching signs no pod at all."""

    @property
    def refuses_every_pod(self) -> bool: ...


def refusal(plugin: str, why: str) -> Status:
    """What a BatchRefuser answers for a pod it will not batch (kube: an Unschedulable status)."""
    return Status.unschedulable(why, plugin=plugin)


# -- the common signers (kube's signers.go), on minisched's parsed pod --------------------------------

# Each is called for every pod of a reusable cycle: the usual pod (nothing of it set) costs a test.

# A toleration's fields (all strings): as plain tuples, sorted, the same tolerations in any order sign
# alike, and they hash fast (sorting the Toleration objects by repr, and hashing them, cost ~3 us a pod).
_TOLERATION_FIELDS = operator.attrgetter("key", "operator", "value", "effect")


def tolerations_signer(pod: PodInfo) -> Hashable:
    return tuple(sorted(map(_TOLERATION_FIELDS, pod.tolerations))) if pod.tolerations else ()


def host_ports_signer(pod: PodInfo) -> Hashable:
    # kube signs the port numbers only; the protocol and IP change NodePorts' verdict too
    return tuple(sorted({(p.port, p.protocol, p.ip) for p in pod.host_ports})) if pod.host_ports else ()


def node_affinity_signer(pod: PodInfo) -> Hashable:
    if pod.required_terms is None and not pod.preferred_terms:
        return None, ()

    def term(t: Any) -> Hashable:
        return (tuple(sorted(_requirement(r) for r in t.expressions)),
                tuple(sorted(_requirement(r) for r in t.fields)))

    required = None if pod.required_terms is None else tuple(sorted((term(t) for t in pod.required_terms), key=repr))
    preferred = tuple(sorted(((w, term(t)) for w, t in pod.preferred_terms), key=repr))
    return required, preferred


def _requirement(r: Any) -> tuple[Any, ...]:
    return r.key, r.operator, tuple(sorted(r.values)), r.number


def resources_signer(pod: PodInfo) -> Hashable:
    """The pod's requests, and the non-zero ones it counts for on a node and as the incoming pod
    (what NodeResourcesFit and BalancedAllocation read)."""
    return (tuple(sorted(pod.requests.items())), pod.nonzero_cpu, pod.nonzero_memory,
            pod.incoming_nonzero_cpu, pod.incoming_nonzero_memory)


def volumes_signer(pod: PodInfo) -> Hashable:
    """The pod's volume sources but ConfigMaps and Secrets (they do not change where a pod fits, and
    every pod has its own token volume), as canonical JSON, sorted. Kept on the PodInfo: four
    plugins sign them every cycle, and the service account token volume that the API server adds to
    most pods costs ~7 us to write as JSON."""
    signed = pod.memo.get(VOLUMES)
    if signed is None:
        signed = pod.memo[VOLUMES] = _volume_sources(pod)
    return signed


def _volume_sources(pod: PodInfo) -> tuple[str, ...]:
    volumes = (pod.pod.get("spec") or {}).get("volumes")
    if not volumes:
        return ()
    out = []
    for vol in volumes:
        if not isinstance(vol, dict) or "configMap" in vol or "secret" in vol:
            continue
        source = {k: v for k, v in vol.items() if k != "name"}
        out.append(json.dumps(source, sort_keys=True, separators=(",", ":")))
    return tuple(sorted(out))


def canonical_json(value: Any) -> Hashable:
    """A JSON value (a list of owner references, of resource claims) as one hashable string."""
    return json.dumps(value, sort_keys=True, separators=(",", ":")) if value else ""


# -- the framework's side ------------------------------------------------------------------------------

class PodSigner:
    """One profile's signer over its PreFilter, Filter, PreScore and Score plugins (each once).
    `signers` is None when one of them has no `sign_pod` (`unsignable_plugins`): then no pod has a
    signature. Signing the same PodInfo twice in a row (batching, then reuse) signs it once."""

    def __init__(self, points: Iterable[Sequence[Any]]) -> None:
        seen: dict[str, SignPlugin] = {}
        unsupported: list[str] = []
        for plugins in points:
            for p in plugins:
                if p.name in seen or p.name in unsupported:
                    continue
                if isinstance(p, SignPlugin):
                    seen[p.name] = p
                else:
                    unsupported.append(p.name)
        self.unsignable_plugins = unsupported
        self.signers: list[SignPlugin] | None = None if unsupported else list(seen.values())
        self.refusers: list[BatchRefuser] = [p for p in seen.values() if isinstance(p, BatchRefuser)]
        # kube's computeBatchablePlugins: it refuses each pod in turn; here, minus the calls
        self.refuses_every_pod = any(isinstance(p, EveryPodRefuser) and p.refuses_every_pod for p in self.refusers)
        self._last: tuple[PodInfo, Signature | None] | None = None
        # bound once: signing runs every reusable cycle, and most of its cost is calls
        self._sign_fns = None if self.signers is None else [p.sign_pod for p in self.signers]

    def sign(self, pod: PodInfo) -> Signature | None:
        """The scheduler name and every plugin's fragments; None when the profile has a
        plugin without `sign_pod` or one cannot sign this pod."""
        last = self._last
        if last is not None and last[0] is pod:  # a PodInfo is immutable: its signature is too
            return last[1]
        signature = self._sign(pod)
        self._last = (pod, signature)
        return signature

    def _sign(self, pod: PodInfo) -> Signature | None:
        if self._sign_fns is None:
            return None
        sig: dict[str, Hashable] = {SCHEDULER_NAME: pod.scheduler_name}
        ok = _SUCCESS
        for sign_pod in self._sign_fns:
            fragments, status = sign_pod(pod)
            if status is not ok and not status.is_success:
                return None
            sig.update(fragments)  # (name, value) pairs; two plugins that read the same part give one
        return frozenset(sig.items())

    def may_batch(self, pod: PodInfo) -> bool:
        """Does no plugin refuse to batch `pod`? (kube: no SignPod refusal.)"""
        if self.signers is None or self.refuses_every_pod:
            return False
        return all(p.may_batch(pod).is_success for p in self.refusers)

    def batch_signature(self, pod: PodInfo) -> Signature | None:
        """kube's SignPod: the signature of a pod that no plugin refuses to batch, else None."""
        return self.sign(pod) if self.may_batch(pod) else None


__all__ = [
    "BatchRefuser",
    "EveryPodRefuser",
    "Fragment",
    "PodSigner",
    "SignPlugin",
    "Signature",
    "canonical_json",
    "host_ports_signer",
    "node_affinity_signer",
    "refusal",
    "resources_signer",
    "tolerations_signer",
    "volumes_signer",
]
