"""Two students run the same chapters at once on one real control plane, each with their own
MINISCHED_NAMESPACE: both runs pass, each one's objects stay in its namespace, and running a
chapter again (as after a failed run) works."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from minisched.controllers import replicaset as mrs
from minisched.notebooks import execute_notebook
from minisched.resources import CONFIG_MAPS, PODS

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = [ROOT / "chapters" / "ch02_3_reconciler.ipynb", ROOT / "chapters" / "ch02_5_drift.ipynb"]

pytestmark = [pytest.mark.realcluster, pytest.mark.slow]


def test_two_students_share_the_local_control_plane(control_plane: Any, real_cluster: Any) -> None:
    backend = f"kubeconfig:{control_plane.kubeconfig}"
    errors: dict[str, BaseException] = {}

    def student(namespace: str) -> None:
        try:
            for notebook in CHAPTERS:
                execute_notebook(notebook, backend=backend, cell_timeout=180, env={"MINISCHED_NAMESPACE": namespace})
        except BaseException as err:  # reported below, with the student's name
            errors[namespace] = err

    threads = [threading.Thread(target=student, args=(ns,)) for ns in ("student-a", "student-b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not errors, {ns: str(e)[-1500:] for ns, e in errors.items()}
    assert "app-config" not in {c["metadata"]["name"] for c in real_cluster.list(CONFIG_MAPS, "default")["items"]}
    assert not real_cluster.list(mrs.RESOURCE, "default")["items"]
    assert not [p for p in real_cluster.list(PODS, "default")["items"] if p["metadata"]["name"].startswith("web-")]
    # and again, as a student re-running a chapter after a failed run
    execute_notebook(CHAPTERS[0], backend=backend, cell_timeout=180, env={"MINISCHED_NAMESPACE": "student-a"})
