"""The values the client hands out: accessories, events, snapshots and the daemon's status (filters: filters.py).

The accessory's wire fields are listed once, in :data:`ACCESSORY_FIELDS`; decoding, encoding and the tests that
compare them with what accmond sends all read that table.
"""

from __future__ import annotations

import dataclasses
import operator
import types
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

from .claim_summary import ClaimSummary
from .errors import ProtocolError

__all__ = [
    "ACCESSORY_FIELDS",
    "KINDS",
    "Accessory",
    "AccessoryEvent",
    "Snapshot",
    "Status",
]

#: The accessory kinds of protocol version 1.
KINDS = ("usb", "serial", "bluetooth-hid")

#: The protocol's accessory fields (docs/PROTOCOL.md §8): wire name, attribute of :class:`Accessory`, and JSON type
#: (``str``, ``int``, or ``list`` for an array of strings).
ACCESSORY_FIELDS: Tuple[Tuple[str, str, type], ...] = (
    ("accessoryID", "accessory_id", str),
    ("connectionID", "connection_id", int),
    ("kind", "kind", str),
    ("name", "name", str),
    ("manufacturer", "manufacturer", str),
    ("modelNumber", "model_number", str),
    ("serialNumber", "serial_number", str),
    ("firmwareRevision", "firmware_revision", str),
    ("hardwareRevision", "hardware_revision", str),
    ("protocolStrings", "protocol_strings", list),
    ("vendorID", "vendor_id", str),
    ("productID", "product_id", str),
    ("deviceNodes", "device_nodes", list),
    ("sysfsPath", "sysfs_path", str),
    ("portPath", "port_path", str),
    ("interfaceNumber", "interface_number", str),
    ("descriptorsSHA256", "descriptors_sha256", str),
)
_WIRE_NAMES = frozenset(wire for wire, _, _ in ACCESSORY_FIELDS)
_STRING_FIELDS = tuple((wire, attribute) for wire, attribute, kind in ACCESSORY_FIELDS if kind is str)
_LIST_FIELDS = tuple((wire, attribute) for wire, attribute, kind in ACCESSORY_FIELDS if kind is list)
assert {kind for _, _, kind in ACCESSORY_FIELDS} == {str, list, int}
# The fast path of from_json, for an object with exactly the known fields, each of its JSON type: the values are
# fetched, their types compared and the attributes built by C code, not by a Python loop over the fields.
_FETCH_ALL = operator.itemgetter(*(wire for wire, _, _ in ACCESSORY_FIELDS))
_ATTRIBUTES = tuple(attribute for _, attribute, _ in ACCESSORY_FIELDS)
_TYPES = tuple(kind for _, _, kind in ACCESSORY_FIELDS)
_LIST_POSITIONS = tuple((index, attribute) for index, (_, attribute, kind) in enumerate(ACCESSORY_FIELDS) if kind is list)
_CONNECTION_POSITION = _ATTRIBUTES.index("connection_id")
_STRING_TYPE = {str}
_SORTED_FIELDS = tuple(sorted((wire, attribute) for wire, attribute, _ in ACCESSORY_FIELDS))
_SORTED_LISTS = tuple(wire for wire, _, kind in ACCESSORY_FIELDS if kind is list)
_NO_EXTRA: Mapping[str, Any] = types.MappingProxyType({})


def _invalid(context: str, reason: str) -> ProtocolError:
    return ProtocolError("invalid-response", f"accmon: {context}: {reason}")


