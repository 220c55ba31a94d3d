"""An app in a Flatpak-like sandbox (test_sandbox.py runs it under bubblewrap, with the system bus only through
xdg-dbus-proxy --talk=org.accmon.Accmon1): it finds a serial accessory through accmond's object manager, opens it
with Accessory.Open, talks to it through the descriptor it is handed, and is told when its claim is broken.

Prints one JSON line per step on standard output; reads "go" lines on standard input between steps.
"""

import json
import os
import select
import sys

import gi

gi.require_version("Gio", "2.0")
from gi.repository import Gio, GLib  # noqa: E402

SERVICE = "org.accmon.Accmon1"


def say(**fields):
    print(json.dumps(fields), flush=True)


def main():
    node = sys.argv[1]
    # What the sandbox hides: the node, accmon's socket, the host's /sys.
    say(step="sandbox", node_visible=os.path.exists(node), socket_visible=os.path.exists("/run/accmon"),
        sys_visible=os.path.exists("/sys/devices"))
    bus = Gio.bus_get_sync(Gio.BusType.SYSTEM, None)
    manager = Gio.DBusObjectManagerClient.new_sync(
        bus, Gio.DBusObjectManagerClientFlags.NONE, SERVICE, "/org/accmon/Accmon1", None, None, None)
    serial = None
    for found in manager.get_objects():
        accessory = found.get_interface("org.accmon.Accmon1.Accessory")
        if accessory.get_cached_property("Kind").unpack() == "serial":
            serial = found.get_object_path()
    say(step="found", path=serial)
    broken = []
    bus.signal_subscribe(SERVICE, "org.accmon.Accmon1.Claim", "Broken", None, None, Gio.DBusSignalFlags.NONE,
                         lambda *args: broken.append(args[5].unpack()[0]))
    reply, fds = bus.call_with_unix_fd_list_sync(
        SERVICE, serial, "org.accmon.Accmon1.Accessory", "Open", GLib.Variant("(sa{sv})", ("", {})), None,
        Gio.DBusCallFlags.NONE, -1, None, None)
    descriptor = fds.steal_fds()[reply.unpack()[0]]
    say(step="opened", claim=reply.unpack()[1])
    os.write(descriptor, b"hello from the sandbox")
    sys.stdin.readline()  # the test wrote back through the pty's other end
    ready, _, _ = select.select([descriptor], [], [], 5)
    say(step="read", data=os.read(descriptor, 4096).decode() if ready else None)
    sys.stdin.readline()  # the test broke the claim
    context = GLib.MainContext.default()
    deadline = GLib.get_monotonic_time() + 10_000_000
    while not broken and GLib.get_monotonic_time() < deadline:
        context.iteration(False)
        GLib.usleep(10_000)
    # Told first, cut right after: the descriptor dies (TIOCVHANGUP for a pty) once accmond has cut it.
    after = "written"
    deadline = GLib.get_monotonic_time() + 10_000_000
    while after == "written" and GLib.get_monotonic_time() < deadline:
        try:
            os.write(descriptor, b"x")
            GLib.usleep(20_000)
        except OSError as error:
            after = os.strerror(error.errno)
    say(step="broken", broken=broken, write_after=after)


if __name__ == "__main__":
    main()
