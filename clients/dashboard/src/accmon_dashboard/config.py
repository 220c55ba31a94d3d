"""The configuration file, ``/etc/accmon/dashboard.json``: JSON with comments and trailing commas (as mqtt.json and
the manifest), one object whose keys are those of :data:`.settings.FIELDS`.

Every problem is reported as ``FILE:LINE:COLUMN: reason``, all of them at once.
"""

from __future__ import annotations

import difflib
import os
import stat
from typing import List, Optional, Tuple

from .jsonpos import JSONProblem, Node, parse
from .settings import FIELDS_BY_KEY, Settings

__all__ = ["ConfigProblems", "MAX_CONFIG_BYTES", "load"]

#: A configuration file longer than this is refused: it cannot be one.
MAX_CONFIG_BYTES = 1 << 20


class ConfigProblems(Exception):
    """The file's problems, each ``FILE:LINE:COLUMN: reason`` (or ``FILE: reason`` for the file as a whole)."""

    def __init__(self, problems: List[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


def _read(path: str) -> str:
    """The file's text: a regular file, opened without following a final symbolic link to something else, at most
    :data:`MAX_CONFIG_BYTES`, UTF-8."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        raise ConfigProblems([f"{path}: cannot open it: {error.strerror}"]) from None
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigProblems([f"{path}: not a regular file"])
        if info.st_size > MAX_CONFIG_BYTES:
            raise ConfigProblems([f"{path}: longer than {MAX_CONFIG_BYTES} bytes: is this the right file?"])
        with os.fdopen(os.dup(descriptor), "rb") as handle:
            data = handle.read(MAX_CONFIG_BYTES + 1)
    except OSError as error:
        raise ConfigProblems([f"{path}: cannot read it: {error.strerror}"]) from None
    finally:
        os.close(descriptor)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        column = error.start - (data.rfind(b"\n", 0, error.start) + 1) + 1
        raise ConfigProblems([f"{path}:{line}:{column}: not UTF-8"]) from None


def load(path: str, settings: Optional[Settings] = None) -> Settings:
    """Reads `path` into `settings` (a new one by default) and returns it.

    :raises ConfigProblems: listing every problem of the file.
    """
    settings = settings if settings is not None else Settings()
    text = _read(path)
    try:
        root = parse(text)
    except JSONProblem as problem:
        raise ConfigProblems([f"{path}:{problem.line}:{problem.column}: {problem.reason}"]) from None
    if not isinstance(root.value, dict):
        raise ConfigProblems([f"{path}:{root.line}:{root.column}: expected an object {{...}} of settings"])
    problems: List[Tuple[int, int, str]] = []
    for key, node in root.value.items():
        at = root.keys[key]
        setting = FIELDS_BY_KEY.get(key)
        if key == "password":
            problems.append((at.line, at.column, "password: a password does not go in this file, which every user "
                             "may read: put it in a file only root and the service may read, and name that file in "
                             '"passwordFile"'))  # fmt: skip
        elif setting is None:
            close = difflib.get_close_matches(key, list(FIELDS_BY_KEY), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else f" (known keys: {', '.join(FIELDS_BY_KEY)})"
            problems.append((at.line, at.column, f"{key}: unknown key{hint}"))
        else:
            wrong = _check_value(setting.kind, node, setting.minimum, setting.maximum)
            if wrong is None:
                settings.set(key, node.value, f"{path}:{at.line}:{at.column}")
            else:
                problems.append((node.line, node.column, f"{key}: {wrong}"))
    if problems:
        raise ConfigProblems([f"{path}:{line}:{column}: {text}" for line, column, text in sorted(problems)])
    return settings


def _check_value(kind: str, node: Node, minimum: int, maximum: int) -> Optional[str]:
    value = node.value
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            return f"expected a whole number from {minimum} to {maximum}, not {_describe(node)}"
        if not minimum <= value <= maximum:
            return f"{value} is out of range (from {minimum} to {maximum})"
        return None
    if not isinstance(value, str):
        return f"expected a string, not {_describe(node)}"
    if not value:
        return "expected a value, not an empty string (leave the key out for the default)"
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        return "control characters are not allowed here"
    return None


def _describe(node: Node) -> str:
    value = node.value
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return f"the number {value}"
    if isinstance(value, str):
        return "a string"
    return "an object" if isinstance(value, dict) else "an array"
