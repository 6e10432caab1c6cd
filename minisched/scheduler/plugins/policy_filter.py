"""PolicyFilter (Filter): nodes must satisfy every SchedulingPolicy whose selector picks the pod.

Policies come from SchedulingPolicy custom resources (minisched.validation.scheduling_policy), each
compiled once by minisched.policy when loaded. A policy whose expression does not compile is not
applied: it is kept in `rejected` with its PolicyError (line, column, caret), so the mistake is
visible rather than silently filtering nothing or everything. `reload()` re-reads them.

A failing node is named with the policy and the part of the expression that was false, e.g.
`node(s) rejected by SchedulingPolicy gpu-only: not(hasLabel("env", "staging"))`. Preemption cannot
change a node's labels, taints or capacity, so failures are UnschedulableAndUnresolvable.

Unlike the built-in filters this one is not vectorised: an expression is a tree of arbitrary
functions of the node object, so `filter` evaluates the pure per-node `rejections` row by row.
Register it beside the in-tree plugins:

    registry = in_tree_registry(); registry.register(policy_filter.NAME, policy_filter.new)
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from minisched.errors import ApiError
from minisched.policy import Policy, PolicyError, compile_policy
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.interface import FilterResult, Handle
from minisched.scheduler.framework.status import Code
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.snapshot import NodeTable
from minisched.selectors import LabelSelector, from_label_selector_json
from minisched.validation.scheduling_policy import SCHEDULING_POLICIES

NAME = "PolicyFilter"
_MAX_REASON_BITS = 62

Object = dict[str, Any]


@dataclass(frozen=True)
class LoadedPolicy:
    name: str
    policy: Policy
    selector: LabelSelector  # the empty selector picks every pod

    def applies_to(self, pod: Object) -> bool:
        return self.selector.matches((pod.get("metadata") or {}).get("labels") or {})


def load(objects: Iterable[Object]) -> tuple[list[LoadedPolicy], dict[str, PolicyError | ApiError]]:
    """Compile SchedulingPolicy objects: (the usable ones sorted by name, {name: error} for the rest)."""
    loaded: list[LoadedPolicy] = []
    rejected: dict[str, PolicyError | ApiError] = {}
    for obj in objects:
        name = str((obj.get("metadata") or {}).get("name", ""))
        spec = obj.get("spec") or {}
        try:
            policy = compile_policy(str(spec.get("expression", "")))
            raw_selector = spec.get("selector")
            selector = LabelSelector() if raw_selector is None else from_label_selector_json(raw_selector)
        except (PolicyError, ApiError) as err:
            rejected[name] = err
            continue
        loaded.append(LoadedPolicy(name, policy, selector))
    return sorted(loaded, key=lambda p: p.name), rejected


def reason(policy: LoadedPolicy, failed_parts: Sequence[str]) -> str:
    return f"node(s) rejected by SchedulingPolicy {policy.name}: {' and '.join(failed_parts)}"


def rejections(policies: Sequence[LoadedPolicy], pod: Object, node: Object) -> list[str]:
    """The pure per-node rule: one reason per applicable policy that `node` fails for `pod`."""
    out = []
    for p in policies:
        if p.applies_to(pod) and not p.policy.evaluate(node, pod):
            out.append(reason(p, p.policy.explain(node, pod)))
    return out


class PolicyFilter:
    name = NAME

    def __init__(self, objects: Iterable[Object] = (), cluster: Any = None) -> None:
        self._cluster = cluster
        self._lock = threading.Lock()
        self.policies: list[LoadedPolicy] = []
        self.rejected: dict[str, PolicyError | ApiError] = {}
        self.set_policies(objects)

    def set_policies(self, objects: Iterable[Object]) -> None:
        loaded, rejected = load(objects)
        with self._lock:
            self.policies, self.rejected = loaded, rejected

    def reload(self) -> None:
        """Re-read the SchedulingPolicy objects from the cluster this plugin was made with."""
        if self._cluster is None:
            raise RuntimeError("PolicyFilter was not given a cluster to load SchedulingPolicies from")
        self.set_policies(self._cluster.list(SCHEDULING_POLICIES).get("items") or [])

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult:
        n = len(nodes)
        with self._lock:
            applicable = [p for p in self.policies if p.applies_to(pod.pod)]
        if not applicable or n == 0:
            return FilterResult.all_pass(n)
        messages: dict[str, int] = {}
        reasons = np.zeros(n, np.int64)
        for row in range(n):
            for message in rejections(applicable, pod.pod, nodes.node_at(row)):
                bit = messages.setdefault(message, min(len(messages), _MAX_REASON_BITS))
                reasons[row] |= np.int64(1) << np.int64(bit)
        return FilterResult(reasons == 0, reasons, tuple(messages), Code.UNSCHEDULABLE_AND_UNRESOLVABLE)


def new(args: Mapping[str, Any] | None, handle: Handle | None) -> PolicyFilter:
    """The registry's factory. args {"policies": [SchedulingPolicy objects]} gives them directly;
    otherwise they are listed from the handle's cluster (none if the CRD is not installed)."""
    args = args or {}
    if "policies" in args:
        return PolicyFilter(args["policies"])
    cluster = handle.cluster if handle is not None else None
    plugin = PolicyFilter(cluster=cluster)
    if cluster is not None:
        try:
            plugin.reload()
        except ApiError as err:
            if err.status != 404:  # 404: the SchedulingPolicy CRD is not installed: no policies
                raise
    return plugin
