"""The prose check: a figure in markdown is shown by an output, set by code, or tagged as quoted."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from minisched.notebooks.__main__ import main
from minisched.notebooks.normalize import normalized_text
from minisched.notebooks.prose import check_prose, figures_in, judge_prose

LATENCY_OUTPUT = "idle  p50   0.11 ms  p99   4.88 ms\nbusy  p50  12.47 ms  p99  19.22 ms\n"


def _notebook(prose: str, output: str = LATENCY_OUTPUT, source: str = "run()") -> nbformat.NotebookNode:
    code = new_code_cell(source, execution_count=1)
    code.outputs = [new_output("stream", name="stdout", text=output)]
    return new_notebook(cells=[new_markdown_cell("# A chapter"), code, new_markdown_cell(prose)])


def _figures(prose: str, **kwargs: str) -> list[str]:
    return [p.figure for p in check_prose(_notebook(prose, **kwargs))]


def test_a_figure_the_outputs_show_passes_and_the_same_figure_changed_fails() -> None:
    assert _figures("Idle, the p50 is 0.11 ms and the busy p99 is 19.22 ms.") == []
    problems = check_prose(_notebook("Idle, the p50 is 0.13 ms and the busy p99 is 19.22 ms."))
    assert [(p.cell, p.figure) for p in problems] == [(2, "0.13 ms")]
    assert "Idle, the p50 is 0.13 ms" in problems[0].sentence
    assert "cell 2: '0.13 ms'" in str(problems[0])


@pytest.mark.parametrize(
    "prose",
    [
        "A busy neighbour makes the median 12.5 ms.",  # 12.47 rounds to 12.5
        "A busy neighbour makes the median 12 ms late, more or less.".replace("12 ms", "12.47 ms"),
        "Idle, a wake-up is 110 µs late.",  # 0.11 ms in another unit
        "Idle, a wake-up is 110 us late.",
        "Idle, a wake-up is 0.000110 s late.",
        "The worst busy tick was about 19 ms late.",
        "Busy ticks are 12.5–19.2 ms late.",  # a range: both ends shown
        "Busy ticks are between 12.5 and 19.2 ms late.",
    ],
)
def test_rounding_units_and_ranges_pass(prose: str) -> None:
    assert _figures(prose) == []


@pytest.mark.parametrize(
    ("prose", "figure"),
    [
        ("A busy neighbour makes the median 12.6 ms.", "12.6 ms"),  # 12.47 does not round to 12.6
        ("A busy neighbour makes the median 13 ms.", "13 ms"),  # nor to 13
        ("Idle, a wake-up is 120 µs late.", "120 µs"),
        ("Busy ticks are 12.5–25 ms late.", "12.5–25 ms"),  # one end not shown
        ("The list takes 36× numpy's time.", "36×"),
        ("The cache hit rate is 95%.", "95%"),
        ("Idle, a wake-up is late by tens of microseconds.", "tens of microseconds"),
        ("Crossing into wasm costs microseconds.", "costs microseconds"),
        ("The report says fourteen lines.", "fourteen lines"),
        ("The scheduler bound 250 pods.", "250 pods"),
        ("It scheduled 1,200 pods/s.", "1,200 pods/s"),
        ("The p99 of 5.9 is what matters.", "p99 of 5.9"),
        ("It came out: 7 and then 250 pods.", "250 pods"),
    ],
)
def test_a_figure_no_output_shows_fails(prose: str, figure: str) -> None:
    assert _figures(prose) == [figure]


def test_a_list_of_numbers_is_data_each_one_checked() -> None:
    problems = check_prose(_notebook("Twenty nodes over three replicas came out 2, 12 and 6."))
    assert [(p.figure, p.why.split(":")[0]) for p in problems] == [
        ("2, 12 and 6", "its 2"),
        ("2, 12 and 6", "its 6"),
    ]
    assert _figures("Twenty nodes came out 2, 12 and 6.", output="shares: [2, 12, 6]\n") == []


def test_thousands_separators_rates_percent_and_ratio_in_outputs() -> None:
    output = "scheduled 12,400 pods/s; hit rate 0.95; list/numpy: 36.0x; 41.5 MiB\n"
    prose = "It scheduled 12,400 pods/s (12.4k pods/s), hit 95% of the time, 36× slower, 41.5 MiB."
    assert _figures(prose, output=output) == []
    assert _figures("It held 43.5 MB.", output=output) == []  # 41.5 MiB = 43.5 MB
    assert _figures("It held 45 MB.", output=output) == ["45 MB"]
    assert _figures("Nodes of 16Gi and 16 GiB.", source='make_node("a", memory="16Gi")') == []
    assert _figures("Nodes of 32Gi.", source='make_node("a", memory="16Gi")') == ["32Gi"]


def test_a_number_printed_with_another_unit_shows_nothing() -> None:
    assert _figures("A tick every 7 ms.", output="scheduled 7 pods in 2.5 s\n") == ["7 ms"]
    assert _figures("A tick every 7 ms.", output="interval  7\n") == []  # bare: the unit is in the header
    assert _figures("Scheduled 7 pods.", output="interval 7 ms\n") == []  # a count matches any number
    assert _figures("A 7% share.", output="took 7 ms\n") == ["7%"]
    # a range in an output gives its unit to both ends
    assert _figures("Runs spread from 466 to 740 µs.", output="runs 466 to 740 µs, median 631 µs\n") == []
    assert _figures("The fastest took 0.47 ms.", output="runs 466–740 µs\n") == []


def test_an_input_set_in_a_code_cell_passes() -> None:
    source = "N = 100_000\nticker = TickerLateness(0.010)\nnode = make_node(memory='512Mi')\nx = 10**6"
    prose = "Sum 100,000 ints, a tick every 10 ms, nodes of 512 MiB, and 1,000,000 pods."
    assert _figures(prose, source=source) == []
    assert _figures("Sum 200,000 pods.", source=source) == ["200,000 pods"]
    assert _figures("A tick every 20 ms.", source=source) == ["20 ms"]


def test_the_quoted_tag_exempts_its_own_sentence_only() -> None:
    assert _figures("The book claims 10–20 µs *(quoted: the book, §2.1)*.") == []
    assert _figures("The book claims 10–20 µs. *(quoted: the book, §2.1)*") == []  # tag right after
    # the tag in another sentence does not exempt
    prose = "The book claims 10–20 µs. That is wrong. Go is fast *(quoted: the book, §2.1)*."
    assert _figures(prose) == ["10–20 µs", "10–20 µs"]  # each end named
    assert _figures("The book claims 10 µs (quoted: the book).") == ["10 µs"]  # not the tag
    assert _figures("The book claims 10 µs. <!-- *(quoted: the book)* -->") == ["10 µs"]


def test_what_is_not_a_figure() -> None:
    prose = (
        "See §2.1 and section 3.3 of the book (2024), Go 1.14 and Kubernetes 1.35, v0.8.0, "
        "python3.13t, p99, `sleep(0.5 s)`, $2^{10}$ ms, the three layers and two backends, "
        "[a link](https://example.com/5ms), and the book's 503s."
    )
    assert _figures(prose) == []
    assert [f.text for _, f in figures_in("the three layers took 1.5 s")] == ["1.5 s"]


def test_approximations_and_bounds() -> None:
    output = "node as an API dict: 1437 bytes per node; lateness 4.88 ms\n"
    assert _figures("About 1,400 bytes per node.", output=output) == []
    assert _figures("1,400 bytes per node.", output=output) == ["1,400 bytes"]
    assert _figures("Never more than 5 ms late.", output=output) == []
    assert _figures("Never more than 4 ms late.", output=output) == ["4 ms"]
    assert _figures("Sometimes more than 4 ms late.", output=output) == []
    assert _figures("Sometimes more than 0.4 ms late.", output=output) == [
        "0.4 ms"
    ]  # 10x: not what it showed


def test_failures_name_the_cell_figure_and_sentence_on_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = tmp_path / "good.ipynb"
    good.write_text(normalized_text(_notebook("Idle p50: 0.11 ms.")), encoding="utf-8")
    bad = tmp_path / "bad.ipynb"
    bad.write_text(normalized_text(_notebook("Idle p50: 0.2 ms. Fine.")), encoding="utf-8")
    assert main(["prose", str(good)]) == 0
    assert main(["prose", str(good), str(bad)]) == 1
    out = capsys.readouterr().out
    assert "cell 2: '0.2 ms'" in out and "sentence: 'Idle p50: 0.2 ms.'" in out


def test_explain_lists_every_figure_and_what_shows_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    prose = "Idle p50 0.11 ms. The book's 10 µs *(quoted: the book, §1)*. A tick every 10 ms. Then 3.3 ms."
    nb = _notebook(prose, source="TickerLateness(0.010)")
    assert [(j.figure.text, j.shown_by) for j in judge_prose(nb)] == [
        ("0.11 ms", "output"),
        ("10 µs", "quoted"),
        ("10 ms", "code"),
        ("3.3 ms", ""),
    ]
    path = tmp_path / "x.ipynb"
    path.write_text(normalized_text(nb), encoding="utf-8")
    assert main(["prose", "--explain", str(path)]) == 1
    assert "cell 2: '3.3 ms' (3.3): NOT SHOWN" in capsys.readouterr().out
