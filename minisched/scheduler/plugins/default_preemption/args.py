"""DefaultPreemption's args (kube's DefaultPreemptionArgs and ValidateDefaultPreemptionArgs), with
minisched's own additions: how victims go (useEviction, victimGracePeriodSeconds), whether their
calls run off the cycle (asyncPreemption, kube's SchedulerAsyncPreemption gate), the name in the
DisruptionTarget message (schedulerName) and a seed for the candidates' random offset."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from minisched.scheduler.plugins.default_preemption.candidate import (
    MIN_CANDIDATE_NODES_ABSOLUTE,
    MIN_CANDIDATE_NODES_PERCENTAGE,
)
from minisched.scheduler.plugins.default_preemption.names import NAME

_FIELDS = {
    "minCandidateNodesPercentage": "min_candidate_nodes_percentage",
    "minCandidateNodesAbsolute": "min_candidate_nodes_absolute",
    "useEviction": "use_eviction",
    "victimGracePeriodSeconds": "victim_grace_period_seconds",
    "asyncPreemption": "async_preemption",
    "schedulerName": "scheduler_name",
    "seed": "seed",
}
_TYPE_FIELDS = {"apiVersion", "kind"}  # a pluginConfig's args may say what they are, as kube's


@dataclass(frozen=True)
class DefaultPreemptionArgs:
    min_candidate_nodes_percentage: int = MIN_CANDIDATE_NODES_PERCENTAGE
    min_candidate_nodes_absolute: int = MIN_CANDIDATE_NODES_ABSOLUTE
    use_eviction: bool = False
    victim_grace_period_seconds: int | None = None
    async_preemption: bool = True
    scheduler_name: str = "minisched"
    seed: Any = None

    @classmethod
    def from_mapping(cls, args: Mapping[str, Any] | None) -> DefaultPreemptionArgs:
        """The args of a pluginConfig entry, checked: an unknown field or a value out of range is
        a ValueError naming it."""
        args = dict(args or {})
        unknown = sorted(set(args) - set(_FIELDS) - _TYPE_FIELDS)
        if unknown:
            raise ValueError(f"{NAME} args: unknown field(s) {unknown} (known: {sorted(_FIELDS)})")
        values: dict[str, Any] = {}
        for key in ("minCandidateNodesPercentage", "minCandidateNodesAbsolute", "victimGracePeriodSeconds"):
            if args.get(key) is not None:
                values[_FIELDS[key]] = _integer(key, args[key])
        for key in ("useEviction", "asyncPreemption"):
            if key in args:
                values[_FIELDS[key]] = bool(args[key])
        if "schedulerName" in args:
            values["scheduler_name"] = str(args["schedulerName"])
        if "seed" in args:
            values["seed"] = args["seed"]
        parsed = cls(**values)
        parsed.validate()
        return parsed

    def validate(self) -> None:
        """kube's ValidateDefaultPreemptionArgs."""
        percentage, absolute = self.min_candidate_nodes_percentage, self.min_candidate_nodes_absolute
        if not 0 <= percentage <= 100 or absolute < 0:
            raise ValueError(
                f"{NAME} args: minCandidateNodesPercentage must be 0..100 and minCandidateNodesAbsolute "
                f">= 0, got {percentage} and {absolute}"
            )
        if percentage == 0 and absolute == 0:
            raise ValueError(f"{NAME} args: minCandidateNodesPercentage and minCandidateNodesAbsolute "
                             "cannot both be zero (no node could ever be a candidate)")


def _integer(key: str, value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError(f"{NAME} args: {key} must be an integer, got {value!r}")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{NAME} args: {key} must be an integer, got {value!r}") from None
