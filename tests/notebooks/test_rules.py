"""The chapter rules on small synthetic notebooks: each rule fails where it should, passes where not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from minisched.notebooks.normalize import normalize
from minisched.notebooks.rules import (
    LESSON_CODE_MARKER,
    SHARED_CLUSTER_BANNER,
    banner_problems,
    cell_length_problems,
    check_rules,
    hygiene_problems,
    namespace_problems,
    node_writing_cells,
)


def _code(source: str, *texts: str) -> nbformat.NotebookNode:
    cell = new_code_cell(source, execution_count=1)
    cell.outputs = [new_output("stream", name="stdout", text=t) for t in texts]
    return cell


def _nb(*cells: nbformat.NotebookNode) -> nbformat.NotebookNode:
    return new_notebook(cells=list(cells))


# --- hygiene -----------------------------------------------------------------------------------


def test_machine_paths_and_kernel_temp_names_in_outputs_fail(tmp_path: Path) -> None:
    nb = _nb(
        _code("profile()", "Profile at /work/wt/h5-p2/minisched/observability/profiling.py:37\n"),
        _code("profile()", "  1 0.065 /tmp/ipykernel_30547/471119056.py:1(planted_slow_work)\n"),
        _code("x", f"wrote {tmp_path}/out.json\n"),
        _code(
            "fine",
            f"minisched/observability/profiling.py:37 and <TMPPATH> and /tmp is a word, {tmp_path}-other\n",
        ),
    )
    problems = hygiene_problems(nb, repository=tmp_path)
    assert [p.split(":")[0] for p in problems] == ["cell 0", "cell 1", "cell 2"]
    assert "/work/wt/h5-p2/minisched/observability/profiling.py" in problems[0]
    assert "/tmp/ipykernel_30547/471119056.py" in problems[1]
    assert str(tmp_path) in problems[2]


def test_a_progress_bar_short_of_its_total_fails_a_finished_one_passes() -> None:
    first_frame = new_code_cell("for x in tqdm(xs): ...", execution_count=1)
    first_frame.outputs = [
        new_output("display_data", data={"text/plain": "loops:   0%|          | 0/5 [00:00<?, ?it/s]"})
    ]
    finished = _code("...", "work: 100%|██████████| 5/5 [00:01<00:00, 4.9it/s]\n")
    terminal = _code("...", "work:   0%|   | 0/3\rwork:  33%|█  | 1/3\rwork: 100%|███| 3/3\n")
    stopped = _code("...", "pods: 40%|████      | 2k/5k\n")
    assert len(hygiene_problems(_nb(first_frame))) == 1
    assert "0/5" in hygiene_problems(_nb(first_frame))[0]
    assert hygiene_problems(_nb(finished, terminal)) == []
    assert len(hygiene_problems(_nb(stopped))) == 1


def test_a_stray_repr_fails_a_chart_or_a_printed_value_passes() -> None:
    def echoed(data: dict[str, Any]) -> nbformat.NotebookNode:
        cell = new_code_cell("x", execution_count=1)
        cell.outputs = [new_output("execute_result", data=data, execution_count=1)]
        return cell

    for text in (
        "99",
        "True",
        "ShutdownReport(seconds=0.004, deadline=20.0)",
        "VBox(children=(HTML(value=1), Tog…",
    ):
        assert len(hygiene_problems(_nb(echoed({"text/plain": text})))) == 1, text
    chart = echoed({"text/plain": "<Chart size 700x320 with 1 Axes>", "image/png": "iVBOR"})
    table = echoed({"text/plain": "{'alpha': 3, 'bravo': 1}"})
    assert hygiene_problems(_nb(chart, table, _code("print(99)", "99\n"))) == []


def _tqdm_widget_state(value: float, total: float) -> tuple[dict[str, Any], dict[str, Any]]:
    """An executed notebook's widget state for one tqdm bar, as nbclient stores it."""

    def model(name: str, **state: Any) -> dict[str, Any]:
        return {"model_name": name, "model_module": "@jupyter-widgets/controls", "state": state}

    state = {
        "box": model("HBoxModel", children=["IPY_MODEL_left", "IPY_MODEL_bar", "IPY_MODEL_right"]),
        "left": model("HTMLModel", value=f"work:\u2007{round(100 * value / total)}%"),
        "bar": model("FloatProgressModel", value=value, max=total),
        "right": model("HTMLModel", value=f"\u2007{value:g}/{total:g}\u2007[00:00&lt;00:00,\u200763.55it/s]"),
    }
    metadata = {
        "widgets": {"application/vnd.jupyter.widget-state+json": {"state": state, "version_major": 2}}
    }
    view = {"application/vnd.jupyter.widget-view+json": {"model_id": "box", "version_major": 2}}
    return metadata, view


