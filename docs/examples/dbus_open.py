#!/usr/bin/python3
"""Waits for an accessory that speaks a protocol, opens it through accmond and prints what it reads from it
(docs/DBUS.md, "Opening an accessory"): EASession's way, with GLib's own D-Bus client (Debian's python3-gi).

    dbus_open.py PROTOCOL [--seconds N]

accmond claims the accessory for this user and hands over its node's descriptor (Accessory.OpenProtocol): no group of
the node and no view of /dev is needed, in a Flatpak sandbox too. It prints each chunk it reads, and ends when the
claim is broken (an admin's break, the accessory gone for good), after N seconds, or on Ctrl-C; the claim ends with
it.
"""

import argparse
import os
import signal
import sys

import gi

gi.require_version("Gio", "2.0")
gi.require_version("GLib", "2.0")
from gi.repository import Gio, GLib  # noqa: E402

SERVICE = "org.accmon.Accmon1"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("protocol")
    parser.add_argument("--seconds", type=float)
    options = parser.parse_args()
    bus = Gio.bus_get_sync(Gio.BusType.SYSTEM, None)
    loop = GLib.MainLoop()
    manager = Gio.DBusObjectManagerClient.new_sync(
        bus, Gio.DBusObjectManagerClientFlags.NONE, SERVICE, "/org/accmon/Accmon1", None, None, None)
    state = {"claim": None}

    def speaks(found):
        accessory = found.get_interface("org.accmon.Accmon1.Accessory")
        return accessory is not None and options.protocol in accessory.get_cached_property("ProtocolStrings").unpack()

    def on_broken(connection, sender, path, interface, member, parameters):
        if path == state["claim"]:
            details = parameters.unpack()[0]
            print(f"claim {details.get('kind', 'broken')}: {details.get('reason', '')}", flush=True)
            loop.quit()

    def on_readable(descriptor, condition):
        try:
            data = os.read(descriptor, 4096)
        except BlockingIOError:
            return True
        except OSError as error:
            print(f"read: {os.strerror(error.errno)}", flush=True)
            loop.quit()
            return False
        if not data:
            return True
        print("read", data.decode(errors="replace"), flush=True)
        return True

    def open_accessory(found):
        if state["claim"] is not None or not speaks(found):
            return
        path = found.get_object_path()
        reply, fds = bus.call_with_unix_fd_list_sync(
            SERVICE, path, "org.accmon.Accmon1.Accessory", "OpenProtocol",
            GLib.Variant("(sa{sv})", (options.protocol, {"reason": GLib.Variant("s", "dbus_open.py")})), None,
            Gio.DBusCallFlags.ALLOW_INTERACTIVE_AUTHORIZATION, -1, None, None)
        index, state["claim"] = reply.unpack()
        descriptor = fds.steal_fds()[index]  # non-blocking; the claim is ours while this connection lives
        print(f"opened {path} as {state['claim']}", flush=True)
        GLib.unix_fd_add_full(GLib.PRIORITY_DEFAULT, descriptor, GLib.IOCondition.IN, on_readable)

    # Broken first, then the descriptor dies: subscribed before the claim exists, so that none is missed.
    bus.signal_subscribe(SERVICE, "org.accmon.Accmon1.Claim", "Broken", None, None, Gio.DBusSignalFlags.NONE,
                         on_broken)
    for found in manager.get_objects():
        open_accessory(found)
    if state["claim"] is None:
        print(f"waiting for an accessory that speaks {options.protocol}", flush=True)
    manager.connect("object-added", lambda _, found: open_accessory(found))
    GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signal.SIGINT, loop.quit)
    GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signal.SIGTERM, loop.quit)
    if options.seconds is not None:
        GLib.timeout_add(int(options.seconds * 1000), loop.quit)
    loop.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
