"""Tokens of the policy language and where they sit in the source text."""

from __future__ import annotations

import enum
from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Position:
    """A place in the source: `offset` counts characters from 0; `line` and `column` count from 1."""

    offset: int
    line: int
    column: int

    def __str__(self) -> str:
        return f"line {self.line}, column {self.column}"


START = Position(0, 1, 1)


class TokenKind(enum.Enum):
    IDENT = "identifier"
    STRING = "string"
    NUMBER = "number"
    VARIABLE = "variable"  # .node, .pod: a dot glued to a name
    LPAREN = "'('"
    RPAREN = "')'"
    LBRACKET = "'['"
    RBRACKET = "']'"
    COMMA = "','"
    EOF = "end of input"


@dataclass(frozen=True)
class Token:
    kind: TokenKind
    text: str  # exactly as written in the source (quotes and escapes included)
    value: str  # decoded: a string's contents, a variable's name without the dot, else == text
    start: Position
    end: Position  # just past the last character

    def describe(self) -> str:
        """How an error message names this token: "identifier 'foo'", "')'", "end of input"."""
        if self.kind is TokenKind.STRING:
            return f"string {self.text}"
        if self.kind in (TokenKind.IDENT, TokenKind.NUMBER, TokenKind.VARIABLE):
            return f"{self.kind.value} '{self.text}'"
        return self.kind.value
