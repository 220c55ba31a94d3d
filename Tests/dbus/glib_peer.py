"""A bus peer made of GLib's own D-Bus client (Gio), driven by the D-Bus tests through its standard input and output,
one JSON object a line: it is what a desktop app is, run as whichever user the test picks (``setpriv``).

Usage: ``/usr/bin/python3 glib_peer.py BUS_ADDRESS [--manager]``. It prints ``{"ready": true, "name": UNIQUE_NAME}``
once connected (and, with ``--manager``, once its ``Gio.DBusObjectManagerClient`` for ``org.accmon.Accmon1`` has
its first view), then answers each command line with one line:

- ``{"op": "call", "path": P, "interface": I, "member": M, "args": GVARIANT_TEXT or null}``: a method call
  (arguments in GVariant's text format, such as ``"({'kind': <'usb'>},)"``) → ``{"ok": BODY}`` or
  ``{"error": NAME, "message": TEXT}``.
- ``{"op": "async_call", "tag": T, ...}``: the same call, not awaited; ``{"op": "async_result", "tag": T}`` gives its
  outcome once it came (``null`` before). A passed descriptor (`h`) is given as ``{"fd": N}``, this peer's descriptor,
  which ``fd_write`` (``data``), ``fd_read`` (``timeout``) and ``fd_close`` use.
- ``{"op": "objects"}``: the object manager client's objects → ``{"ok": {path: {interface: {property: value}}}}``.
- ``{"op": "messages", "from": N}``: every message this connection received from the N-th on, in the order the bus
  delivered them (a filter on the connection sees each first) → ``{"ok": [...], "next": M}``.
- ``{"op": "flood", "count": N, "path": ..., "interface": ..., "member": ..., "args": ...}``: N calls at once, not
  awaited; ``{"op": "flood_result"}`` counts their replies by outcome (``ok`` or the error's name).
- ``{"op": "auto_ack", "path": P}``: from now on, acknowledge each ``Events`` signal on P when it arrives.
- ``{"op": "quit"}``.
"""

import errno
import json
import os
import select
import sys
import threading
import time
from typing import Any, Dict, List

import gi

gi.require_version("Gio", "2.0")
from gi.repository import Gio, GLib  # noqa: E402

SERVICE = "org.accmon.Accmon1"
MANAGER_PATH = "/org/accmon/Accmon1"
MESSAGE_TYPES = {
    Gio.DBusMessageType.METHOD_CALL: "call",
    Gio.DBusMessageType.METHOD_RETURN: "return",
    Gio.DBusMessageType.ERROR: "error",
    Gio.DBusMessageType.SIGNAL: "signal",
}


def plain(value: Any) -> Any:
    """A value of ``Variant.unpack()`` as JSON can carry it."""
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    if isinstance(value, dict):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, GLib.Variant):
        return plain(value.unpack())
    return value


