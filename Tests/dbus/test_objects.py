"""accmond's objects on the bus, as GLib's object manager client and busctl see them: an object per accessory, the
interfaces the shipped introspection file declares, and the bus policy's gate."""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from typing import Any, Callable, Dict, List, Tuple

from busrig import (
    ACCESSORY_INTERFACE, INTERFACES, MANAGER, GLibPeer, PrivateBus, PrivatePty, accessory_path, eventually,
)

from accmon.simulator import SimulatedDaemon


def test_objects_appear_and_vanish_with_plugs(
    bus: PrivateBus, daemon: SimulatedDaemon, peers: Callable[..., GLibPeer]
) -> None:
    watcher = peers(user="nobody", manager=True)
    assert watcher.objects() == {}
    gps = daemon.plug("usb", vendor="1546", product="01a7", name="u-blox GPS", serial="G1", port="1-1.2")
    tty = daemon.plug("serial", vendor="1546", product="01a8", name="GPS console", nodes=["/dev/ttyACM0"],
                      interface="00", port="1-1.3")  # fmt: skip
    objects = eventually(lambda: len(watcher.objects()) == 2 and watcher.objects(), 10, "two objects")
    properties = objects[accessory_path(gps)][ACCESSORY_INTERFACE]
    assert properties["Kind"] == "usb"
    assert properties["VendorID"] == 0x1546 and properties["ProductID"] == 0x01A7
    assert properties["ConnectionID"] == gps
    assert properties["Name"] == "u-blox GPS" and properties["SerialNumber"] == "G1"
    assert properties["ProtocolStrings"] == ["com.acme.gps"]
    assert properties["PortPath"] == "1-1.2"
    assert properties["ClaimState"] == "" and properties["ClaimHolder"] == ""
    console = objects[accessory_path(tty)][ACCESSORY_INTERFACE]
    assert console["DeviceNodes"] == ["/dev/ttyACM0"] and console["InterfaceNumber"] == "00"
    daemon.unplug(gps)
    eventually(lambda: list(watcher.objects()) == [accessory_path(tty)], 10, "the GPS object to vanish")
    # busctl (sd-bus) as another member sees the same tree; its Get reads one property.
    tree = bus.busctl("tree", "org.accmon.Accmon1", user="www-data")
    assert tree.returncode == 0, tree.stderr
    assert accessory_path(tty) in tree.stdout and accessory_path(gps) not in tree.stdout
    name = bus.busctl("get-property", "org.accmon.Accmon1", accessory_path(tty), ACCESSORY_INTERFACE, "Name",
                      user="www-data")  # fmt: skip
    assert name.stdout.strip() == 's "GPS console"', name


def test_a_user_outside_the_group_is_refused_by_the_bus(
    bus: PrivateBus, daemon: SimulatedDaemon, peers: Callable[..., GLibPeer]
) -> None:
    daemon.plug("usb", vendor="1546", product="01a7")
    refused = bus.busctl("tree", "org.accmon.Accmon1", user="daemon", member=False)
    assert refused.returncode != 0 and "Access denied" in refused.stdout + refused.stderr, refused
    outsider = peers(user="daemon", member=False)
    answer = outsider.call(MANAGER, "org.freedesktop.DBus.ObjectManager", "GetManagedObjects")
    assert answer.get("error") == "org.freedesktop.DBus.Error.AccessDenied", answer
    # The same user in the group is let through.
    assert bus.busctl("tree", "org.accmon.Accmon1", user="daemon").returncode == 0


def _interfaces(xml: str) -> Dict[str, Any]:
    """The accmon interfaces of an introspection document, comparable: members with their types and annotations."""
    found: Dict[str, Any] = {}
    for interface in ElementTree.fromstring(xml).iter("interface"):
        name = interface.get("name", "")
        if name.startswith("org.freedesktop.DBus."):
            continue
        members: List[Tuple[Any, ...]] = []
        for member in interface:
            arguments = tuple((arg.get("name"), arg.get("type"), arg.get("direction")) for arg in member.iter("arg"))
            annotations = tuple((a.get("name"), a.get("value")) for a in member.iter("annotation"))
            members.append((member.tag, member.get("name"), member.get("type"), member.get("access"), arguments,
                            annotations))  # fmt: skip
        found[name] = members
    return found


def test_the_interfaces_accmond_declares_are_those_of_the_shipped_file(
    daemon: SimulatedDaemon, peers: Callable[..., GLibPeer]
) -> None:
    shipped = _interfaces(INTERFACES.read_text())
    assert set(shipped) == {"org.accmon.Accmon1.Manager", ACCESSORY_INTERFACE, "org.accmon.Accmon1.Subscription",
                            "org.accmon.Accmon1.Claim"}  # fmt: skip
    peer = peers(user="www-data", groups=[20])
    pty = PrivatePty(daemon.nodes_dir)
    try:
        gps = daemon.plug("serial", vendor="1546", product="01a7", nodes=[pty.node])
        subscription = peer.subscribe()
        claim = peer.ok(accessory_path(gps), ACCESSORY_INTERFACE, "Open", "('', @a{sv} {})")[1]
        declared = _declared(peer, (MANAGER, accessory_path(gps), subscription, claim))
    finally:
        pty.close()
    assert declared == shipped


def _declared(peer: GLibPeer, paths: Tuple[str, ...]) -> Dict[str, Any]:
    """The accmon interfaces accmond declares on `paths`, checking that each object has the standard ones too."""
    declared: Dict[str, Any] = {}
    for path in paths:
        xml = peer.ok(path, "org.freedesktop.DBus.Introspectable", "Introspect")[0]
        declared.update(_interfaces(xml))
        # Every object also has the standard interfaces.
        standard = {i.get("name") for i in ElementTree.fromstring(xml).iter("interface")}
        assert {"org.freedesktop.DBus.Peer", "org.freedesktop.DBus.Introspectable",
                "org.freedesktop.DBus.Properties"} <= standard  # fmt: skip
    return declared
