#!/usr/bin/python3
"""Watches accmon's accessories on the system bus with GLib's own D-Bus client, as a desktop app would
(docs/DBUS.md, "A complete example"). Needs only Debian's python3-gi.

    dbus_watch.py [--restore-id ID] [--seconds N]

It prints the accessories the manifest lets this user see, then each one that comes or goes, from the object
manager (org.freedesktop.DBus.ObjectManager). With --restore-id it also subscribes (org.accmon.Accmon1.Manager.
Subscribe) and prints the subscription's events, acknowledging each batch; started again with the same id, it gets
what it missed while it was away, once. It runs until Ctrl-C, or for N seconds.
"""

import argparse
import signal
import sys

import gi

gi.require_version("Gio", "2.0")
from gi.repository import Gio, GLib  # noqa: E402

SERVICE = "org.accmon.Accmon1"
MANAGER_PATH = "/org/accmon/Accmon1"
ACCESSORY = "org.accmon.Accmon1.Accessory"
SUBSCRIPTION = "org.accmon.Accmon1.Subscription"


def describe(properties):
    """One line for an accessory: its connection, kind, USB id, name and protocols."""
    return (f"{properties['ConnectionID']}: {properties['Kind']} {properties['VendorID']:04x}:"
            f"{properties['ProductID']:04x} {properties['Name']!r} {' '.join(properties['ProtocolStrings'])}")


def cached(proxy):
    return {name: proxy.get_cached_property(name).unpack() for name in proxy.get_cached_property_names()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--restore-id")
    parser.add_argument("--seconds", type=float)
    options = parser.parse_args()
    bus = Gio.bus_get_sync(Gio.BusType.SYSTEM, None)  # DBUS_SYSTEM_BUS_ADDRESS, else the system's bus

    # The object manager: its first view, then each object added or removed.
    manager = Gio.DBusObjectManagerClient.new_sync(
        bus, Gio.DBusObjectManagerClientFlags.NONE, SERVICE, MANAGER_PATH, None, None, None)
    for found in manager.get_objects():
        print("present", describe(cached(found.get_interface(ACCESSORY))), flush=True)
    manager.connect("object-added", lambda _, found: print(
        "added", describe(cached(found.get_interface(ACCESSORY))), flush=True))
    manager.connect("object-removed", lambda _, found: print(
        "removed", found.get_object_path(), flush=True))

    if options.restore_id:
        # Subscribe to the subscription's signals first, so that none is missed, then ask for the subscription.
        def on_signal(connection, sender, path, interface, member, parameters):
            if member == "Snapshot":
                sequence, accessories, restored = parameters.unpack()
                print(f"snapshot at {sequence}{' (restored)' if restored else ''}:",
                      [a["ConnectionID"] for a in accessories], flush=True)
            elif member == "Events":
                events = parameters.unpack()[0]
                for change, sequence, fields in events:
                    print("event", sequence, change, describe(fields), flush=True)
                # Acknowledged once handled: unacknowledged events are queued, not lost, past accmond's bound.
                bus.call(SERVICE, path, SUBSCRIPTION, "Ack", GLib.Variant("(t)", (events[-1][1],)),
                         None, Gio.DBusCallFlags.NONE, -1, None, None, None)

        bus.signal_subscribe(SERVICE, SUBSCRIPTION, None, None, None, Gio.DBusSignalFlags.NONE, on_signal)
        options_dict = {"restore-id": GLib.Variant("s", options.restore_id),
                        "client-name": GLib.Variant("s", "dbus_watch.py")}
        reply = bus.call_sync(SERVICE, MANAGER_PATH, "org.accmon.Accmon1.Manager", "Subscribe",
                              GLib.Variant("(a{sv})", (options_dict,)), None, Gio.DBusCallFlags.NONE, -1, None)
        print("subscribed", reply.unpack()[0], flush=True)

    loop = GLib.MainLoop()
    GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signal.SIGINT, loop.quit)
    GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signal.SIGTERM, loop.quit)
    if options.seconds is not None:
        GLib.timeout_add(int(options.seconds * 1000), loop.quit)
    loop.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