class Peer:
    def __init__(self, address: str, with_manager: bool) -> None:
        flags = Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION
        self.address = address
        self.connection = Gio.DBusConnection.new_for_address_sync(address, flags, None, None)
        self.lock = threading.Lock()
        self.received: List[Dict[str, Any]] = []
        self.auto_ack: set = set()
        self.flood_results: Dict[str, int] = {}
        self.async_results: Dict[str, Any] = {}
        #: Descriptors received (by the fd number this process holds), for the `fd_*` commands.
        self.descriptors: Dict[int, int] = {}
        self.connection.add_filter(self.record)
        self.manager = None
        if with_manager:
            self.manager = Gio.DBusObjectManagerClient.new_sync(
                self.connection, Gio.DBusObjectManagerClientFlags.NONE, SERVICE, MANAGER_PATH, None, None, None
            )
        self.loop = GLib.MainLoop()

    def record(self, connection: Gio.DBusConnection, message: Gio.DBusMessage, incoming: bool) -> Gio.DBusMessage:
        """Runs on GDBus's worker thread for every message, in the order they arrive."""
        if not incoming:
            return message
        body = message.get_body()
        entry = {
            "type": MESSAGE_TYPES.get(message.get_message_type(), "other"),
            "serial": message.get_serial(),
            "reply_serial": message.get_reply_serial(),
            "sender": message.get_sender(),
            "path": message.get_path(),
            "interface": message.get_interface(),
            "member": message.get_member(),
            "error": message.get_error_name(),
            "signature": body.get_type_string() if body is not None else "",
            "body": plain(body.unpack()) if body is not None else [],
        }
        with self.lock:
            self.received.append(entry)
        if entry["member"] == "Events" and entry["path"] in self.auto_ack and entry["body"]:
            last = max(event[1] for event in entry["body"][0])
            GLib.idle_add(self.acknowledge, entry["path"], last)
        return message

    def acknowledge(self, path: str, sequence: int) -> bool:
        self.connection.call(
            SERVICE, path, "org.accmon.Accmon1.Subscription", "Ack", GLib.Variant("(t)", (sequence,)),
            None, Gio.DBusCallFlags.NONE, -1, None, None, None,
        )  # fmt: skip
        return False

    def flooded(self, connection: Gio.DBusConnection, result: Gio.AsyncResult, _: Any) -> None:
        try:
            connection.call_finish(result)
            outcome = "ok"
        except GLib.Error as error:
            outcome = Gio.DBusError.get_remote_error(error) or error.message
        self.flood_results[outcome] = self.flood_results.get(outcome, 0) + 1

    def async_done(self, connection: Gio.DBusConnection, result: Gio.AsyncResult, tag: str) -> None:
        try:
            reply, fds = connection.call_with_unix_fd_list_finish(result)
            self.async_results[tag] = {"ok": self.unpack_with_fds(reply, fds)}
        except GLib.Error as error:
            name = Gio.DBusError.get_remote_error(error)
            Gio.DBusError.strip_remote_error(error)
            self.async_results[tag] = {"error": name, "message": error.message}

    def unpack_with_fds(self, reply: GLib.Variant, fds: Any) -> Any:
        """The reply's values; a descriptor (`h`) as {"fd": N}, N this process's descriptor (kept open)."""
        values = plain(reply.unpack()) if reply is not None else []
        if fds is not None and reply is not None and "h" in reply.get_type_string():
            stolen = fds.steal_fds()
            values = [{"fd": stolen[value]} if kind == "h" else value
                      for kind, value in zip(reply.get_type_string()[1:-1], values)]  # fmt: skip
        return values

    def handle(self, command: Dict[str, Any]) -> Dict[str, Any]:
        op = command["op"]
        if op == "call":
            args = GLib.Variant.parse(None, command["args"], None, None) if command.get("args") else None
            try:
                reply, fds = self.connection.call_with_unix_fd_list_sync(
                    SERVICE, command["path"], command["interface"], command["member"], args, None,
                    Gio.DBusCallFlags.NONE, command.get("timeout", 10000), None, None,
                )  # fmt: skip
            except GLib.Error as error:
                name = Gio.DBusError.get_remote_error(error)
                Gio.DBusError.strip_remote_error(error)
                return {"error": name, "message": error.message}
            return {"ok": self.unpack_with_fds(reply, fds)}
        if op == "fd_write":
            return {"ok": os.write(command["fd"], command["data"].encode())}
        if op == "fd_read":
            # What the descriptor gives within `timeout` seconds ("" at its end; the error's name when it fails).
            ready, _, _ = select.select([command["fd"]], [], [], command.get("timeout", 5))
            if not ready:
                return {"ok": None}
            try:
                return {"ok": os.read(command["fd"], 4096).decode(errors="replace")}
            except OSError as error:
                return {"error": errno.errorcode.get(error.errno, str(error.errno)), "message": str(error)}
        if op == "fd_close":
            os.close(command["fd"])
            return {"ok": True}
        if op == "async_call":
            # A call not awaited (a wait in line): its outcome, with a passed descriptor, is kept under `tag`.
            args = GLib.Variant.parse(None, command["args"], None, None) if command.get("args") else None
            tag = command["tag"]
            self.async_results[tag] = None
            self.connection.call_with_unix_fd_list(
                SERVICE, command["path"], command["interface"], command["member"], args, None,
                Gio.DBusCallFlags.NONE, 120000, None, None, self.async_done, tag,
            )  # fmt: skip
            return {"ok": tag}
        if op == "async_result":
            return {"ok": self.async_results.get(command["tag"])}
        if op == "open_cycles":
            # `claims` times: `opens` Opens of the accessory at `path` (the first claims it, the others are more
            # descriptors on the same claim), each descriptor closed, then the claim released; in this process, so
            # that a thousand opens take what accmond takes, not this harness.
            interface = "org.accmon.Accmon1.Accessory"
            opened = 0
            for _ in range(command["claims"]):
                claim = None
                for _ in range(command["opens"]):
                    reply, fds = self.connection.call_with_unix_fd_list_sync(
                        SERVICE, command["path"], interface, "Open", GLib.Variant("(sa{sv})", ("", {})), None,
                        Gio.DBusCallFlags.NONE, 10000, None, None,
                    )  # fmt: skip
                    for descriptor in fds.steal_fds():
                        os.close(descriptor)
                    claim = reply.unpack()[1]
                    opened += 1
                self.connection.call_sync(SERVICE, claim, "org.accmon.Accmon1.Claim", "Release", None, None,
                                          Gio.DBusCallFlags.NONE, 10000, None)  # fmt: skip
            return {"ok": opened}
        if op == "open_and_leave":
            # `count` times: a connection of its own sends an Open (in line if need be) and leaves the bus `i % spread` tenths of a
            # millisecond later, so that callers leave at every step of an Open (before accmond reads the call,
            # while it checks, waits in line, claims, has the node opened, or once the reply is on its way).
            flags = Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION
            for i in range(command["count"]):
                caller = Gio.DBusConnection.new_for_address_sync(self.address, flags, None, None)
                message = Gio.DBusMessage.new_method_call(SERVICE, command["path"], "org.accmon.Accmon1.Accessory", "Open")
                message.set_body(GLib.Variant("(sa{sv})", ("", {"wait": GLib.Variant("b", True)})))
                caller.send_message(message, Gio.DBusSendMessageFlags.NONE)
                caller.flush_sync(None)
                time.sleep((i % command["spread"]) / 10000)
                caller.close_sync(None)
            return {"ok": command["count"]}
        if op == "objects":
            assert self.manager is not None, "started without --manager"
            objects: Dict[str, Any] = {}
            for found in self.manager.get_objects():
                interfaces = {}
                for interface in found.get_interfaces():
                    interfaces[interface.get_interface_name()] = {
                        name: plain(interface.get_cached_property(name)) for name in interface.get_cached_property_names()
                    }
                objects[found.get_object_path()] = interfaces
            return {"ok": objects}
        if op == "messages":
            with self.lock:
                start = command.get("from", 0)
                return {"ok": self.received[start:], "next": len(self.received)}
        if op == "flood":
            # Many calls at once, none awaited: the replies are counted as they come.
            args = GLib.Variant.parse(None, command["args"], None, None) if command.get("args") else None
            for _ in range(command["count"]):
                self.connection.call(
                    SERVICE, command["path"], command["interface"], command["member"], args, None,
                    Gio.DBusCallFlags.NONE, 60000, None, self.flooded, None,
                )  # fmt: skip
            return {"ok": command["count"]}
        if op == "flood_result":
            return {"ok": dict(self.flood_results)}
        if op == "auto_ack":
            self.auto_ack.add(command["path"])
            return {"ok": True}
        if op == "quit":
            self.loop.quit()
            return {"ok": True}
        return {"error": "unknown-op", "message": op}

    def on_input(self, source: int, condition: GLib.IOCondition) -> bool:
        line = sys.stdin.readline()
        if not line:
            self.loop.quit()
            return False
        try:
            answer = self.handle(json.loads(line))
        except Exception as error:  # a test's mistake (a bad GVariant text): said, and the peer goes on
            answer = {"error": "peer-exception", "message": f"{type(error).__name__}: {error}"}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
        return True

    def run(self) -> None:
        sys.stdout.write(json.dumps({"ready": True, "name": self.connection.get_unique_name()}) + "\n")
        sys.stdout.flush()
        GLib.io_add_watch(sys.stdin.fileno(), GLib.PRIORITY_DEFAULT, GLib.IO_IN | GLib.IO_HUP, self.on_input)
        self.loop.run()


def main() -> None:
    address = sys.argv[1]
    Peer(address, "--manager" in sys.argv[2:]).run()


if __name__ == "__main__":
    main()
