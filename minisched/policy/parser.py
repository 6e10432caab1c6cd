"""A recursive-descent parser: tokens to an AST. Nothing is evaluated and nothing is `eval`ed.

    policy     = expression EOF
    expression = call | "true" | "false" | STRING | NUMBER | VARIABLE | list
    call       = IDENT "(" [ expression { "," expression } [ "," ] ] ")"
    list       = "[" [ expression { "," expression } [ "," ] ] "]"

One function per rule. Nesting is capped (MAX_DEPTH) so that hostile text gets a syntax error,
never a RecursionError.
"""

from __future__ import annotations

from decimal import Decimal

from minisched.policy import ast
from minisched.policy.errors import PolicySyntaxError
from minisched.policy.lexer import tokenize
from minisched.policy.tokens import START, Token, TokenKind

MAX_DEPTH = 64
MAX_LENGTH = 100_000  # characters; a policy is a few lines


class Parser:
    def __init__(self, source: str) -> None:
        if len(source) > MAX_LENGTH:
            raise PolicySyntaxError(
                f"policy text is {len(source)} characters long; the limit is {MAX_LENGTH}",
                START,
                "",
            )
        self.source = source
        self.tokens = tokenize(source)
        self.index = 0
        self.depth = 0

    @property
    def current(self) -> Token:
        return self.tokens[self.index]

    def _take(self) -> Token:
        token = self.tokens[self.index]
        if token.kind is not TokenKind.EOF:
            self.index += 1
        return token

    def _error(self, message: str, token: Token | None = None) -> PolicySyntaxError:
        at = (token or self.current).start
        return PolicySyntaxError(message, at, self.source)

    def parse_policy(self) -> ast.Expr:
        if self.current.kind is TokenKind.EOF:
            raise PolicySyntaxError(
                "the policy is empty; write an expression such as hasLabel(\"gpu\", \"true\")", START, self.source
            )
        expr = self.parse_expression()
        if self.current.kind is not TokenKind.EOF:
            raise self._error(
                f"expected end of input after a complete expression, found {self.current.describe()}"
                " (combine expressions with and(...) or or(...))"
            )
        return expr

    def parse_expression(self) -> ast.Expr:
        token = self.current
        if self.depth >= MAX_DEPTH:
            raise self._error(f"expression nested more than {MAX_DEPTH} levels deep")
        kind = token.kind
        if kind is TokenKind.IDENT:
            if token.value in ast.KEYWORDS:
                self._take()
                return ast.BoolLit(token.value == "true", span=ast.Span(token.start, token.end))
            return self.parse_call()
        if kind is TokenKind.STRING:
            self._take()
            return ast.StringLit(token.value, span=ast.Span(token.start, token.end))
        if kind is TokenKind.NUMBER:
            self._take()
            return ast.NumberLit(Decimal(token.value), span=ast.Span(token.start, token.end))
        if kind is TokenKind.VARIABLE:
            self._take()
            return ast.Variable(token.value, span=ast.Span(token.start, token.end))
        if kind is TokenKind.LBRACKET:
            return self.parse_list()
        raise self._error(f"expected an expression, found {token.describe()}")

    def _parse_items(self, closing: TokenKind, what: str) -> tuple[tuple[ast.Expr, ...], Token]:
        """Comma-separated expressions up to `closing` (a trailing comma is allowed)."""
        items: list[ast.Expr] = []
        self.depth += 1
        try:
            while self.current.kind is not closing:
                items.append(self.parse_expression())
                if self.current.kind is TokenKind.COMMA:
                    self._take()
                elif self.current.kind is not closing:
                    raise self._error(
                        f"expected ',' or {closing.value} after {what}, found {self.current.describe()}"
                    )
        finally:
            self.depth -= 1
        return tuple(items), self._take()

    def parse_call(self) -> ast.Call:
        name = self._take()
        if self.current.kind is not TokenKind.LPAREN:
            raise self._error(
                f"expected '(' after {name.value!r}: names are functions, called as {name.value}(...)"
                f" (the only bare words are true and false), found {self.current.describe()}"
            )
        self._take()
        args, close = self._parse_items(TokenKind.RPAREN, f"an argument of {name.value}")
        return ast.Call(name.value, args, span=ast.Span(name.start, close.end))

    def parse_list(self) -> ast.ListLit:
        open_ = self._take()
        items, close = self._parse_items(TokenKind.RBRACKET, "a list item")
        return ast.ListLit(items, span=ast.Span(open_.start, close.end))


def parse(source: str) -> ast.Expr:
    """The AST of `source`. Raises PolicySyntaxError (and nothing else) on any bad text."""
    return Parser(source).parse_policy()