def test_normalize_stores_a_finished_bar_finished_and_a_stopped_one_where_it_stopped() -> None:
    for value, expected in ((5, "work: 100%|██████████| 5/5"), (2, "work: 40%|████      | 2/5")):
        metadata, view = _tqdm_widget_state(value, 5)
        cell = new_code_cell("for x in tqdm(range(5)): ...", execution_count=1)
        first_frame = {"text/plain": "work:   0%|          | 0/5 [00:00<?, ?it/s]", **view}
        cell.outputs = [new_output("display_data", data=first_frame)]
        nb = _nb(cell)
        nb.metadata.update(metadata)
        stored = normalize(nb)
        assert stored.cells[0].outputs[0]["data"] == {"text/plain": expected}
        assert "widgets" not in stored.metadata
        assert bool(hygiene_problems(stored)) == (value < 5)


def test_a_widget_that_is_not_a_progress_bar_is_dropped_with_its_repr() -> None:
    cell = new_code_cell("slider", execution_count=1)
    cell.outputs = [
        new_output(
            "display_data",
            data={
                "text/plain": "IntSlider(value=3)",
                "application/vnd.jupyter.widget-view+json": {"model_id": "s"},
            },
        )
    ]
    nb = _nb(cell)
    nb.metadata["widgets"] = {
        "application/vnd.jupyter.widget-state+json": {
            "state": {"s": {"model_name": "IntSliderModel", "state": {}}}
        }
    }
    assert normalize(nb).cells[0].outputs == []
    cell.outputs[0]["data"]["image/png"] = "iVBOR"  # a widget with a static form keeps it
    assert normalize(nb).cells[0].outputs[0]["data"] == {"image/png": "iVBOR"}


# --- banner and namespace ------------------------------------------------------------------------


def test_node_writing_cells_are_found_and_in_memory_nodes_are_not() -> None:
    nb = _nb(
        new_markdown_cell("# Chapter"),
        _code('cluster.create(NODES, make_node("a", cpu="4"))'),
        _code('cluster.create("nodes", make_node("b"))'),
        _code('table.add_node(make_node("c"))\n# cluster.create(NODES, node) in a comment'),
        _code('cluster.patch(NODES, "a", {"spec": {"unschedulable": True}})'),
        _code("cordon(cluster, 'a')"),
        _code("cluster.create(PODS, make_pod('p', namespace=NS))"),
        _code("!kubectl taint nodes kind-worker dedicated=db:NoSchedule"),
        _code('cluster.delete(NODES, "a")'),
        _code("reset(cluster, cluster_wide=True)"),
        _code("reset(cluster)"),
    )
    assert node_writing_cells(nb) == [1, 2, 4, 5, 7, 8, 9]


