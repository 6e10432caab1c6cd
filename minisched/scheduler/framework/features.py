"""Feature gates the scheduler honours, with kube-scheduler 1.35's defaults (--feature-gates)."""

from __future__ import annotations

from collections.abc import Mapping

OPPORTUNISTIC_BATCHING = "OpportunisticBatching"
POP_FROM_BACKOFF_Q = "SchedulerPopFromBackoffQ"

# gate -> its default in kube 1.35 (pkg/features/kube_features.go)
DEFAULTS: Mapping[str, bool] = {
    OPPORTUNISTIC_BATCHING: True,  # beta in 1.35
    POP_FROM_BACKOFF_Q: True,  # beta and on by default since 1.33
}


def check_feature_gates(gates: Mapping[str, bool]) -> dict[str, bool]:
    """The defaults with `gates` applied; an unknown gate or a value that is not a bool is an error
    that names it (kube-scheduler refuses to start on an unrecognized gate too)."""
    out = dict(DEFAULTS)
    for name, value in gates.items():
        if name not in DEFAULTS:
            raise ValueError(f"unrecognized feature gate: {name} (minisched knows {', '.join(sorted(DEFAULTS))})")
        if not isinstance(value, bool):
            raise ValueError(f"feature gate {name} must be true or false, got {value!r}")
        out[name] = value
    return out


def parse_feature_gates(text: str) -> dict[str, bool]:
    """kube's flag syntax, "A=true,B=false", into a map (checked by check_feature_gates)."""
    out: dict[str, bool] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = part.partition("=")
        if not sep or value.strip().lower() not in ("true", "false"):
            raise ValueError(f"feature gate {part!r} must be written Name=true or Name=false")
        out[name.strip()] = value.strip().lower() == "true"
    return out
