"""`python -m minisched.controlplane up` (make cluster-local) starts the kind-like plane unless told
otherwise, and shares its kubeconfig without taking another running plane's away; no binaries are
needed to check either (the plane is a stand-in)."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import minisched.controlplane.__main__ as cli
from minisched.cluster.local import LOCAL_KUBECONFIG_ENV
from minisched.controlplane import ControlPlaneOptions


class _Started(Exception):
    pass


@pytest.fixture(autouse=True)
def shared_kubeconfig(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """`up`'s shared kubeconfig path, in tmp_path: never the machine's own (a plane may run there)."""
    path = tmp_path / "shared" / "kubeconfig"
    monkeypatch.setenv(LOCAL_KUBECONFIG_ENV, str(path))
    return path


@pytest.fixture
def requested(monkeypatch: pytest.MonkeyPatch) -> list[ControlPlaneOptions]:
    """The options `up` starts its control plane with (the start itself is cut short)."""
    seen: list[ControlPlaneOptions] = []

    class FakeControlPlane:
        def __init__(self, options: ControlPlaneOptions, *args: Any) -> None:
            seen.append(options)

        def __enter__(self) -> None:
            raise _Started

        def __exit__(self, *exc: Any) -> None:
            return None

    monkeypatch.setattr(cli, "find_binaries", lambda: None)
    monkeypatch.setattr(cli, "ControlPlane", FakeControlPlane)
    return seen


def test_up_starts_the_kind_like_plane_by_default(requested: list[ControlPlaneOptions]) -> None:
    with pytest.raises(_Started):
        cli.main(["up"])
    assert requested[0].kind_like is True


def test_up_plane_envtest_starts_the_lighter_plane(requested: list[ControlPlaneOptions]) -> None:
    with pytest.raises(_Started):
        cli.main(["up", "--plane", "envtest"])
    assert requested[0].kind_like is False


def test_up_help_says_what_each_plane_is(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["up", "--help"])
    out = capsys.readouterr().out
    assert "--plane {kind,envtest}" in out and "kind (default)" in out


def _kubeconfig(server: str) -> str:
    return (f"apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\n"
            "contexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\nusers:\n- name: u\n")


@pytest.fixture
def listening() -> Iterator[str]:
    """The URL of something that accepts connections, as a running plane's API server does."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield f"https://127.0.0.1:{sock.getsockname()[1]}"


def _closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"https://127.0.0.1:{sock.getsockname()[1]}"


class _Process:
    def __init__(self, running: Callable[[], bool]) -> None:
        self.running = running


def _plane_that_dies(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, while_running: Callable[[], None],
                     while_starting: Callable[[], None] = lambda: None) -> None:
    """`up` runs a stand-in plane whose one process exits at the first check, after `while_running`
    (`while_starting` runs as the plane starts)."""

    def running() -> bool:
        while_running()
        return False

    class FakeControlPlane:
        def __init__(self, options: ControlPlaneOptions, *args: Any) -> None:
            self.kubeconfig = tmp_path / "this-plane-kubeconfig"
            self.kubeconfig.write_text(_kubeconfig("https://127.0.0.1:1"))
            self.server, self.log_dir = "https://127.0.0.1:1", tmp_path
            self.processes = {"kube-apiserver": _Process(running)}

        def __enter__(self) -> FakeControlPlane:
            while_starting()
            return self

        def __exit__(self, *exc: Any) -> None:
            return None

        def mark_failed(self) -> None:
            pass

    monkeypatch.setattr(cli, "find_binaries", lambda: None)
    monkeypatch.setattr(cli, "ControlPlane", FakeControlPlane)


def test_stopping_removes_the_shared_kubeconfig_while_it_is_this_planes(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, shared_kubeconfig: Path) -> None:
    seen: list[bool] = []
    _plane_that_dies(monkeypatch, tmp_path, lambda: seen.append(shared_kubeconfig.exists()))
    assert cli.main(["up", "--plane", "envtest"]) == 1
    assert seen == [True] and not shared_kubeconfig.exists()


def test_stopping_leaves_another_planes_kubeconfig_in_place(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, shared_kubeconfig: Path) -> None:
    other = _kubeconfig("https://127.0.0.1:2")
    # another plane writes its kubeconfig over this one's while this one runs (both started with none there)
    _plane_that_dies(monkeypatch, tmp_path, lambda: shared_kubeconfig.write_text(other))
    assert cli.main(["up", "--plane", "envtest"]) == 1
    assert shared_kubeconfig.read_text() == other


def test_up_refuses_while_the_shared_kubeconfigs_plane_still_answers(
        requested: list[ControlPlaneOptions], shared_kubeconfig: Path, listening: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    shared_kubeconfig.parent.mkdir(parents=True)
    shared_kubeconfig.write_text(_kubeconfig(listening))
    assert cli.main(["up"]) == 1
    assert requested == []  # refused before starting anything
    err = capsys.readouterr().err
    assert str(shared_kubeconfig) in err and listening in err and LOCAL_KUBECONFIG_ENV in err
    assert shared_kubeconfig.read_text() == _kubeconfig(listening)


def test_up_takes_over_a_kubeconfig_whose_plane_is_gone(
        requested: list[ControlPlaneOptions], shared_kubeconfig: Path) -> None:
    shared_kubeconfig.parent.mkdir(parents=True)
    shared_kubeconfig.write_text(_kubeconfig(_closed_port_url()))
    with pytest.raises(_Started):
        cli.main(["up"])
    assert len(requested) == 1


def test_a_plane_that_came_up_meanwhile_keeps_the_shared_kubeconfig(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, shared_kubeconfig: Path, listening: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    other = _kubeconfig(listening)

    def another_plane_comes_up() -> None:  # both `up`s found the path free; the other one finished first
        shared_kubeconfig.parent.mkdir(parents=True)
        shared_kubeconfig.write_text(other)

    _plane_that_dies(monkeypatch, tmp_path, lambda: None, while_starting=another_plane_comes_up)
    assert cli.main(["up", "--plane", "envtest"]) == 1
    assert shared_kubeconfig.read_text() == other
    captured = capsys.readouterr()
    assert "warning: another control plane" in captured.err and listening in captured.err
    assert captured.out.strip() == str(tmp_path / "this-plane-kubeconfig")  # this plane's own, printed
