"""Errors in policy text, each pointing at the offending place with a caret under it."""

from __future__ import annotations

from minisched.policy.tokens import Position


class PolicyError(ValueError):
    """Policy text that cannot be used. `position` is where the problem starts in `source`."""

    kind = "policy error"

    def __init__(self, message: str, position: Position, source: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.position = position
        self.source = source

    def with_source(self, source: str) -> PolicyError:
        """The same error, carrying the whole text so that `str()` can show the line."""
        self.source = source
        return self

    def caret(self) -> str:
        """The offending line with a caret under the column, as compilers print it."""
        if not self.source:
            return ""
        lines = self.source.split("\n")
        index = min(self.position.line, len(lines)) - 1
        line = lines[index]
        prefix = line[: self.position.column - 1]
        # Keep tabs in the caret line so the caret lines up however the terminal renders a tab.
        pad = "".join(ch if ch == "\t" else " " for ch in prefix)
        return f"  {line}\n  {pad}^"

    def __str__(self) -> str:
        text = f"{self.kind} at {self.position}: {self.message}"
        display = self.caret()
        return f"{text}\n{display}" if display else text


class PolicySyntaxError(PolicyError):
    """The text is not a well-formed expression (lexing or parsing failed)."""

    kind = "syntax error"


class PolicyTypeError(PolicyError):
    """The expression is well formed but means nothing: unknown function, wrong argument count or
    type, a value a function cannot accept (an unknown taint effect), or a non-boolean policy."""

    kind = "type error"
