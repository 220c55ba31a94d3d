"""Reading the fields of the daemon's JSON objects, each checked for its JSON type, with where it was in every
error (``invalid-response``), and writing them back with the fields this version does not know: the claim values'
decoding (claim_summary.py, claim_model.py)."""

from __future__ import annotations

from typing import Any, Callable, Dict, Mapping, Optional, Tuple, TypeVar

from .errors import ProtocolError

__all__ = ["JSONObject", "integer_item", "string_item", "with_extra"]

T = TypeVar("T")


class JSONObject:
    """Reads the fields of one JSON object, each checked, with `context` in every error."""

    def __init__(self, value: Any, context: str, known: Tuple[str, ...]) -> None:
        if type(value) is not dict:
            raise ProtocolError("invalid-response", f"accmon: {context}: expected an object")
        self.value: Dict[str, Any] = value
        self.context = context
        self.extra = {key: item for key, item in value.items() if key not in known}

    def _fail(self, key: str, expected: str) -> ProtocolError:
        return ProtocolError("invalid-response", f"accmon: {self.context}.{key}: expected {expected}")

    def string(self, key: str, default: str = "") -> str:
        item = self.value.get(key, default)
        if item is None:
            return default
        if type(item) is not str:
            raise self._fail(key, "a string")
        return item

    def optional_string(self, key: str) -> Optional[str]:
        return self.string(key) if self.value.get(key) is not None else None

    def integer(self, key: str, default: int = 0) -> int:
        item = self.value.get(key, default)
        if item is None:
            return default
        if type(item) is not int:
            raise self._fail(key, "an integer")
        return item

    def optional_integer(self, key: str) -> Optional[int]:
        return self.integer(key) if self.value.get(key) is not None else None

    def number(self, key: str, default: float = 0.0) -> float:
        item = self.value.get(key, default)
        if item is None:
            return default
        if type(item) not in (int, float):
            raise self._fail(key, "a number")
        return float(item)

    def optional_number(self, key: str) -> Optional[float]:
        return self.number(key) if self.value.get(key) is not None else None

    def boolean(self, key: str) -> bool:
        item = self.value.get(key, False)
        if item is None:
            return False
        if type(item) is not bool:
            raise self._fail(key, "true or false")
        return item

    def items(self, key: str, decode: Callable[[Any, str], T]) -> Tuple[T, ...]:
        items = self.value.get(key)
        if items is None:
            return ()
        if type(items) is not list:
            raise self._fail(key, "an array")
        return tuple(decode(item, f"{self.context}.{key}[{index}]") for index, item in enumerate(items))

    def optional(self, key: str, decode: Callable[[Any, str], T]) -> Optional[T]:
        item = self.value.get(key)
        return None if item is None else decode(item, f"{self.context}.{key}")


def integer_item(value: Any, context: str) -> int:
    if type(value) is not int:
        raise ProtocolError("invalid-response", f"accmon: {context}: expected an integer")
    return value


def string_item(value: Any, context: str) -> str:
    if type(value) is not str:
        raise ProtocolError("invalid-response", f"accmon: {context}: expected a string")
    return value


def with_extra(value: Dict[str, Any], extra: Mapping[str, Any]) -> Dict[str, Any]:
    """`value`, the object's known fields, with the `extra` ones it was read with, in sorted key order."""
    return dict(sorted({**extra, **value}.items()))
