"""The harness that runs deploy/deployment.yaml's replicas as processes: it must run what the
Deployment runs, changing only what a pod's environment decides (no control plane needed here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from minisched.cli import _parser
from minisched.controlplane.replicas import DEPLOY, deployment_spec, local_args, parse_metrics


def test_the_deployment_manifest_is_read_as_written() -> None:
    spec = deployment_spec()
    assert spec.replicas >= 1
    assert spec.args[0] == "run" and "--in-cluster" in spec.args
    assert spec.env == ("POD_NAME", "MALLOC_ARENA_MAX") and spec.values == (("MALLOC_ARENA_MAX", "2"),)


def test_local_args_swap_only_the_in_cluster_parts() -> None:
    args = ["run", "--in-cluster", "--shards", "--metrics-port=10259", "--metrics-bind-address=0.0.0.0",
            "--shard-lease-duration", "15"]
    out = local_args(args, kubeconfig=Path("/k"), metrics_port=4321, overrides={"--shard-lease-duration": "5"})
    assert out == ["run", "--kubeconfig", "/k", "--shards", "--metrics-port=4321",
                   "--metrics-bind-address=127.0.0.1", "--shard-lease-duration", "5", "--secure-serving"]


def test_overrides_not_in_the_manifest_are_appended() -> None:
    out = local_args(["run", "--in-cluster"], kubeconfig=Path("/k"), metrics_port=1,
                     overrides={"--shard-lease-duration": "3", "--no-capacity-fence": None})
    assert out[:3] == ["run", "--kubeconfig", "/k"]
    assert out[3:] == ["--shard-lease-duration", "3", "--no-capacity-fence", "--secure-serving",
                       "--metrics-port", "1", "--metrics-bind-address", "127.0.0.1"]


def test_dropped_flags_go_with_their_values() -> None:
    args = ["run", "--in-cluster", "--shards", "--shard-group=g", "--shard-lease-duration", "15"]
    out = local_args(args, kubeconfig=Path("/k"), metrics_port=1,
                     drop={"--shards", "--shard-group", "--shard-lease-duration"})
    assert out == ["run", "--kubeconfig", "/k", "--secure-serving", "--metrics-port", "1",
                   "--metrics-bind-address", "127.0.0.1"]


def test_the_translated_deployment_args_parse_as_minisched_run() -> None:
    """The CLI accepts what the harness makes of the Deployment's args: a renamed flag in either
    place fails here, before any process starts."""
    spec = deployment_spec()
    args = _parser().parse_args(local_args(spec.args, kubeconfig=Path("/k"), metrics_port=1))
    assert args.command == "run" and args.kubeconfig == "/k" and not args.in_cluster
    assert args.secure_serving and args.metrics_port == 1 and args.metrics_bind_address == "127.0.0.1"


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (["--in-cluster"], "do not run the scheduler"),
        (["run", "--kubeconfig", "/x"], "do not say --in-cluster"),
    ],
)
def test_args_the_harness_cannot_translate_are_refused(args: list[str], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        local_args(args, kubeconfig=Path("/k"), metrics_port=1)


def test_an_override_must_be_a_flag() -> None:
    with pytest.raises(ValueError, match="not a --flag"):
        local_args(["run", "--in-cluster"], kubeconfig=Path("/k"), metrics_port=1, overrides={"shards": None})


def test_a_manifest_without_the_container_is_refused(tmp_path: Path) -> None:
    text = (DEPLOY / "deployment.yaml").read_text().replace("- name: minisched", "- name: other")
    (tmp_path / "d.yaml").write_text(text)
    with pytest.raises(ValueError, match="no container named 'minisched'"):
        deployment_spec(tmp_path / "d.yaml")


def test_env_the_harness_cannot_give_is_refused(tmp_path: Path) -> None:
    """Literal values (MALLOC_ARENA_MAX) reach the replicas' processes; values from elsewhere than
    the pod's name (a secret, a config map) the harness cannot give, and says so."""
    from minisched.controlplane.replicas import Replicas

    text = (DEPLOY / "deployment.yaml").read_text().replace(
        "          env:\n", "          env:\n            - name: TOKEN\n"
                             "              valueFrom: {secretKeyRef: {name: s, key: k}}\n")
    (tmp_path / "d.yaml").write_text(text)
    with pytest.raises(ValueError, match=r"env \['TOKEN'\]: only POD_NAME and literal values"):
        Replicas(None, None, deployment=tmp_path / "d.yaml")


def test_parse_metrics() -> None:
    text = ("# HELP x help\n# TYPE x counter\nx_total 3\n"
            'y{shard="a b",result="ok"} 1.5\nz 2 1700000000000\n')
    assert parse_metrics(text) == {"x_total": 3.0, 'y{shard="a b",result="ok"}': 1.5, "z": 2.0}
