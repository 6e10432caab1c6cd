"""§3.2: lexer, parser and printer of the policy language."""

from __future__ import annotations

import contextlib
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minisched.policy import PolicySyntaxError, ast, parse, to_text
from minisched.policy.lexer import tokenize
from minisched.policy.parser import MAX_DEPTH
from minisched.policy.tokens import Position, TokenKind

BOOK = """and(
    hasLabel("node.kubernetes.io/instance-type", "g4dn.xlarge"),
    matchesTaint("nvidia.com/gpu", "NoSchedule", "Equal"),
    not(hasLabel("environment", "staging"))
  )"""


def test_book_policy_parses_to_the_expected_tree() -> None:
    expr = parse(BOOK)
    assert expr == ast.Call("and", (
        ast.Call("hasLabel", (ast.StringLit("node.kubernetes.io/instance-type"), ast.StringLit("g4dn.xlarge"))),
        ast.Call("matchesTaint", (ast.StringLit("nvidia.com/gpu"), ast.StringLit("NoSchedule"),
                                  ast.StringLit("Equal"))),
        ast.Call("not", (ast.Call("hasLabel", (ast.StringLit("environment"), ast.StringLit("staging"))),)),
    ))


def test_positions_are_line_column_and_offset() -> None:
    expr = parse(BOOK)
    assert isinstance(expr, ast.Call)
    taint_call = expr.args[1]
    assert taint_call.span.start == Position(offset=BOOK.index("matchesTaint"), line=3, column=5)
    assert taint_call.span.end.line == 3
    not_call = expr.args[2]
    assert isinstance(not_call, ast.Call)
    assert not_call.args[0].span.start.column == 9
    assert expr.span.end == Position(len(BOOK), 5, 4)


def test_tokens_of_every_kind() -> None:
    kinds = [t.kind for t in tokenize('f(.pod, "a\\"b", 12.5, [x()], true) # comment')]
    assert kinds == [
        TokenKind.IDENT, TokenKind.LPAREN, TokenKind.VARIABLE, TokenKind.COMMA, TokenKind.STRING,
        TokenKind.COMMA, TokenKind.NUMBER, TokenKind.COMMA, TokenKind.LBRACKET, TokenKind.IDENT,
        TokenKind.LPAREN, TokenKind.RPAREN, TokenKind.RBRACKET, TokenKind.COMMA, TokenKind.IDENT,
        TokenKind.RPAREN, TokenKind.EOF,
    ]


def test_string_escapes_are_decoded() -> None:
    assert parse('"a\\"b\\\\c\\n\\u00e9"') == ast.StringLit('a"b\\c\né')


def test_trailing_commas_and_comments_are_allowed() -> None:
    text = 'and(\n  # GPU nodes only\n  hasLabelKey("gpu"),\n  labelIn("zone", ["a", "b",]),\n)'
    assert to_text(parse(text)) == 'and(hasLabelKey("gpu"), labelIn("zone", ["a", "b"]))'


@pytest.mark.parametrize(
    ("text", "line", "column", "fragment"),
    [
        ('and(hasLabel("a", "b") hasLabel("c", "d"))', 1, 24, "expected ',' or ')'"),
        ('hasLabel("a", "b"', 1, 18, "found end of input"),
        ('and(\n  hasLabel("a", "b"),\n  )) ', 3, 4, "expected end of input"),
        ('hasLabel("a\n", "b")', 1, 10, "unterminated string"),
        ("hasLabel('a', 'b')", 1, 10, "double quotes"),
        ('hasLabel("a", "b") and', 1, 20, "expected end of input"),
        ("gpu", 1, 4, "expected '(' after 'gpu'"),
        ('f("\\q")', 1, 4, "unknown escape"),
        ('f("\\u12")', 1, 4, "four hex digits"),
        ("cpuAtLeast(2Gi)", 1, 12, '"2Gi"'),
        ("f(. node)", 1, 3, "variable name after '.'"),
        ("f(-1)", 1, 3, "negative"),
        ("f(;)", 1, 3, "unexpected character ';'"),
        ("", 1, 1, "empty"),
        ("   \n # only a comment", 1, 1, "empty"),
        ("f(,)", 1, 3, "expected an expression, found ','"),
    ],
)
def test_syntax_errors_point_at_the_offending_column(text: str, line: int, column: int, fragment: str) -> None:
    with pytest.raises(PolicySyntaxError) as info:
        parse(text)
    err = info.value
    assert (err.position.line, err.position.column) == (line, column), str(err)
    assert fragment in err.message
    assert err.position.offset == sum(len(x) + 1 for x in text.split("\n")[: line - 1]) + column - 1


