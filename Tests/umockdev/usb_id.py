#!/usr/bin/python3
"""What udev's own `usb_id` builtin makes of USB devices' strings: the reference for the properties accmond trusts
instead of reading sysfs (`usbDeviceAttributes(fromProperties:)`).

Run under umockdev-wrapper. Reads one device per line on stdin, a JSON object with "manufacturer", "product" and
"serial", each the attribute's text or null (no such attribute). Creates each as a `usb_device` in a umockdev testbed
(vendor 1209, product 0001), runs `udevadm test-builtin usb_id SYSPATH` on it (udevadm inherits the preload, so it
reads the testbed's sysfs) and writes one JSON line per device: {"properties": {NAME: VALUE}}, the builtin's ID_*
properties, each value in hex (udev's values are bytes).
"""
import json
import subprocess
import sys

import gi

gi.require_version("UMockdev", "1.0")
from gi.repository import UMockdev  # noqa: E402

testbed = UMockdev.Testbed.new()  # sets UMOCKDEV_DIR in the environment, which udevadm inherits
hub = testbed.add_device("usb", "usb1", None, ["idVendor", "1d6b", "idProduct", "0002", "bDeviceClass", "09"],
                         ["DEVTYPE", "usb_device"])
for number, line in enumerate(sys.stdin, start=2):
    device = json.loads(line)
    attributes = ["idVendor", "1209", "idProduct", "0001", "bcdDevice", "0100", "bDeviceClass", "00"]
    for name in ("manufacturer", "product", "serial"):
        if device.get(name) is not None:
            attributes += [name, device[name]]
    syspath = testbed.add_device("usb", f"1-{number}", hub, attributes, ["DEVTYPE", "usb_device"])
    result = subprocess.run(["udevadm", "test-builtin", "usb_id", syspath], capture_output=True)
    if result.returncode != 0:
        sys.exit(f"usb_id.py: udevadm test-builtin usb_id {syspath} failed: {result.stderr.decode(errors='replace')}")
    properties = {}
    for entry in result.stdout.split(b"\n"):
        name, separator, value = entry.partition(b"=")
        if separator and name.startswith(b"ID_"):
            properties[name.decode()] = value.hex()
    print(json.dumps({"properties": properties}), flush=True)
    testbed.remove_device(syspath)
