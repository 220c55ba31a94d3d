#!/usr/bin/python3
"""What the real libudev makes of udev monitor datagrams: the reference for accmond's own parser.

Run under umockdev-wrapper (its preload turns libudev's netlink socket into a Unix datagram socket at
$UMOCKDEV_DIR/event<fd>, and reports every datagram as udevd's, sent by root). Reads one datagram per line on stdin,
in hex; sends each to a libudev monitor (`udev_monitor_new_from_netlink(udev, "udev")`, no filters) and writes one
JSON line per datagram: `null` when `udev_monitor_receive_device` dropped it, else the device's action, devpath,
subsystem, devtype, devnode, sysname, seqnum and every property, each string in hex (libudev hands out bytes).
"""
import ctypes
import json
import os
import select
import socket
import sys

import gi

gi.require_version("UMockdev", "1.0")
from gi.repository import UMockdev  # noqa: E402

testbed = UMockdev.Testbed.new()  # sets UMOCKDEV_DIR in the C environment, where the preload and libudev read it
udev_dir = testbed.get_root_dir()

lib = ctypes.CDLL("libudev.so.1")
for name, result, arguments in [
    ("udev_new", ctypes.c_void_p, []),
    ("udev_monitor_new_from_netlink", ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_char_p]),
    ("udev_monitor_enable_receiving", ctypes.c_int, [ctypes.c_void_p]),
    ("udev_monitor_get_fd", ctypes.c_int, [ctypes.c_void_p]),
    ("udev_monitor_receive_device", ctypes.c_void_p, [ctypes.c_void_p]),
    ("udev_device_unref", ctypes.c_void_p, [ctypes.c_void_p]),
    ("udev_device_get_seqnum", ctypes.c_ulonglong, [ctypes.c_void_p]),
    ("udev_device_get_properties_list_entry", ctypes.c_void_p, [ctypes.c_void_p]),
    ("udev_list_entry_get_next", ctypes.c_void_p, [ctypes.c_void_p]),
    ("udev_list_entry_get_name", ctypes.c_char_p, [ctypes.c_void_p]),
    ("udev_list_entry_get_value", ctypes.c_char_p, [ctypes.c_void_p]),
] + [(f"udev_device_get_{field}", ctypes.c_char_p, [ctypes.c_void_p])
     for field in ("action", "devpath", "subsystem", "devtype", "devnode", "sysname")]:
    function = getattr(lib, name)
    function.restype = result
    function.argtypes = arguments

udev = lib.udev_new()
monitor = lib.udev_monitor_new_from_netlink(udev, b"udev")
if not monitor or lib.udev_monitor_enable_receiving(monitor) < 0:
    sys.exit("libudev_receive: cannot open a libudev monitor (not under umockdev-wrapper?)")
monitor_fd = lib.udev_monitor_get_fd(monitor)
address = os.path.join(udev_dir, f"event{monitor_fd}")
sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)


def hex_text(value):
    return None if value is None else value.hex()


for line in sys.stdin:
    sender.sendto(bytes.fromhex(line.strip()), address)
    device = lib.udev_monitor_receive_device(monitor)
    if not device:
        result = None
    else:
        result = {field: hex_text(getattr(lib, f"udev_device_get_{field}")(device))
                  for field in ("action", "devpath", "subsystem", "devtype", "devnode", "sysname")}
        result["seqnum"] = lib.udev_device_get_seqnum(device)
        properties = {}
        entry = lib.udev_device_get_properties_list_entry(device)
        while entry:
            properties[hex_text(lib.udev_list_entry_get_name(entry))] = hex_text(lib.udev_list_entry_get_value(entry) or b"")
            entry = lib.udev_list_entry_get_next(entry)
        result["properties"] = properties
        lib.udev_device_unref(device)
    # Nothing may be left behind: each answer belongs to its own datagram.
    if select.select([monitor_fd], [], [], 0)[0]:
        sys.exit("libudev_receive: a datagram was left unread")
    print(json.dumps(result), flush=True)
