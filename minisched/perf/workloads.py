"""kube-scheduler's scheduler_perf workloads, read at run time from the Go module cache.

The files are kube's own (`test/integration/scheduler_perf/*/performance-config.yaml` and the
`templates/` beside them, in the k8s.io/kubernetes module the control-plane build downloads); they
are never copied into this repository, so that figures are on kube's workloads and not on ours.

A file is a list of test cases. Each has a `workloadTemplate` (a list of ops whose fields may name
parameters as "$name") and `workloads` (name, labels such as integration-test / performance /
short, params, featureGates, threshold). `load_test_cases()` parses them, `TestCase.workload(name)`
resolves one workload's ops with its params substituted (scheduler_perf's own rule: a string
"$x" anywhere in an op is replaced by params["x"]; `countParam` fills `count`).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from minisched.controlplane.binaries import KUBERNETES_VERSION

Object = dict[str, Any]
SCHEDULER_PERF_DIR = "test/integration/scheduler_perf"
# {{.Index}} and {{.Count}} are the only template fields kube's pod and node templates use.
_TEMPLATE_FIELD = re.compile(r"\{\{\s*\.(\w+)\s*\}\}")


class WorkloadFilesNotFound(FileNotFoundError):
    """The k8s.io/kubernetes module is not in the Go module cache; the message says how to get it."""


class WorkloadError(ValueError):
    """A workload file or template that cannot be used as written; the message names it."""


def go_module_cache() -> Path:
    """$GOMODCACHE: `go env GOMODCACHE` when Go is installed, else $GOPATH/pkg/mod or ~/go/pkg/mod."""
    configured = os.environ.get("GOMODCACHE")
    if configured:
        return Path(configured)
    go = shutil.which("go")
    if go is not None:
        try:
            out = subprocess.run([go, "env", "GOMODCACHE"], capture_output=True, text=True, timeout=30,
                                 check=True).stdout.strip()
            if out:
                return Path(out)
        except (OSError, subprocess.SubprocessError):
            pass
    gopath = os.environ.get("GOPATH", "").split(os.pathsep)[0] or str(Path.home() / "go")
    return Path(gopath) / "pkg" / "mod"


def scheduler_perf_root(version: str = KUBERNETES_VERSION, module_cache: Path | None = None) -> Path:
    """The scheduler_perf directory of k8s.io/kubernetes@`version` in the module cache, or
    WorkloadFilesNotFound saying what to run."""
    root = (module_cache or go_module_cache()) / f"k8s.io/kubernetes@{version}" / SCHEDULER_PERF_DIR
    if not (root / "templates").is_dir():
        raise WorkloadFilesNotFound(
            f"kube's scheduler_perf workloads are not at {root}: the k8s.io/kubernetes@{version} module is "
            f"not in the Go module cache. `make controlplane` (hack/build-controlplane.sh) downloads it; or "
            f"`go mod download k8s.io/kubernetes@{version}` in any Go module directory")
    return root


@dataclass(frozen=True)
class Workload:
    """One workload of a test case, its ops resolved (params substituted, counts filled in)."""

    test_case: str
    name: str
    labels: tuple[str, ...]
    params: Mapping[str, Any]
    feature_gates: Mapping[str, bool]
    threshold: float | None
    ops: tuple[Object, ...]
    config_dir: Path  # template paths in ops are relative to it
    default_pod_template: str | None

    @property
    def full_name(self) -> str:
        return f"{self.test_case}/{self.name}"

    def template_path(self, relative: str) -> Path:
        return (self.config_dir / relative).resolve()


@dataclass(frozen=True)
class TestCase:
    name: str
    config_file: Path
    template: tuple[Object, ...]
    workloads: tuple[Object, ...]
    default_pod_template: str | None
    feature_gates: Mapping[str, bool] = field(default_factory=dict)

    __test__ = False  # not a pytest class

    def workload_names(self) -> list[str]:
        return [str(w["name"]) for w in self.workloads]

    def workload(self, name: str, params: Mapping[str, Any] | None = None) -> Workload:
        """Workload `name`; `params` overrides some of its params (e.g. a PreemptionBasic at 500
        nodes, which kube's file does not list), named in the workload's name."""
        for w in self.workloads:
            if w.get("name") == name:
                if not params:
                    return self._resolve(w)
                unknown = sorted(set(params) - set(w.get("params") or {}))
                if unknown:
                    raise WorkloadError(f"{self.name}/{name} has no params {unknown}; it has "
                                        f"{sorted(w.get('params') or {})}")
                label = ",".join(f"{k}={v}" for k, v in params.items())
                return self._resolve({**w, "name": f"{name}[{label}]", "threshold": None,
                                      "params": {**(w.get("params") or {}), **params}})
        raise KeyError(f"{self.name} has no workload {name!r}; it has {self.workload_names()}")

    def reference_threshold(self) -> tuple[str, float] | None:
        """kube's threshold for this test case: the first workload that sets one (a performance
        size, e.g. 5000 nodes), with its name; None when no workload sets one."""
        for w in self.workloads:
            if w.get("threshold") is not None:
                return str(w["name"]), float(w["threshold"])
        return None

    def smallest(self, label: str = "integration-test") -> Workload:
        """The first workload carrying `label` (kube lists them smallest first)."""
        for w in self.workloads:
            if label in (w.get("labels") or []):
                return self._resolve(w)
        raise KeyError(f"{self.name} has no workload labelled {label!r}")

    def _resolve(self, raw: Object) -> Workload:
        params = dict(raw.get("params") or {})
        where = f"{self.config_file}: {self.name}/{raw.get('name')}"
        ops = tuple(_resolve_op(op, params, f"{where} op {i}") for i, op in enumerate(self.template))
        threshold = raw.get("threshold")
        return Workload(
            test_case=self.name,
            name=str(raw["name"]),
            labels=tuple(raw.get("labels") or ()),
            params=params,
            feature_gates={**self.feature_gates, **(raw.get("featureGates") or {})},
            threshold=float(threshold) if threshold is not None else None,
            ops=ops,
            config_dir=self.config_file.parent,
            default_pod_template=self.default_pod_template,
        )


def _substitute(value: Any, params: Mapping[str, Any], where: str) -> Any:
    if isinstance(value, str) and value.startswith("$"):
        name = value[1:]
        if name not in params:
            raise WorkloadError(f"{where}: parameter {value} is not among the workload's params {sorted(params)}")
        return params[name]
    if isinstance(value, dict):
        return {k: _substitute(v, params, where) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, params, where) for v in value]
    return value


def _resolve_op(op: Object, params: Mapping[str, Any], where: str) -> Object:
    if "opcode" not in op:
        raise WorkloadError(f"{where}: an op without opcode: {op}")
    resolved: Object = _substitute(op, params, where)
    if "countParam" in op:
        resolved["count"] = resolved.pop("countParam")
    if "count" in resolved and not isinstance(resolved["count"], int):
        raise WorkloadError(f"{where}: count {resolved['count']!r} is not an integer")
    return resolved


@cache
def _load_file(path: Path) -> tuple[TestCase, ...]:
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise WorkloadError(f"{path}: not YAML: {err}") from err
    if not isinstance(raw, list):
        raise WorkloadError(f"{path}: expected a list of test cases")
    cases = []
    for tc in raw:
        if not isinstance(tc, dict) or "name" not in tc or "workloadTemplate" not in tc:
            raise WorkloadError(f"{path}: a test case needs name and workloadTemplate: {str(tc)[:200]}")
        cases.append(TestCase(
            name=str(tc["name"]),
            config_file=path,
            template=tuple(tc["workloadTemplate"]),
            workloads=tuple(tc.get("workloads") or ()),
            default_pod_template=tc.get("defaultPodTemplatePath"),
            feature_gates=dict(tc.get("featureGates") or {}),
        ))
    return tuple(cases)


def load_test_cases(root: Path | None = None) -> dict[str, TestCase]:
    """Every test case of every performance-config.yaml under scheduler_perf, by name."""
    root = root or scheduler_perf_root()
    found: dict[str, TestCase] = {}
    for path in sorted(root.glob("*/performance-config.yaml")):
        for tc in _load_file(path):
            found[tc.name] = tc
    if not found:
        raise WorkloadFilesNotFound(f"no */performance-config.yaml under {root}")
    return found


def load_template(path: Path, index: int = 0, count: int = 1) -> Object:
    """A pod / node / other object template, with {{.Index}} and {{.Count}} filled in as kube's
    text/template execution does; any other template construct is an error naming the file."""
    try:
        text = path.read_text()
    except OSError as err:
        raise WorkloadError(f"template {path}: {err}") from err
    if "{{" in text:
        def field_value(m: re.Match[str]) -> str:
            if m.group(1) == "Index":
                return str(index)
            if m.group(1) == "Count":
                return str(count)
            raise WorkloadError(f"template {path}: unsupported template field {m.group(0)}")

        text = _TEMPLATE_FIELD.sub(field_value, text)
        if "{{" in text:
            raise WorkloadError(f"template {path}: Go template constructs other than {{{{.Index}}}} and "
                                f"{{{{.Count}}}} are not supported")
    obj = yaml.safe_load(text)
    if not isinstance(obj, dict) or "kind" not in obj:
        raise WorkloadError(f"template {path}: not a Kubernetes object (no kind)")
    return obj


def is_indexed(path: Path) -> bool:
    """Whether a template uses {{.Index}} / {{.Count}} (then each object is rendered on its own)."""
    return "{{" in path.read_text()


def iter_workloads(cases: Mapping[str, TestCase], label: str | None = None) -> Iterator[Workload]:
    for tc in cases.values():
        for w in tc.workloads:
            if label is None or label in (w.get("labels") or []):
                yield tc._resolve(w)
