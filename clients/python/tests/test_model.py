"""The value types against the protocol: the accessory's field table against accmond's objects and
docs/PROTOCOL.md §8, decoding and encoding, tolerance of unknown fields, and filters."""

from __future__ import annotations

import json
import re
from typing import Any, Dict

import pytest

import accmon
from accmon.filters import Filter
from accmon.model import ACCESSORY_FIELDS, Accessory, AccessoryEvent, Snapshot
from accmon.simulator import SimulatedDaemon
from conftest import REPO_ROOT

FULL = {
    "accessoryID": "serial:0403:6001:serial=A50285BI:if=00",
    "connectionID": 7,
    "descriptorsSHA256": "ab" * 32,
    "deviceNodes": ["/dev/ttyUSB0", "/dev/serial/by-id/usb-FTDI"],
    "firmwareRevision": "6.00",
    "hardwareRevision": "B",
    "interfaceNumber": "00",
    "kind": "serial",
    "manufacturer": "FTDI",
    "modelNumber": "6001",
    "name": "FT232R USB UART",
    "portPath": "1-1.2",
    "productID": "6001",
    "protocolStrings": ["com.ftdi.uart"],
    "serialNumber": "A50285BI",
    "sysfsPath": "/sys/devices/x/ttyUSB0",
    "vendorID": "0403",
}


def test_every_field_accmond_sends_is_in_the_table_and_back(accmond: SimulatedDaemon) -> None:
    with accmon.Client(accmond.socket) as client:
        client.simulate_connect("serial", vendor="0403", product="6001", name="Adapter", nodes=["/dev/ttyUSB0"])
        line = client._request({"type": "list"}, "list")
    sent: Dict[str, Any] = line["accessories"][0]
    assert sorted(sent) == sorted(wire for wire, _, _ in ACCESSORY_FIELDS)
    accessory = Accessory.from_json(sent)
    assert accessory.extra == {}
    assert accessory.to_json() == sent


def test_the_table_is_the_one_of_protocol_md() -> None:
    protocol = (REPO_ROOT / "docs" / "PROTOCOL.md").read_text()
    section = protocol[protocol.index("## 8. The accessory object") : protocol.index("### 8.1")]
    documented = re.findall(r"^\| `(\w+)` \|", section, flags=re.MULTILINE)
    assert sorted(documented) == sorted(wire for wire, _, _ in ACCESSORY_FIELDS)


def test_snake_case_names_follow_the_wire_names() -> None:
    for wire, attribute, _ in ACCESSORY_FIELDS:
        expected = re.sub(r"ID$", "_id", wire)
        expected = re.sub(r"SHA256$", "_sha256", expected)
        expected = re.sub(r"(?<=[a-z])([A-Z])", lambda match: "_" + match.group(1).lower(), expected)
        assert attribute == expected, wire
        assert attribute in Accessory.__dataclass_fields__


def test_decodes_every_field() -> None:
    accessory = Accessory.from_json(FULL)
    assert accessory.accessory_id == "serial:0403:6001:serial=A50285BI:if=00"
    assert accessory.connection_id == 7
    assert accessory.device_nodes == ("/dev/ttyUSB0", "/dev/serial/by-id/usb-FTDI")
    assert accessory.protocol_strings == ("com.ftdi.uart",)
    assert accessory.descriptors_sha256 == "ab" * 32
    assert (accessory.firmware_revision, accessory.hardware_revision) == ("6.00", "B")
    assert (accessory.usb_id, accessory.device_node) == ("0403:6001", "/dev/ttyUSB0")
    assert accessory.to_json() == FULL
    assert list(accessory.to_json()) == sorted(FULL)  # as accmond writes them: dumps needs no sort_keys
    assert Accessory.from_json(json.loads(json.dumps(accessory.to_json()))) == accessory


def test_unknown_fields_are_kept_aside_and_do_not_change_equality() -> None:
    later = dict(FULL, batteryLevel=80, transport={"kind": "usb3"})
    accessory = Accessory.from_json(later)
    assert accessory.extra == {"batteryLevel": 80, "transport": {"kind": "usb3"}}
    assert accessory == Accessory.from_json(FULL)
    assert hash(accessory) == hash(Accessory.from_json(FULL))
    assert accessory.to_json() == later
    assert list(accessory.to_json()) == sorted(later)


