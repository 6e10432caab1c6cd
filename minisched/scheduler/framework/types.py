"""PodInfo and its parts, for the framework and its plugins: they live in
minisched.scheduler.pod_info, below the framework, so that the snapshot (which the framework
reads) can use them without importing the framework. Import from either."""

from __future__ import annotations

from minisched.scheduler.pod_info import (
    CPU as CPU,
)
from minisched.scheduler.pod_info import (
    DEFAULT_MEMORY_REQUEST as DEFAULT_MEMORY_REQUEST,
)
from minisched.scheduler.pod_info import (
    DEFAULT_MILLI_CPU_REQUEST as DEFAULT_MILLI_CPU_REQUEST,
)
from minisched.scheduler.pod_info import (
    EPHEMERAL_STORAGE as EPHEMERAL_STORAGE,
)
from minisched.scheduler.pod_info import (
    MAX_AMOUNT as MAX_AMOUNT,
)
from minisched.scheduler.pod_info import (
    MEMORY as MEMORY,
)
from minisched.scheduler.pod_info import (
    NODE_SELECTOR_OPERATORS as NODE_SELECTOR_OPERATORS,
)
from minisched.scheduler.pod_info import (
    PODS as PODS,
)
from minisched.scheduler.pod_info import (
    TAINT_EFFECTS as TAINT_EFFECTS,
)
from minisched.scheduler.pod_info import (
    TOLERATION_OPERATORS as TOLERATION_OPERATORS,
)
from minisched.scheduler.pod_info import (
    AffinityTerm as AffinityTerm,
)
from minisched.scheduler.pod_info import (
    HostPort as HostPort,
)
from minisched.scheduler.pod_info import (
    LabelSelector as LabelSelector,
)
from minisched.scheduler.pod_info import (
    NodeSelectorTerm as NodeSelectorTerm,
)
from minisched.scheduler.pod_info import (
    Object as Object,
)
from minisched.scheduler.pod_info import (
    PodAffinity as PodAffinity,
)
from minisched.scheduler.pod_info import (
    PodInfo as PodInfo,
)
from minisched.scheduler.pod_info import (
    PodSpecError as PodSpecError,
)
from minisched.scheduler.pod_info import (
    Requirement as Requirement,
)
from minisched.scheduler.pod_info import (
    SpreadConstraint as SpreadConstraint,
)
from minisched.scheduler.pod_info import (
    Toleration as Toleration,
)
from minisched.scheduler.pod_info import (
    WeightedAffinityTerm as WeightedAffinityTerm,
)
from minisched.scheduler.pod_info import (
    is_pod_level_resource as is_pod_level_resource,
)
from minisched.scheduler.pod_info import (
    is_scalar_resource as is_scalar_resource,
)
from minisched.scheduler.pod_info import (
    normalized_image_name as normalized_image_name,
)
from minisched.scheduler.pod_info import (
    parse_int64 as parse_int64,
)
from minisched.scheduler.pod_info import (
    parse_node_selector_term as parse_node_selector_term,
)
from minisched.scheduler.pod_info import (
    resource_amount as resource_amount,
)
from minisched.scheduler.pod_info import (
    spread_constraint as spread_constraint,
)

__all__ = [
    "AffinityTerm",
    "CPU",
    "DEFAULT_MEMORY_REQUEST",
    "DEFAULT_MILLI_CPU_REQUEST",
    "EPHEMERAL_STORAGE",
    "HostPort",
    "LabelSelector",
    "MAX_AMOUNT",
    "MEMORY",
    "NODE_SELECTOR_OPERATORS",
    "NodeSelectorTerm",
    "Object",
    "PODS",
    "PodAffinity",
    "PodInfo",
    "PodSpecError",
    "Requirement",
    "SpreadConstraint",
    "TAINT_EFFECTS",
    "TOLERATION_OPERATORS",
    "Toleration",
    "WeightedAffinityTerm",
    "is_pod_level_resource",
    "is_scalar_resource",
    "normalized_image_name",
    "parse_int64",
    "parse_node_selector_term",
    "resource_amount",
    "spread_constraint",
]
