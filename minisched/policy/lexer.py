"""The lexer: policy text to tokens, by hand, one character at a time.

Grammar of tokens:

    IDENT    = letter { letter | digit | "_" }          (letter includes "_")
    VARIABLE = "." IDENT                                  (.node, .pod)
    NUMBER   = digit { digit } [ "." digit { digit } ]
    STRING   = '"' { char | escape } '"'                  escapes: \\" \\\\ \\n \\t \\r \\uXXXX
    punctuation: ( ) [ ] ,
    "#" starts a comment that runs to the end of the line; spaces, tabs and newlines separate tokens.
"""

from __future__ import annotations

from minisched.policy.errors import PolicySyntaxError
from minisched.policy.tokens import Position, Token, TokenKind

_PUNCTUATION = {
    "(": TokenKind.LPAREN,
    ")": TokenKind.RPAREN,
    "[": TokenKind.LBRACKET,
    "]": TokenKind.RBRACKET,
    ",": TokenKind.COMMA,
}
_ESCAPES = {'"': '"', "\\": "\\", "n": "\n", "t": "\t", "r": "\r"}
_HEX = frozenset("0123456789abcdefABCDEF")


def _is_ident_start(ch: str) -> bool:
    return ch == "_" or ("a" <= ch <= "z") or ("A" <= ch <= "Z")


def _is_ident_char(ch: str) -> bool:
    return _is_ident_start(ch) or ("0" <= ch <= "9")


def _is_digit(ch: str) -> bool:
    return "0" <= ch <= "9"  # not str.isdigit(): that accepts '²' and other digits int() rejects


class Lexer:
    def __init__(self, source: str) -> None:
        self.source = source
        self.offset = 0
        self.line = 1
        self.column = 1

    def position(self) -> Position:
        return Position(self.offset, self.line, self.column)

    def _peek(self, ahead: int = 0) -> str:
        i = self.offset + ahead
        return self.source[i] if i < len(self.source) else ""

    def _advance(self) -> str:
        ch = self.source[self.offset]
        self.offset += 1
        if ch == "\n":
            self.line += 1
            self.column = 1
        else:
            self.column += 1
        return ch

    def _error(self, message: str, at: Position | None = None) -> PolicySyntaxError:
        return PolicySyntaxError(message, at or self.position(), self.source)

    def _skip_blanks(self) -> None:
        while self.offset < len(self.source):
            ch = self._peek()
            if ch in " \t\r\n":
                self._advance()
            elif ch == "#":
                while self.offset < len(self.source) and self._peek() != "\n":
                    self._advance()
            else:
                return

    def tokens(self) -> list[Token]:
        out: list[Token] = []
        while True:
            token = self.next_token()
            out.append(token)
            if token.kind is TokenKind.EOF:
                return out

    def next_token(self) -> Token:
        self._skip_blanks()
        start = self.position()
        ch = self._peek()
        if not ch:
            return Token(TokenKind.EOF, "", "", start, start)
        if ch in _PUNCTUATION:
            self._advance()
            return Token(_PUNCTUATION[ch], ch, ch, start, self.position())
        if _is_ident_start(ch):
            name = self._identifier()
            return Token(TokenKind.IDENT, name, name, start, self.position())
        if ch == ".":
            self._advance()
            if not _is_ident_start(self._peek()):
                raise self._error("expected a variable name after '.', such as .node or .pod", start)
            name = self._identifier()
            return Token(TokenKind.VARIABLE, "." + name, name, start, self.position())
        if _is_digit(ch):
            return self._number(start)
        if ch == '"':
            return self._string(start)
        if ch == "'":
            raise self._error("strings use double quotes: \"...\", not '...'")
        if ch == "-":
            raise self._error("negative numbers are not part of the language")
        raise self._error(f"unexpected character {ch!r}")

    def _identifier(self) -> str:
        begin = self.offset
        while _is_ident_char(self._peek()):
            self._advance()
        return self.source[begin : self.offset]

    def _number(self, start: Position) -> Token:
        begin = self.offset
        while _is_digit(self._peek()):
            self._advance()
        if self._peek() == "." and _is_digit(self._peek(1)):
            self._advance()
            while _is_digit(self._peek()):
                self._advance()
        if _is_ident_start(self._peek()):
            # 2Gi is a quantity, and quantities are strings here: say so rather than "unexpected 'G'".
            end = self.offset
            while end < len(self.source) and _is_ident_char(self.source[end]):
                end += 1
            raise self._error(
                f"a number cannot run into letters; write quantities as strings: \"{self.source[begin:end]}\"",
                start,
            )
        text = self.source[begin : self.offset]
        return Token(TokenKind.NUMBER, text, text, start, self.position())

    def _string(self, start: Position) -> Token:
        self._advance()  # opening quote
        chars: list[str] = []
        while True:
            ch = self._peek()
            if not ch or ch == "\n":
                raise self._error("unterminated string (strings end with \" on the same line)", start)
            if ch == '"':
                self._advance()
                break
            if ch == "\\":
                escape_at = self.position()
                self._advance()
                code = self._peek()
                if code in _ESCAPES:
                    self._advance()
                    chars.append(_ESCAPES[code])
                elif code == "u":
                    self._advance()
                    digits = "".join(self._peek(i) for i in range(4))
                    if len(digits) != 4 or not all(d in _HEX for d in digits):
                        raise self._error("\\u must be followed by four hex digits", escape_at)
                    value = int(digits, 16)
                    if 0xD800 <= value <= 0xDFFF:
                        raise self._error("\\u escape names a lone surrogate, which is not a character", escape_at)
                    for _ in range(4):
                        self._advance()
                    chars.append(chr(value))
                else:
                    shown = repr(code) if code else "end of input"
                    raise self._error(f"unknown escape \\{code} ({shown}); use \\\" \\\\ \\n \\t \\r or \\uXXXX",
                                      escape_at)
            else:
                chars.append(self._advance())
        text = self.source[start.offset : self.offset]
        return Token(TokenKind.STRING, text, "".join(chars), start, self.position())


def tokenize(source: str) -> list[Token]:
    """All tokens of `source`, ending with an EOF token. Raises PolicySyntaxError."""
    return Lexer(source).tokens()
