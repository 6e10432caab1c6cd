"""DynamicResources (PreFilter, PostFilter): the part of kube-scheduler v1.35's Dynamic Resource
Allocation plugin that every pod meets, and an honest refusal for the rest.

kube's default profile has DynamicResources (DRA is on by default since 1.34) just before
DefaultPreemption. For a pod without ResourceClaims its PreFilter skips, and when no node fits its
PostFilter still runs, finds no claim to deallocate and says so; that is why kube's FailedScheduling
text reads "... no new claims to deallocate, preemption: 0/5 nodes are available: ...". minisched
keeps that behaviour so its messages are kube's word for word.

Allocating devices for ResourceClaims (DeviceClasses, ResourceSlices, CEL selectors) is not
implemented: a pod that has spec.resourceClaims is refused at PreFilter, unresolvably, with a
message that says so, rather than placed as if its claims did not exist.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from minisched.scheduler.framework import signature
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.interface import Handle, PreFilterResult
from minisched.scheduler.framework.status import Code, Status
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.snapshot import NodeTable

NAME = "DynamicResources"
NO_CLAIMS_TO_DEALLOCATE = "no new claims to deallocate"  # kube's PostFilter text
STATE_KEY = "PreFilterDynamicResources"
# kube's PostFilter reads what its PreFilter wrote; when an earlier PreFilter rejected the pod
# (VolumeBinding's missing claim, say), there is nothing and kube's FailedScheduling ends in the
# cycle state's error text, "not found"
STATE_MISSING = "not found"
NOT_IMPLEMENTED = ("pod has spec.resourceClaims: minisched does not allocate ResourceClaims "
                   "(Dynamic Resource Allocation is not implemented)")


def resource_claims(pod: PodInfo) -> list[Any]:
    claims = (pod.pod.get("spec") or {}).get("resourceClaims") or []
    return list(claims) if isinstance(claims, list) else [claims]


class DynamicResources:
    name = NAME

    def sign_pod(self, pod: PodInfo) -> tuple[Sequence[signature.Fragment], Status]:
        claims = resource_claims(pod)
        return ([(signature.DYNAMIC_RESOURCES, signature.canonical_json(claims))] if claims else ()), Status.success()

    def may_batch(self, pod: PodInfo) -> Status:
        """kube: a pod with claims is not batched (its cycle allocates devices)."""
        if resource_claims(pod):
            return signature.refusal(NAME, "pods with dra resource claims are not signable")
        return Status.success()

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> tuple[PreFilterResult | None, Status]:
        state.write(STATE_KEY, True)
        if not resource_claims(pod):
            return None, Status.skip(NAME)
        return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (NOT_IMPLEMENTED,), NAME)

    def post_filter(self, state: CycleState, pod: PodInfo, statuses: Mapping[str, Status]) -> tuple[str | None, Status]:
        if state.get(STATE_KEY) is None:
            return None, Status(Code.ERROR, (STATE_MISSING,), NAME)
        # kube: with no claim of the pod allocated, there is nothing to free for it
        return None, Status.unschedulable(NO_CLAIMS_TO_DEALLOCATE, plugin=NAME)


def new(args: Mapping[str, Any] | None, handle: Handle | None) -> DynamicResources:
    if args:
        raise ValueError(f"DynamicResources: minisched takes no args for it, got {sorted(args)}")
    return DynamicResources()
