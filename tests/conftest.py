"""Shared test wiring. Each area keeps its fixtures in a plugin module under tests/plugins/."""

from hypothesis import HealthCheck, settings

pytest_plugins = [
    "tests.plugins.clock",
    "tests.plugins.controlplane",
    "tests.plugins.backends",
]

# No timed tests: Hypothesis's own timing checks (a per-example deadline, "input generation is
# slow") measure the machine's load, not the code, and failed CI runs on a loaded 2-core machine.
settings.register_profile(
    "minisched", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("minisched")
