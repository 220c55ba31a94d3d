"""A JSON reader that keeps where each value starts, for configuration errors as ``file:line:column: reason``.

It reads what accmon's other configuration files accept (the manifest, mqtt.json): JSON plus ``//`` and ``/* */``
comments and trailing commas. Python's :mod:`json` gives the position of a syntax error but not of a value, and a
configuration error is usually a value of the wrong kind in valid JSON ("listen": 8090).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Union

__all__ = ["JSONProblem", "Node", "parse"]

Scalar = Union[None, bool, int, float, str]


@dataclass
class Node:
    """A value and where it starts (1-based line and column, in characters)."""

    value: Union[Scalar, Dict[str, "Node"], List["Node"]]
    line: int
    column: int
    #: For an object: where each key starts.
    keys: Dict[str, "Node"] = field(default_factory=dict)


class JSONProblem(Exception):
    """A syntax error at ``line``:``column``."""

    def __init__(self, line: int, column: int, reason: str) -> None:
        super().__init__(f"{line}:{column}: {reason}")
        self.line = line
        self.column = column
        self.reason = reason


_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
#: Deeper than this is not a configuration file (and Python's recursion has a limit).
MAX_DEPTH = 64


class _Reader:
    def __init__(self, text: str) -> None:
        self.text = text
        self.index = 0
        self.line = 1
        self.line_start = 0

    def problem(self, reason: str, index: int = -1) -> JSONProblem:
        index = self.index if index < 0 else index
        line = self.text.count("\n", 0, index) + 1
        column = index - (self.text.rfind("\n", 0, index) + 1) + 1
        return JSONProblem(line, column, reason)

    def position(self) -> "tuple[int, int]":
        return self.line, self.index - self.line_start + 1

    def advance(self, count: int = 1) -> None:
        for _ in range(count):
            if self.text[self.index] == "\n":
                self.line += 1
                self.line_start = self.index + 1
            self.index += 1

    def skip_space(self) -> None:
        text = self.text
        while self.index < len(text):
            character = text[self.index]
            if character in " \t\r\n\ufeff":
                self.advance()
            elif text.startswith("//", self.index):
                while self.index < len(text) and text[self.index] != "\n":
                    self.advance()
            elif text.startswith("/*", self.index):
                end = text.find("*/", self.index + 2)
                if end < 0:
                    raise self.problem("a /* comment is not closed")
                self.advance(end + 2 - self.index)
            else:
                return

    def value(self, depth: int) -> Node:
        if depth > MAX_DEPTH:
            raise self.problem(f"nested deeper than {MAX_DEPTH} levels")
        self.skip_space()
        if self.index >= len(self.text):
            raise self.problem("the file ends where a value was expected")
        line, column = self.position()
        character = self.text[self.index]
        if character == "{":
            return self.object(depth, line, column)
        if character == "[":
            return self.array(depth, line, column)
        if character == '"':
            return Node(self.string(), line, column)
        for word, meaning in (("true", True), ("false", False), ("null", None)):
            if self.text.startswith(word, self.index):
                self.advance(len(word))
                return Node(meaning, line, column)
        if character == "-" or character.isdigit():
            return Node(self.number(), line, column)
        raise self.problem(f"unexpected {character!r}: expected a value")

    def object(self, depth: int, line: int, column: int) -> Node:
        self.advance()
        members: Dict[str, Node] = {}
        node = Node(members, line, column)
        while True:
            self.skip_space()
            if self.index < len(self.text) and self.text[self.index] == "}":
                self.advance()
                return node
            if self.index >= len(self.text):
                raise self.problem(f"the file ends before the object opened at {line}:{column} is closed")
            if self.text[self.index] != '"':
                raise self.problem("expected a key in double quotes or '}'")
            key_line, key_column = self.position()
            key = self.string()
            if key in members:
                raise JSONProblem(key_line, key_column, f"{key}: the key appears twice in this object")
            node.keys[key] = Node(key, key_line, key_column)
            self.skip_space()
            if self.index >= len(self.text) or self.text[self.index] != ":":
                raise self.problem(f"expected ':' after the key {key!r}")
            self.advance()
            members[key] = self.value(depth + 1)
            self.skip_space()
            if self.index < len(self.text) and self.text[self.index] == ",":
                self.advance()
            elif self.index >= len(self.text):
                raise self.problem(f"the file ends before the object opened at {line}:{column} is closed")
            elif self.text[self.index] != "}":
                raise self.problem("expected ',' or '}' after a member")

    def array(self, depth: int, line: int, column: int) -> Node:
        self.advance()
        items: List[Node] = []
        while True:
            self.skip_space()
            if self.index < len(self.text) and self.text[self.index] == "]":
                self.advance()
                return Node(items, line, column)
            if self.index >= len(self.text):
                raise self.problem(f"the file ends before the array opened at {line}:{column} is closed")
            items.append(self.value(depth + 1))
            self.skip_space()
            if self.index < len(self.text) and self.text[self.index] == ",":
                self.advance()
            elif self.index >= len(self.text):
                raise self.problem(f"the file ends before the array opened at {line}:{column} is closed")
            elif self.text[self.index] != "]":
                raise self.problem("expected ',' or ']' after an element")

    def string(self) -> str:
        start = self.index
        self.advance()
        parts: List[str] = []
        text = self.text
        while True:
            if self.index >= len(text):
                raise self.problem("a string is not closed", start)
            character = text[self.index]
            if character == '"':
                self.advance()
                return "".join(parts)
            if character == "\\":
                escape = text[self.index + 1 : self.index + 2]
                if escape in _ESCAPES:
                    parts.append(_ESCAPES[escape])
                    self.advance(2)
                elif escape == "u" and _is_hex(text[self.index + 2 : self.index + 6]):
                    code = int(text[self.index + 2 : self.index + 6], 16)
                    self.advance(6)
                    low = text[self.index + 2 : self.index + 6]
                    if 0xD800 <= code < 0xDC00 and text.startswith("\\u", self.index) and _is_hex(low):
                        if 0xDC00 <= int(low, 16) < 0xE000:  # a surrogate pair: one character
                            code = 0x10000 + ((code - 0xD800) << 10) + (int(low, 16) - 0xDC00)
                            self.advance(6)
                    parts.append(chr(code))
                else:
                    raise self.problem("an invalid escape in a string")
            elif ord(character) < 0x20:
                raise self.problem("a control character in a string (write it as an escape such as \\n)")
            else:
                parts.append(character)
                self.advance()

    def number(self) -> Union[int, float]:
        start = self.index
        text = self.text
        end = start + 1 if text[start] == "-" else start
        while end < len(text) and (text[end].isdigit() or text[end] in ".eE+-"):
            end += 1
        literal = text[start:end]
        try:
            number: Union[int, float] = float(literal) if any(c in literal for c in ".eE") else int(literal, 10)
        except ValueError:
            raise self.problem(f"{literal!r} is not a number") from None
        if literal.lstrip("-").startswith("0") and len(literal.lstrip("-")) > 1 and literal.lstrip("-")[1].isdigit():
            raise self.problem(f"{literal!r}: a number cannot start with 0")
        self.advance(end - start)
        return number


def _is_hex(text: str) -> bool:
    return len(text) == 4 and all(c in "0123456789abcdefABCDEF" for c in text)


def parse(text: str) -> Node:
    """The value in `text`, with positions.

    :raises JSONProblem: at the first syntax error.
    """
    reader = _Reader(text)
    node = reader.value(0)
    reader.skip_space()
    if reader.index < len(text):
        raise reader.problem("unexpected text after the value")
    return node