@dataclass(frozen=True)
class Accessory:
    """An external accessory as accmond reports it, modelled on ``EAAccessory`` (docs/PROTOCOL.md §8).

    An empty string or an empty tuple means unknown or not applicable. Two accessories are equal when every field is;
    :attr:`connection_id` alone tells two connections apart, :attr:`accessory_id` names the physical accessory
    across plugs. Fields of a later protocol version that this package does not know are kept in :attr:`extra`.
    """

    accessory_id: str = ""
    """The stable identity of the physical accessory, which it keeps across plugs; compare it only for equality."""
    connection_id: int = 0
    """This connection; never reused, also across restarts of the daemon."""
    kind: str = ""
    """``"usb"``, ``"serial"`` or ``"bluetooth-hid"``."""
    name: str = ""
    """Display name: the USB product string, or the Bluetooth HID name."""
    manufacturer: str = ""
    model_number: str = ""
    serial_number: str = ""
    """The USB serial string, or for Bluetooth HID the device's address."""
    firmware_revision: str = ""
    hardware_revision: str = ""
    protocol_strings: Tuple[str, ...] = ()
    """The protocols the accessory speaks: its manifest entry's, then any its source reported."""
    vendor_id: str = ""
    """4 lowercase hex digits, such as ``"0403"``."""
    product_id: str = ""
    device_nodes: Tuple[str, ...] = ()
    """Device nodes to talk to it: ``/dev/bus/usb/…`` (usb), the tty then its by-id links (serial), event nodes."""
    sysfs_path: str = ""
    port_path: str = ""
    """The USB port path, such as ``"1-1.2"``."""
    interface_number: str = ""
    descriptors_sha256: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False, repr=False)
    """Fields the daemon sent that this version of the package does not know, by their wire names."""

    @classmethod
    def from_json(cls, value: Any, context: str = "accessory") -> "Accessory":
        """Builds an accessory from the protocol's JSON object (already decoded).

        Missing fields are empty; unknown fields go to :attr:`extra`.

        :raises ProtocolError: with code ``invalid-response`` when a field has the wrong JSON type.
        """
        if type(value) is dict and len(value) == len(_ATTRIBUTES) and value.keys() == _WIRE_NAMES:
            fetched = _FETCH_ALL(value)
            if tuple(map(type, fetched)) == _TYPES and fetched[_CONNECTION_POSITION] >= 0:
                values = dict(zip(_ATTRIBUTES, fetched))
                for position, attribute in _LIST_POSITIONS:
                    items = fetched[position]
                    if items and set(map(type, items)) != _STRING_TYPE:
                        break
                    values[attribute] = tuple(items)
                else:
                    values["extra"] = _NO_EXTRA
                    accessory = object.__new__(cls)
                    accessory.__dict__.update(values)
                    return accessory
        return cls._checked_from_json(value, context)

    @classmethod
    def _checked_from_json(cls, value: Any, context: str) -> "Accessory":
        """from_json's general path: any object, each field checked, unknown fields kept."""
        if not isinstance(value, dict):
            raise _invalid(context, "expected an object")
        get = value.get
        values: Dict[str, Any] = {}
        for wire, attribute in _STRING_FIELDS:
            item = get(wire, "")
            if type(item) is not str:
                if item is not None:
                    raise _invalid(f"{context}.{wire}", "expected a string")
                item = ""
            values[attribute] = item
        for wire, attribute in _LIST_FIELDS:
            item = get(wire, ())
            if type(item) is list:
                if not all(type(element) is str for element in item):
                    raise _invalid(f"{context}.{wire}", "expected an array of strings")
                item = tuple(item)
            elif item is None:
                item = ()
            elif type(item) is not tuple:
                raise _invalid(f"{context}.{wire}", "expected an array of strings")
            values[attribute] = item
        connection = get("connectionID", 0)
        if type(connection) is not int or connection < 0:
            if connection is not None:
                raise _invalid(f"{context}.connectionID", "expected a non-negative integer")
            connection = 0
        values["connection_id"] = connection
        values["extra"] = {key: item for key, item in value.items() if key not in _WIRE_NAMES} or _NO_EXTRA
        # Set the fields directly: the generated __init__ of a frozen dataclass goes through object.__setattr__ once
        # per field, which is most of the cost of decoding an event.
        accessory = object.__new__(cls)
        accessory.__dict__.update(values)
        return accessory

    def to_json(self) -> Dict[str, Any]:
        """The protocol's JSON object for this accessory (camelCase keys, arrays as lists), with :attr:`extra`; its
        keys are in sorted order, as accmond writes them, so ``json.dumps`` needs no ``sort_keys``."""
        fields = self.__dict__
        value = {wire: fields[attribute] for wire, attribute in _SORTED_FIELDS}
        for wire in _SORTED_LISTS:
            value[wire] = list(value[wire])
        if self.extra:
            value.update(self.extra)
            value = dict(sorted(value.items()))
        return value

    @property
    def usb_id(self) -> str:
        """``vendor:product``, with ``-`` for a missing half (as ``accmon list`` shows it)."""
        return f"{self.vendor_id or '-'}:{self.product_id or '-'}"

    @property
    def device_node(self) -> Optional[str]:
        """The first device node (for a serial port, its tty), or ``None``."""
        return self.device_nodes[0] if self.device_nodes else None

    def replace(self, **changes: Any) -> "Accessory":
        """A copy with some fields changed (``dataclasses.replace``)."""
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class AccessoryEvent:
    """A connection that began (``change == "connect"``) or ended (``"disconnect"``).

    :attr:`seq` is the daemon-wide sequence number (docs/PROTOCOL.md §6): events arrive in increasing order, with gaps
    where a filter or coalescing left events out.
    """

    change: str
    """``"connect"`` or ``"disconnect"``."""
    accessory: Accessory
    """The accessory; for a disconnect, as it was last known."""
    seq: int
    """The event's sequence number."""
    rejection: Optional[str] = None
    """For subscriptions with ``all=True`` (admins): why the manifest rejected the accessory, on its ``connect``."""

    @property
    def is_connect(self) -> bool:
        """Whether this is a ``connect``."""
        return self.change == "connect"

    @classmethod
    def from_message(cls, message: Dict[str, Any]) -> "AccessoryEvent":
        """Builds an event from a decoded ``connect`` or ``disconnect`` message.

        :raises ProtocolError: with code ``invalid-response`` when the message is malformed.
        """
        change = message.get("type")
        seq = message.get("seq")
        if type(seq) is not int or seq < 0:
            raise _invalid(f"{change}.seq", "expected a non-negative integer")
        rejection = message.get("rejected")
        if rejection is not None and type(rejection) is not str:
            raise _invalid(f"{change}.rejected", "expected a string")
        event = object.__new__(cls)
        event.__dict__.update(
            change=change,
            accessory=Accessory.from_json(message.get("accessory"), f"{change}.accessory"),
            seq=seq,
            rejection=rejection,
        )
        return event

    def to_json(self) -> Dict[str, Any]:
        """The protocol's message for this event, its keys in sorted order (see :meth:`Accessory.to_json`)."""
        value: Dict[str, Any] = {"accessory": self.accessory.to_json()}
        if self.rejection is not None:
            value["rejected"] = self.rejection
        value["seq"] = self.seq
        value["type"] = self.change
        return value


