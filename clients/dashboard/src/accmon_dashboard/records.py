"""The records the page shows, built from what ``accmon`` prints, and the change set sent to the page.

Everything here comes from the network: a USB device names itself, and anyone who may publish on the broker writes
the accessory topics. So every field is checked for its type and cut to a bounded length here, once; the page then
only ever puts these strings into the document as text (docs/DASHBOARD.md, "What is escaped").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

__all__ = ["Delta", "KINDS", "MAX_TEXT", "RowKey", "accessory_row", "claim_of", "party_of", "summary_of"]

#: The accessory kinds accmon knows (AccessoryKind): one metric series per host and kind.
KINDS = ("usb", "serial", "bluetooth-hid")
#: The longest string kept from an accessory (a USB string descriptor holds at most 126 characters).
MAX_TEXT = 1024
#: The most device nodes or protocol strings kept per accessory.
MAX_ITEMS = 32
#: The fields of the protocol's accessory object the page shows or filters on, all strings.
TEXT_FIELDS = ("accessoryID", "kind", "name", "serialNumber", "vendorID", "productID", "manufacturer",
               "modelNumber", "portPath")  # fmt: skip
LIST_FIELDS = ("deviceNodes", "protocolStrings")

#: A row's key: the host's name and the connection id (unique per host while its accmond keeps state).
RowKey = Tuple[str, int]


def text(value: Any) -> str:
    """`value` if it is a string (cut to :data:`MAX_TEXT` characters), else the empty string."""
    return value[:MAX_TEXT] if isinstance(value, str) else ""


def whole(value: Any) -> Optional[int]:
    """`value` if it is a whole number (not a boolean), else ``None``."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def seconds(value: Any) -> Optional[float]:
    """`value` as a time in seconds since the epoch, if it is a finite number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def party_of(value: Any) -> Optional[Dict[str, Any]]:
    """A Party object (docs/PROTOCOL.md: the holder of a claim, the actor of a history entry), checked."""
    if not isinstance(value, dict):
        return None
    party: Dict[str, Any] = {"user": text(value.get("user")), "remote": value.get("remote") is True}
    for key in ("uid", "pid"):
        number = whole(value.get(key))
        if number is not None:
            party[key] = number
    if isinstance(value.get("client"), str):
        party["client"] = text(value["client"])
    return party


def claim_of(value: Any) -> Optional[Dict[str, Any]]:
    """An accessory's ``claim`` (who checked it out, since when, why, how many wait), checked; ``None`` when the
    accessory is not claimed."""
    if not isinstance(value, dict):
        return None
    claim: Dict[str, Any] = {"claimID": text(value.get("claimID")), "holder": party_of(value.get("holder"))}
    since = seconds(value.get("since"))
    if since is not None:
        claim["since"] = since
    if isinstance(value.get("reason"), str):
        claim["reason"] = text(value["reason"])
    waiting = whole(value.get("waiting"))
    if waiting is not None:
        claim["waiting"] = waiting
    return claim


def accessory_row(host: str, value: Any) -> Optional[Dict[str, Any]]:
    """The page's row for an accessory object of `host`; ``None`` when `value` is not an accessory object (no
    whole, non-negative connection id)."""
    if not isinstance(value, dict):
        return None
    connection = whole(value.get("connectionID"))
    if connection is None or connection < 0:
        return None
    row: Dict[str, Any] = {"host": host, "connectionID": connection}
    for key in TEXT_FIELDS:
        row[key] = text(value.get(key))
    for key in LIST_FIELDS:
        items = value.get(key)
        row[key] = [text(item) for item in items[:MAX_ITEMS] if isinstance(item, str)] if isinstance(items, list) else []
    claim = claim_of(value.get("claim"))
    if claim is not None:
        row["claim"] = claim
    return row


def summary_of(row: Dict[str, Any]) -> Dict[str, Any]:
    """What an event says about its accessory."""
    keys = ("connectionID", "kind", "accessoryID", "name", "serialNumber", "vendorID", "productID")
    return {key: row[key] for key in keys if key in row}


@dataclass
class Delta:
    """What changed, for the pages that show the state: hosts and rows set or removed, events added (or the whole
    list replaced), the reader's state. Applying deltas in order to the state a page got gives the state now."""

    hosts: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    rows: Dict[RowKey, Optional[Dict[str, Any]]] = field(default_factory=dict)
    events: List[Dict[str, Any]] = field(default_factory=list)
    events_reset: Optional[List[Dict[str, Any]]] = None
    source: Optional[Dict[str, Any]] = None

    def __bool__(self) -> bool:
        return bool(self.hosts or self.rows or self.events or self.events_reset is not None or self.source)

    def merge(self, later: "Delta") -> None:
        """Adds `later`'s changes after these."""
        self.hosts.update(later.hosts)
        self.rows.update(later.rows)
        if later.events_reset is not None:
            self.events_reset = list(later.events_reset)
            self.events = list(later.events)
        else:
            self.events.extend(later.events)
        if later.source is not None:
            self.source = later.source

    def to_json(self) -> Dict[str, Any]:
        message: Dict[str, Any] = {
            "hosts": list(self.hosts.values()),
            "rows": [row for row in self.rows.values() if row is not None],
            "removedRows": [[host, connection] for (host, connection), row in self.rows.items() if row is None],
            "events": self.events,
        }
        if self.events_reset is not None:
            message["eventsReset"] = self.events_reset
        if self.source is not None:
            message["source"] = self.source
        return message