def test_caret_display_sits_under_the_column() -> None:
    with pytest.raises(PolicySyntaxError) as info:
        parse('and(\n\thasLabel("a", "b"),\n\tnot(hasLabel("c" "d")))')
    lines = str(info.value).splitlines()
    assert lines[0].startswith("syntax error at line 3, column 19:")
    assert lines[1] == '  \tnot(hasLabel("c" "d")))'
    assert lines[2] == "  \t" + " " * 17 + "^"


def test_deep_nesting_is_a_syntax_error_not_a_crash() -> None:
    with pytest.raises(PolicySyntaxError, match="nested more than"):
        parse("not(" * (MAX_DEPTH + 5) + "true" + ")" * (MAX_DEPTH + 5))
    with pytest.raises(PolicySyntaxError, match="nested more than"):
        parse("[" * 10_000)
    parse("not(" * (MAX_DEPTH - 1) + "true" + ")" * (MAX_DEPTH - 1))


def test_printer_breaks_long_calls_like_the_book() -> None:
    text = to_text(parse(BOOK), width=70)
    assert text == (
        "and(\n"
        '  hasLabel("node.kubernetes.io/instance-type", "g4dn.xlarge"),\n'
        '  matchesTaint("nvidia.com/gpu", "NoSchedule", "Equal"),\n'
        '  not(hasLabel("environment", "staging"))\n'
        ")"
    )


def test_printer_escapes_what_the_lexer_needs_escaped() -> None:
    assert to_text(ast.StringLit('a"b\\c\nd\x01')) == '"a\\"b\\\\c\\nd\\u0001"'
    assert to_text(ast.NumberLit(Decimal("1E+3"))) == "1000"


# --- properties ----------------------------------------------------------------------------------

@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=200))
def test_parser_never_crashes_on_arbitrary_text(text: str) -> None:
    try:
        parse(text)
    except PolicySyntaxError as err:
        assert 0 <= err.position.offset <= len(text)
        str(err)  # the caret display works for any position


_ALPHABET = st.sampled_from('andornothasLabel(),[]".\\ \n#0123456789x_pou')


@settings(max_examples=300)
@given(st.text(alphabet=_ALPHABET, max_size=80))
def test_parser_never_crashes_on_almost_valid_text(text: str) -> None:
    with contextlib.suppress(PolicySyntaxError):
        parse(text)


_names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True).filter(lambda s: s not in ast.KEYWORDS)
_leaves = st.one_of(
    st.builds(ast.StringLit, st.text(max_size=12)),
    st.builds(ast.NumberLit, st.decimals(min_value=0, max_value=10**6, places=3)),
    st.builds(ast.BoolLit, st.booleans()),
    st.builds(ast.Variable, _names),
)
_exprs = st.recursive(
    _leaves,
    lambda children: st.one_of(
        st.builds(ast.Call, _names, st.lists(children, max_size=4).map(tuple)),
        st.builds(ast.ListLit, st.lists(children, max_size=3).map(tuple)),
    ),
    max_leaves=25,
)


@settings(max_examples=200)
@given(_exprs, st.sampled_from([None, 0, 20, 80]))
def test_print_then_parse_gives_the_same_ast(expr: ast.Expr, width: int | None) -> None:
    text = to_text(expr, width=width)
    assert parse(text) == expr
    assert to_text(parse(text), width=width) == text  # the printed form is a fixed point