def test_missing_fields_are_empty() -> None:
    accessory = Accessory.from_json({"kind": "usb", "connectionID": 3})
    assert accessory == Accessory(kind="usb", connection_id=3)
    assert (accessory.usb_id, accessory.device_node, accessory.device_nodes) == ("-:-", None, ())


def test_is_frozen_and_hashable() -> None:
    accessory = Accessory.from_json(FULL)
    with pytest.raises(AttributeError):
        accessory.name = "other"  # type: ignore[misc]
    assert accessory.replace(name="other").name == "other"
    assert len({accessory, Accessory.from_json(FULL)}) == 1


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("connectionID", "7", "expected a non-negative integer"),
        ("connectionID", -1, "expected a non-negative integer"),
        ("name", 5, "expected a string"),
        ("deviceNodes", "/dev/ttyUSB0", "expected an array of strings"),
        ("protocolStrings", [1], "expected an array of strings"),
    ],
)
def test_a_field_of_the_wrong_type_is_an_invalid_response(field: str, value: Any, reason: str) -> None:
    with pytest.raises(accmon.ProtocolError) as caught:
        Accessory.from_json(dict(FULL, **{field: value}))
    assert caught.value.code == "invalid-response"
    assert str(caught.value) == f"accmon: accessory.{field}: {reason}"


def test_events_and_snapshots() -> None:
    event = AccessoryEvent.from_message({"type": "connect", "seq": 9, "accessory": FULL, "rejected": "no entry"})
    assert (event.change, event.seq, event.rejection, event.is_connect) == ("connect", 9, "no entry", True)
    assert event.to_json() == {"type": "connect", "seq": 9, "accessory": FULL, "rejected": "no entry"}
    assert list(event.to_json()) == ["accessory", "rejected", "seq", "type"]
    snapshot = Snapshot.from_message({"type": "list", "seq": 4, "accessories": [FULL], "rejected": {"7": "why"}})
    assert isinstance(snapshot, list) and snapshot == [Accessory.from_json(FULL)]
    assert (snapshot.seq, snapshot.rejected) == (4, {7: "why"})
    with pytest.raises(accmon.ProtocolError, match=r"accmon: disconnect.seq: expected a non-negative integer"):
        AccessoryEvent.from_message({"type": "disconnect", "seq": "4", "accessory": FULL})
    with pytest.raises(accmon.ProtocolError, match=r"accmon: snapshot.accessories\[1\]: expected an object"):
        Snapshot.from_message({"type": "snapshot", "seq": 4, "accessories": [FULL, 3]})


def test_filters_are_checked_and_normalised_before_anything_is_sent() -> None:
    assert Filter("serial", "403", 0x6001, "com.ftdi.uart").to_wire() == {
        "kind": "serial",
        "vendorID": "0403",
        "productID": "6001",
        "protocol": "com.ftdi.uart",
    }
    assert Filter().to_wire() == {}
    with pytest.raises(ValueError, match=r"^filter: kind: 'hid' is not a kind \(usb, serial, bluetooth-hid\)$"):
        Filter(kind="hid")
    with pytest.raises(ValueError, match=r"^filter: vendor: '0x0403' is not a hex id of 1 to 4 digits"):
        Filter(vendor="0x0403")
    with pytest.raises(ValueError, match=r"^filter: product: 65536 is not a 16-bit id$"):
        Filter(product=0x10000)


def test_filter_matches_as_the_daemon_does() -> None:
    accessory = Accessory.from_json(FULL)
    assert Filter("serial", "403", "6001", "com.ftdi.uart").matches(accessory)
    assert not Filter(kind="usb").matches(accessory)
    assert not Filter(vendor="0404").matches(accessory)
    assert not Filter(protocol="com.ftdi").matches(accessory)
    assert not Filter(vendor="0403").matches(accessory.replace(vendor_id=""))