class Snapshot(List[Accessory]):
    """The accessories connected at one moment, in connection order: a ``list`` with the moment's sequence number.

    :ivar seq: the number of the last event issued when the snapshot was taken (docs/PROTOCOL.md §6); every event
        that follows a subscription's snapshot has a higher one.
    :ivar rejected: for ``all=True`` (admins): why the manifest rejects some of them, by connection id.
    :ivar claims: for ``claims=True``: the claim (:class:`~accmon.ClaimSummary`) on each claimed accessory, by
        connection id.
    """

    def __init__(
        self,
        accessories: Iterable[Accessory] = (),
        seq: int = 0,
        rejected: Optional[Mapping[int, str]] = None,
        claims: Optional[Mapping[int, ClaimSummary]] = None,
    ):
        super().__init__(accessories)
        self.seq = seq
        self.rejected: Mapping[int, str] = dict(rejected or {})
        #: With ``claims=True``: the claim on each claimed accessory, by connection id.
        self.claims: Dict[int, ClaimSummary] = dict(claims or {})

    def __repr__(self) -> str:
        return f"Snapshot({list.__repr__(self)}, seq={self.seq})"

    @classmethod
    def from_message(cls, message: Dict[str, Any]) -> "Snapshot":
        """Builds a snapshot from a decoded ``snapshot``, ``list`` or ``restore`` message.

        :raises ProtocolError: with code ``invalid-response`` when the message is malformed.
        """
        kind = message.get("type", "snapshot")
        accessories = message.get("accessories", [])
        seq = message.get("seq", 0)
        if type(accessories) is not list:
            raise _invalid(f"{kind}.accessories", "expected an array")
        if type(seq) is not int or seq < 0:
            raise _invalid(f"{kind}.seq", "expected a non-negative integer")
        rejected: Dict[int, str] = {}
        raw_rejected = message.get("rejected") or {}
        if not isinstance(raw_rejected, dict):
            raise _invalid(f"{kind}.rejected", "expected an object")
        for key, reason in raw_rejected.items():
            if not key.isdigit() or type(reason) is not str:
                raise _invalid(f"{kind}.rejected.{key}", "expected a connection id and a reason")
            rejected[int(key)] = reason
        claims: Dict[int, ClaimSummary] = {}
        if any(type(item) is dict and "claim" in item for item in accessories):
            unclaimed = []
            for index, item in enumerate(accessories):
                if type(item) is dict and "claim" in item:
                    item = dict(item)
                    summary = ClaimSummary.from_json(item.pop("claim"), f"{kind}.accessories[{index}].claim")
                    if type(item.get("connectionID")) is int:
                        claims[item["connectionID"]] = summary
                unclaimed.append(item)
            accessories = unclaimed
        return cls(
            (Accessory.from_json(item, f"{kind}.accessories[{index}]") for index, item in enumerate(accessories)),
            seq,
            rejected,
            claims,
        )


@dataclass(frozen=True)
class Status:
    """The daemon's state, as ``status`` reports it (docs/PROTOCOL.md §7.6); :attr:`raw` has every field."""

    daemon_version: str
    protocol_version: int
    uptime_seconds: float
    connected_accessories: int
    sessions: int
    sequence: int
    simulate: bool
    clients: Tuple[Mapping[str, Any], ...]
    """One object per session this client may see (the protocol's ``clients``, camelCase keys)."""
    manifest: Mapping[str, Any]
    raw: Mapping[str, Any] = field(compare=False, repr=False)
    claims: Optional[int] = None
    """Claims held now (``None`` from an accmond without claims)."""
    claim_waiters: Optional[int] = None
    """Claim requests waiting in line."""

    @classmethod
    def from_message(cls, message: Dict[str, Any]) -> "Status":
        """Builds the status from a decoded ``status`` reply."""
        clients = message.get("clients") or []
        return cls(
            daemon_version=str(message.get("daemonVersion", "")),
            protocol_version=int(message.get("protocolVersion", 1)),
            uptime_seconds=float(message.get("uptimeSeconds", 0.0)),
            connected_accessories=int(message.get("connectedAccessories", 0)),
            sessions=int(message.get("sessions", 0)),
            sequence=int(message.get("sequence", 0)),
            simulate=bool(message.get("simulate", False)),
            clients=tuple(client for client in clients if isinstance(client, dict)),
            manifest=message.get("manifest") or {},
            raw=message,
            claims=int(message["claims"]) if type(message.get("claims")) is int else None,
            claim_waiters=int(message["claimWaiters"]) if type(message.get("claimWaiters")) is int else None,
        )
