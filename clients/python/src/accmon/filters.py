"""Filters: which accessories a subscription, a list or a wait covers (docs/PROTOCOL.md §5), and hex ids."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Dict, Optional, Union

from .model import KINDS, Accessory

__all__ = ["Filter", "IdLike", "hex_id"]

IdLike = Union[str, int, None]


def hex_id(part: str, value: IdLike) -> Optional[str]:
    """`value` as 4 lowercase hex digits (``"403"`` and ``0x403`` give ``"0403"``); ``None`` stays ``None``.

    :raises ValueError: when it is not a 16-bit id (`part` names it in the message).
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError(f"{part}: expected a hex string such as '0403' or an int, not {type(value).__name__}")
    if isinstance(value, int):
        if not 0 <= value <= 0xFFFF:
            raise ValueError(f"{part}: {value} is not a 16-bit id")
        return f"{value:04x}"
    if not 1 <= len(value) <= 4 or any(character not in "0123456789abcdefABCDEF" for character in value):
        raise ValueError(f"{part}: '{value}' is not a hex id of 1 to 4 digits (such as '0403')")
    return f"{int(value, 16):04x}"


def _same_hex_id(actual: str, wanted: str) -> bool:
    try:
        return int(actual, 16) == int(wanted, 16)
    except ValueError:
        return False


@dataclass(frozen=True)
class Filter:
    """Which accessories a subscription or list covers (docs/PROTOCOL.md §5); parts left ``None`` match anything.

    Vendor and product ids are hex strings of 1 to 4 digits (``"0403"``, ``"403"``) or ints (``0x0403``); they are
    compared as numbers. The parts are checked when the filter is made, so a typo fails before anything is sent.

    :raises ValueError: for an unknown kind or an id that is not hex.
    """

    kind: Optional[str] = None
    vendor: IdLike = None
    product: IdLike = None
    protocol: Optional[str] = None

    def __post_init__(self) -> None:
        if self.kind is not None and self.kind not in KINDS:
            raise ValueError(f"filter: kind: '{self.kind}' is not a kind ({', '.join(KINDS)})")
        object.__setattr__(self, "vendor", hex_id("filter: vendor", self.vendor))
        object.__setattr__(self, "product", hex_id("filter: product", self.product))
        if self.protocol is not None and not isinstance(self.protocol, str):
            raise ValueError("filter: protocol: expected a string")

    def to_wire(self) -> Dict[str, str]:
        """The protocol's ``filter`` object."""
        wire: Dict[str, str] = {}
        if self.kind is not None:
            wire["kind"] = self.kind
        if self.vendor is not None:
            wire["vendorID"] = str(self.vendor)
        if self.product is not None:
            wire["productID"] = str(self.product)
        if self.protocol is not None:
            wire["protocol"] = self.protocol
        return wire

    def matches(self, accessory: Accessory) -> bool:
        """Whether `accessory` passes the filter, by the daemon's rules."""
        if self.kind is not None and accessory.kind != self.kind:
            return False
        for wanted, actual in ((self.vendor, accessory.vendor_id), (self.product, accessory.product_id)):
            if wanted is not None and not _same_hex_id(actual, str(wanted)):
                return False
        return self.protocol is None or self.protocol in accessory.protocol_strings

    def describe(self) -> str:
        """The filter as ``kind=serial vendor=0403``, or ``any accessory``."""
        parts = [f"{name}={value}" for name, value in dataclasses.asdict(self).items() if value is not None]
        return " ".join(parts) if parts else "any accessory"
