"""PodDisruptionBudgets as preemption reads them: which victims' eviction would violate one (kube's
filterPodsWithPDBViolation), and where the budgets come from (kube's pdbLister).

The budgets come from the scheduler's PDB informer, never from a LIST on the scheduling loop's
path. Until that informer has synced, or when it cannot be read, PdbsUnavailable is raised and
preemption fails with an error status (the pod backs off and tries again): "no PDBs known" never
silently turns into "there are no PDBs"."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from minisched.errors import ApiError
from minisched.scheduler.framework.interface import Handle
from minisched.scheduler.framework.types import PodInfo
from minisched.selectors import from_label_selector_json

Object = dict[str, Any]


class PdbsUnavailable(Exception):
    """The PodDisruptionBudgets are not known (informer not synced, or the API cannot be read)."""


@dataclass
class Pdb:
    """What preemption needs of a PodDisruptionBudget."""

    namespace: str
    name: str
    selector: Any
    disruptions_allowed: int
    disrupted_pods: frozenset[str]

    @classmethod
    def from_object(cls, pdb: Object) -> Pdb:
        meta, spec, status = pdb.get("metadata") or {}, pdb.get("spec") or {}, pdb.get("status") or {}
        raw_selector = spec.get("selector")
        # kube: a nil or empty PDB selector matches no pod here
        selector = from_label_selector_json(raw_selector) if raw_selector else None
        return cls(
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or ""),
            selector=selector if selector is not None and not selector.empty() else None,
            disruptions_allowed=int(status.get("disruptionsAllowed") or 0),
            disrupted_pods=frozenset((status.get("disruptedPods") or {}).keys()),
        )

    def matches(self, pod: PodInfo) -> bool:
        if self.selector is None or pod.namespace != self.namespace:
            return False
        return bool(self.selector.matches((pod.pod.get("metadata") or {}).get("labels") or {}))


def split_by_pdb_violation(pods: Sequence[PodInfo], pdbs: Sequence[Pdb]) -> tuple[list[PodInfo], list[PodInfo]]:
    """(violating, non_violating), each keeping `pods`' order (kube's filterPodsWithPDBViolation):
    evicting a pod uses up one allowed disruption of every PDB that selects it; once some PDB has
    none left, the pod is violating."""
    allowed = [p.disruptions_allowed for p in pdbs]
    violating: list[PodInfo] = []
    non_violating: list[PodInfo] = []
    for pod in pods:
        violates = False
        for i, pdb in enumerate(pdbs):
            if not pdb.matches(pod) or pod.name in pdb.disrupted_pods:
                continue
            allowed[i] -= 1
            if allowed[i] < 0:
                violates = True
        (violating if violates else non_violating).append(pod)
    return violating, non_violating


def list_pdbs(handle: Handle) -> list[Pdb]:
    """The budgets, from the handle's `pod_disruption_budgets()` (the informer's cache, raising
    PdbsUnavailable until it has synced; a handle with no informer: one LIST, whose error is
    raised as PdbsUnavailable; a handle with no API: none)."""
    try:
        items = handle.pod_disruption_budgets()
    except ApiError as err:
        raise PdbsUnavailable(f"cannot list PodDisruptionBudgets: {err}") from err
    return [Pdb.from_object(p) for p in items]
