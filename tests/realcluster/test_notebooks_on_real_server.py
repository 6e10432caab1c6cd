"""Every chapter and lab notebook also runs against the real API server (etcd + kube-apiserver +
KWOK): selected by the backend setting alone, executed cell by cell, outputs not compared (UIDs,
timings and event order legitimately differ from the embedded run that nbval checks)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from minisched.controlplane.harness import ControlPlane, ControlPlaneOptions
from minisched.notebooks import execute_notebook, find_notebooks
from tests.plugins.controlplane import require_binaries

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = find_notebooks([ROOT / "chapters", ROOT / "labs"])

pytestmark = pytest.mark.realcluster


def test_every_notebook_is_collected():
    # A glob that finds nothing would make the parametrized test below vacuous.
    assert len(NOTEBOOKS) >= 15


@pytest.fixture(scope="module")
def notebook_control_plane(request: pytest.FixtureRequest) -> Iterator[ControlPlane]:
    """A control plane of the notebooks' own: other tests' nodes and pods would change what the
    notebooks see, as a student's fresh kind cluster would not."""
    cp = ControlPlane(ControlPlaneOptions(), require_binaries())
    cp.start()
    yield cp
    cp.stop(keep_logs=request.session.testsfailed > 0)


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[str(p.relative_to(ROOT)) for p in NOTEBOOKS])
def test_notebook_runs_on_the_real_server(notebook: Path, notebook_control_plane: ControlPlane) -> None:
    backend = f"kubeconfig:{notebook_control_plane.kubeconfig}"
    _, seconds = execute_notebook(notebook, backend=backend, cell_timeout=180)
    assert seconds < 180, f"{notebook.name} took {seconds:.0f} s on the real server"
