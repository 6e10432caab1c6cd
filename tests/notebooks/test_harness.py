"""The notebook harness itself: normalization, sanitizing, and that `check` really fails."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from minisched.notebooks import (
    check_notebook,
    execute_notebook,
    find_notebooks,
    is_normalized,
    normalize,
    normalize_file,
    normalized_text,
    sanitize,
)
from minisched.notebooks.__main__ import main

CHECKED = "# NBVAL_CHECK_OUTPUT\n"


def _stream(text: str) -> nbformat.NotebookNode:
    return new_output("stream", name="stdout", text=text)


def _write(path: Path, cells: list[nbformat.NotebookNode]) -> Path:
    nb = new_notebook(cells=cells)
    path.write_text(normalized_text(nb), encoding="utf-8")
    return path


# --- normalization ---------------------------------------------------------------------------


def _messy_notebook() -> nbformat.NotebookNode:
    cell = new_code_cell("print('hi')", execution_count=7)
    cell.metadata = {
        "execution": {"iopub.execute_input": "2026-11-29T10:00:00.1Z"},
        "scrolled": True,
        "collapsed": False,
        "tags": ["keep-me"],
    }
    cell.outputs = [
        _stream("h"),
        _stream("i\n"),
        new_output(
            "display_data",
            data={"application/vnd.jupyter.widget-view+json": {"model_id": "abc", "version_major": 2}},
        ),
        new_output("execute_result", data={"text/plain": "3"}, execution_count=7),
    ]
    nb = new_notebook(cells=[new_markdown_cell("# t"), cell])
    nb.metadata = {
        "kernelspec": {"name": "py311", "display_name": "Some env", "language": "python"},
        "language_info": {"name": "python", "version": "3.11.7", "codemirror_mode": {"version": 3}},
        "widgets": {"application/vnd.jupyter.widget-state+json": {"state": {"abc": {}}}},
    }
    return nb


def test_normalize_strips_volatile_metadata_and_widget_state() -> None:
    nb = normalize(_messy_notebook())
    assert set(nb.metadata) == {"kernelspec", "language_info"}
    assert nb.metadata["language_info"] == {"name": "python"}
    assert nb.metadata["kernelspec"]["name"] == "python3"
    code = nb.cells[1]
    assert code.metadata == {"tags": ["keep-me"]}
    assert code.execution_count == 1
    # split stream chunks merged; the widget view (random model id, no static form) dropped
    assert [o["output_type"] for o in code.outputs] == ["stream", "execute_result"]
    assert code.outputs[0]["text"] == "hi\n"
    assert code.outputs[1]["execution_count"] == 1


def test_normalize_is_idempotent_and_does_not_touch_its_input() -> None:
    messy = _messy_notebook()
    once = normalized_text(messy)
    assert messy.metadata["widgets"], "the input must not be modified"
    assert normalized_text(nbformat.reads(once, as_version=4)) == once


def test_is_normalized_and_fix(tmp_path: Path) -> None:
    path = tmp_path / "messy.ipynb"
    nbformat.write(_messy_notebook(), path)
    assert not is_normalized(path)
    assert normalize_file(path) is True
    assert is_normalized(path)
    assert normalize_file(path) is False


# --- sanitizing ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("volatile", "masked"),
    [
        ("at 2026-11-29T16:44:55.123Z", "at <TIMESTAMP>"),
        ("<Foo object at 0x7f3a2b4c5d60>", "<Foo object at 0x<ADDR>>"),
        ("uid 1b4e28ba-2fa1-11d2-883f-0016d3cca427", "uid <UUID>"),
        ("took 12.5 ms", "took <DURATION>"),
        ("took 830 µs", "took <DURATION>"),
        ("took 1.27 s", "took <DURATION>"),
        ("12,400,000 items/s", "<RATE>"),
        ("3.2k pods/s", "<RATE>"),
        ("peak 41.5 MiB", "peak <SIZE>"),
        ("wrote /tmp/abc/x.json", "wrote <TMPPATH>"),
    ],
)
def test_sanitize_masks_volatile_figures(volatile: str, masked: str) -> None:
    assert sanitize(volatile) == masked


@pytest.mark.parametrize(
    "stable", ["backoff 10 s", "alpha=0.5 beta=0.3", "roots 0.894, 0.335", "3/4 pods bound"]
)
def test_sanitize_keeps_results_worth_checking(stable: str) -> None:
    assert sanitize(stable) == stable


# --- finding notebooks -----------------------------------------------------------------------


def test_find_notebooks_skips_checkpoints_and_rejects_missing(tmp_path: Path) -> None:
    (tmp_path / ".ipynb_checkpoints").mkdir()
    _write(tmp_path / ".ipynb_checkpoints" / "a-checkpoint.ipynb", [])
    _write(tmp_path / "b.ipynb", [])
    assert find_notebooks([tmp_path]) == [tmp_path / "b.ipynb"]
    with pytest.raises(FileNotFoundError, match="nope"):
        find_notebooks([tmp_path / "nope"])
    (tmp_path / "c.txt").write_text("x")
    with pytest.raises(ValueError, match="not a notebook"):
        find_notebooks([tmp_path / "c.txt"])


# --- checking against a fresh execution (each starts a kernel: a few seconds) -----------------


def test_check_passes_fresh_outputs_with_volatile_timing(tmp_path: Path) -> None:
    code = CHECKED + "import time\nt = time.perf_counter()\nprint('sum', sum(range(10)))\n"
    code += "print(f'took {(time.perf_counter() - t) * 1e3:.4f} ms')\n"
    stored = [_stream("sum 45\ntook 99.0000 ms\n")]  # the timing differs from any fresh run
    path = _write(tmp_path / "good.ipynb", [new_code_cell(code, execution_count=1, outputs=stored)])
    result = check_notebook(path, time_limit=0.0)  # limit 0: also proves the time limit fails
    assert [p for p in result.problems if "over the" in p], result.problems
    assert not [p for p in result.problems if "differ" in p], result.details
    assert result.seconds > 0


def test_check_fails_on_stale_checked_output(tmp_path: Path) -> None:
    stale = [_stream("3\n")]  # stored when the cell said 1 + 2; the cell now says 1 + 1
    unchecked = new_code_cell("print('volatile', id(object()))", execution_count=2, outputs=[_stream("x\n")])
    path = _write(
        tmp_path / "stale.ipynb",
        [new_code_cell(CHECKED + "print(1 + 1)", execution_count=1, outputs=stale), unchecked],
    )
    result = check_notebook(path)
    assert not result.ok
    assert any("differ" in p for p in result.problems)
    # A report a reader can follow: the cell named, its source, which diff line is which, no colour codes.
    lines = [line.strip() for line in result.details.splitlines()]
    assert "stale.ipynb::Cell 0" in result.details and "print(1 + 1)" in result.details
    assert "'+' lines are the stored output" in result.details
    assert "+ 3" in lines and "- 2" in lines, result.details
    assert "\x1b[" not in result.details
    assert "short test summary info" not in result.details  # its cells are not repeated


def test_check_fails_when_not_normalized_and_cli_exit_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", "true")  # committed notebooks must be clean
    path = tmp_path / "raw.ipynb"
    nb = new_notebook(
        cells=[new_code_cell(CHECKED + "print(2)", execution_count=1, outputs=[_stream("2\n")])]
    )
    nb.metadata["widgets"] = {"state": {}}
    nbformat.write(nb, path)
    assert main(["check", str(path)]) == 1
    out = capsys.readouterr().out
    assert "not normalized" in out and "FAIL" in out
    assert main(["fix", str(path)]) == 0
    assert is_normalized(path)  # (a passing check is covered above; each check starts a kernel)


def test_a_notebook_saved_by_jupyterlab_still_passes_outside_ci(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A student runs a chapter in JupyterLab and saves it: metadata, execution counts, timings
    and widget state change. Their `make test` must not fail for that."""
    monkeypatch.delenv("CI", raising=False)
    path = tmp_path / "saved.ipynb"
    cell = new_code_cell(CHECKED + "print(2)", execution_count=7, outputs=[_stream("2\n")])
    cell.metadata["execution"] = {"iopub.execute_input": "2026-12-01T10:00:00.000Z"}
    cell.metadata["scrolled"] = True
    nb = new_notebook(cells=[cell])
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    nb.metadata["language_info"] = {"name": "python", "version": "3.11.7"}
    nbformat.write(nb, path)
    assert not is_normalized(path)
    assert main(["check", str(path)]) == 0
    out = capsys.readouterr().out
    assert "ok" in out and "not normalized" in out and "ignored" in out
    assert not is_normalized(path)  # the student's file is left as they saved it
    assert not list(tmp_path.glob(".nbcheck-*"))


def test_run_executes_against_the_backend_setting(tmp_path: Path) -> None:
    code = "import os\nassert os.environ['MINISCHED_BACKEND'] == 'context:elsewhere', os.environ['MINISCHED_BACKEND']\n"
    path = _write(tmp_path / "backend.ipynb", [new_code_cell(code)])
    nb, seconds = execute_notebook(path, backend="context:elsewhere")
    assert seconds > 0 and nb.cells[0].execution_count == 1
    with pytest.raises(Exception, match="AssertionError"):
        execute_notebook(path, backend="embedded")


def test_run_cli_fails_a_notebook_over_the_time_limit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path / "quick.ipynb", [new_code_cell("x = 1")])
    assert main(["run", "--backend", "embedded", "--time-limit", "0", str(path)]) == 1
    assert "SLOW" in capsys.readouterr().out


def test_nbval_reads_back_every_rule() -> None:
    from nbval.plugin import get_sanitize_patterns

    from minisched.notebooks import SANITIZERS, sanitize_config

    assert get_sanitize_patterns(sanitize_config()) == [(p, r) for _, p, r in SANITIZERS]