def test_a_chapter_writing_nodes_needs_the_banner_at_the_top() -> None:
    writes = _code('cluster.create(NODES, make_node("a"))')
    assert banner_problems(_nb(new_markdown_cell("# Chapter"), writes))
    assert banner_problems(
        _nb(new_markdown_cell("# Chapter"), writes, new_markdown_cell(SHARED_CLUSTER_BANNER))
    )
    assert (
        banner_problems(_nb(new_markdown_cell(f"# Chapter\n\n{SHARED_CLUSTER_BANNER}\n\nText."), writes))
        == []
    )
    assert banner_problems(_nb(new_markdown_cell("# Chapter"), _code("table.add_node(make_node('a'))"))) == []


def test_the_namespace_comes_from_the_workbook_setting() -> None:
    good = _nb(
        _code('cluster = connect()\nNS = ensure_namespace(cluster, workbook_namespace("ch01"))'),
        _code('cluster.create(PODS, make_pod("web", namespace=NS), NS)'),
    )
    assert namespace_problems(good) == []
    hard_coded = _nb(
        _code('cluster = connect()\nNS = "p2-trace"\ncluster.create(PODS, make_pod("w", namespace=NS), NS)')
    )
    problems = namespace_problems(hard_coded)
    assert any('hard-coded namespace "p2-trace"' in p and p.startswith("cell 0") for p in problems)
    assert any("never calls workbook_namespace()" in p for p in problems)
    assert namespace_problems(_nb(_code('server.create(PODS, make_pod(n, namespace="default"))')))
    assert namespace_problems(_nb(_code('obj = {"metadata": {"name": "x", "namespace": "team-a"}}')))
    # default namespace by omission, on a cluster
    assert namespace_problems(_nb(_code('cluster = connect()\ncluster.create(PODS, make_pod("web"))')))
    # objects for an in-memory table, no cluster: nothing to place
    assert namespace_problems(_nb(_code('queue.add(make_pod("p"))'))) == []


# --- cell length ---------------------------------------------------------------------------------


def test_long_code_cells_fail_unless_marked_as_the_lessons_code() -> None:
    body = "\n".join(f"x{i} = {i}" for i in range(26))
    assert cell_length_problems(_nb(_code(body)))[0].startswith("cell 0: 26 lines, over 25")
    assert (
        cell_length_problems(_nb(_code("# NBVAL_CHECK_OUTPUT\n" + "\n".join(body.splitlines()[:25])))) == []
    )
    assert cell_length_problems(_nb(_code(f"{LESSON_CODE_MARKER} the reconciler we build\n{body}"))) == []
    marked_late = "# NBVAL_CHECK_OUTPUT\n" + f"{LESSON_CODE_MARKER} the loop itself\n" + body
    assert cell_length_problems(_nb(_code(marked_late))) == []
    assert cell_length_problems(_nb(_code(f"x = 1\n{LESSON_CODE_MARKER} too late\n{body}")))


def test_banner_and_namespace_apply_to_chapters_only(tmp_path: Path) -> None:
    nb = _nb(new_markdown_cell("# Lab"), _code('cluster.create(NODES, make_node("a"))\nNS = "team-a"'))
    (tmp_path / "chapters").mkdir()
    (tmp_path / "labs").mkdir()
    for where in ("chapters", "labs"):
        nbformat.write(nb, tmp_path / where / "x.ipynb")
    chapter = check_rules(tmp_path / "chapters" / "x.ipynb")
    lab = check_rules(tmp_path / "labs" / "x.ipynb")
    assert chapter["banner"] and chapter["namespace"]
    assert "banner" not in lab and "namespace" not in lab and "hygiene" in lab


def test_a_bars_first_and_last_frames_sanitize_alike() -> None:
    """A checked cell with a progress bar: nbval compares the fresh run's first frame with the
    stored last frame, so both must mask to the same text."""
    from minisched.notebooks.sanitize import sanitize

    first = "work:   0%|          | 0/5 [00:00<?, ?it/s]\nresult 7\n"
    last = "work: 100%|██████████| 5/5\nresult 7\n"
    assert sanitize(first) == sanitize(last) == "work:<PROGRESS>\nresult 7\n"
    assert sanitize("a 50%|x of it") == "a 50%|x of it"
