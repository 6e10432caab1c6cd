"""Shared test wiring. Each area keeps its fixtures in a plugin module under tests/plugins/."""

pytest_plugins = [
    "tests.plugins.clock",
    "tests.plugins.controlplane",
    "tests.plugins.backends",
]
