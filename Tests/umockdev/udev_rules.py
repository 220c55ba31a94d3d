#!/usr/bin/python3
"""What udev makes of USB devices with accmon's own rules (udev-rules/70-accmon.rules) and no others: the reference
for the properties accmond takes from them (`usbDeviceAttributes(fromProperties:)`).

Run under umockdev-wrapper, as root. Reads one device per line on stdin, a JSON object with "removable" (the
attribute's text, or null for no such attribute) and "bDeviceClass". Creates each as a `usb_device` in a umockdev
testbed and runs `udevadm test --action=add SYSPATH` on it in a mount namespace of its own, where the only rules are
accmon's and /run/udev is empty (udevadm inherits the preload, so it reads the testbed's sysfs; the host's udev
database is not touched). Writes one JSON line per device: {"properties": {NAME: VALUE}}, the ACCMON_* and ID_*
properties udev set, each value in hex (udev's values are bytes).
"""
import json
import os
import subprocess
import sys

import gi

gi.require_version("UMockdev", "1.0")
from gi.repository import UMockdev  # noqa: E402

RULES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "udev-rules")
# A tmpfs on /run, not on /run/udev: a host without udevd running has no /run/udev to mount on.
ISOLATED = ("mount -t tmpfs tmpfs /run && mkdir -p /run/udev/rules.d && "
            "mount --bind \"$1\" /usr/lib/udev/rules.d && "
            "{ [ ! -d /etc/udev/rules.d ] || mount -t tmpfs tmpfs /etc/udev/rules.d; } && "
            "{ [ ! -d /usr/local/lib/udev/rules.d ] || mount -t tmpfs tmpfs /usr/local/lib/udev/rules.d; } && "
            "exec udevadm test --action=add \"$2\"")

testbed = UMockdev.Testbed.new()  # sets UMOCKDEV_DIR in the environment, which udevadm inherits
hub = testbed.add_device("usb", "usb1", None, ["idVendor", "1d6b", "idProduct", "0002", "bDeviceClass", "09"],
                         ["DEVTYPE", "usb_device"])
for number, line in enumerate(sys.stdin, start=2):
    device = json.loads(line)
    attributes = ["idVendor", "1209", "idProduct", "0001", "bcdDevice", "0100", "bDeviceClass", device["bDeviceClass"]]
    if device.get("removable") is not None:
        attributes += ["removable", device["removable"]]
    syspath = testbed.add_device("usb", f"1-{number}", hub, attributes, ["DEVTYPE", "usb_device"])
    result = subprocess.run(["unshare", "-m", "sh", "-c", ISOLATED, "sh", os.path.abspath(RULES), syspath],
                            capture_output=True)
    if result.returncode != 0:
        sys.exit(f"udev_rules.py: udevadm test {syspath} failed: {result.stderr.decode(errors='replace')}")
    properties = {}
    for entry in result.stdout.split(b"\n"):
        name, separator, value = entry.partition(b"=")
        if separator and (name.startswith(b"ACCMON_") or name.startswith(b"ID_")):
            properties[name.decode()] = value.hex()
    print(json.dumps({"properties": properties}), flush=True)
    testbed.remove_device(syspath)
