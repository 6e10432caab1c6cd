"""count_code_lines: what a "N lines of code" claim counts."""

from __future__ import annotations

from pathlib import Path

from minisched.analysis.source import code_lines, count_code_lines

SOURCE = '''"""Module docstring,
over two lines."""

import os  # a comment


class A:
    """Class docstring."""

    def f(self):
        """Function docstring."""
        # only a comment
        text = """a string that is
code, not a docstring"""
        return (text,
                os.sep)
'''


def test_counts_code_and_skips_blank_comment_and_docstring_lines() -> None:
    # import, class, def, the two lines of the string assignment, the two lines of the return
    assert count_code_lines(SOURCE) == 7


def test_tiny_scheduler_is_measured_from_its_file() -> None:
    import minisched.tiny as tiny

    n = code_lines(tiny.__file__)
    assert 150 < n < 400
    assert n < len(Path(tiny.__file__).read_text().splitlines())
