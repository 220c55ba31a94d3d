#!/usr/bin/python3
"""accmon-nodes in a umockdev test bed: its udev check (libudev, from a node's device number) meets devices that
accmon's rules marked (ACCMON_KIND) and devices they did not.

Run under umockdev-wrapper (the preload), as root:

    umockdev-wrapper /usr/bin/python3 Tests/umockdev/node_helper.py SOCKET DEVICES -- HELPER [ARGS...]

DEVICES is a JSON list of serial ports to create, each {"name": "ttyUSB7", "dev": "188:7", "port": "1-3",
"properties": {...}}: a USB device on port `port` with one interface and the tty below it, whose `dev` attribute
makes /sys/dev/char/MAJOR:MINOR point at it, and whose udev properties are `properties` (for example ACCMON_KIND,
ACCMON_CLAIMED_PORT). Then starts `systemd-socket-activate -l SOCKET HELPER ARGS...` in the test bed (it inherits
the preload and UMOCKDEV_DIR), prints one JSON line {"ready": true, "devices": {name: syspath}} once SOCKET exists,
and on SIGTERM stops it and exits with its status.
"""
import json
import os
import signal
import subprocess
import sys
import time

import gi

gi.require_version("UMockdev", "1.0")
from gi.repository import UMockdev  # noqa: E402


def main():
    separator = sys.argv.index("--")
    socket_path, devices = sys.argv[1], json.loads(sys.argv[2])
    helper = sys.argv[separator + 1:]
    testbed = UMockdev.Testbed.new()
    root_hub = testbed.add_device("usb", "usb1", None, ["busnum", "1", "devnum", "1", "bDeviceClass", "09"],
                                  ["DEVTYPE", "usb_device"])
    syspaths = {}
    for number, device in enumerate(devices, start=2):
        port = device["port"]
        usb = testbed.add_device("usb", port, root_hub,
                                 ["busnum", "1", "devnum", str(number), "idVendor", "0403", "idProduct", "6001",
                                  "authorized", "1"],
                                 ["DEVTYPE", "usb_device", "ACCMON_KIND", "usb"])
        interface = testbed.add_device("usb", f"{port}:1.0", usb, ["bInterfaceNumber", "00"], ["DEVTYPE", "usb_interface"])
        major, minor = device["dev"].split(":")
        properties = ["DEVNAME", f"/dev/{device['name']}", "MAJOR", major, "MINOR", minor]
        for name, value in device.get("properties", {}).items():
            properties += [name, value]
        syspaths[device["name"]] = testbed.add_device("tty", device["name"], interface, ["dev", device["dev"]],
                                                      properties)
    if os.path.exists(socket_path):  # an earlier run's: its existence must mean the new one listens
        os.unlink(socket_path)
    # systemd-socket-activate passes on only the variables named with -E: the preload's among them.
    child = subprocess.Popen(["systemd-socket-activate", "-l", socket_path, "-E", "LD_PRELOAD", "-E", "UMOCKDEV_DIR"]
                             + helper)

    def stop(*_):
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        sys.exit(child.returncode if child.returncode >= 0 else 128 - child.returncode)

    signal.signal(signal.SIGTERM, stop)
    deadline = time.monotonic() + 10
    while not os.path.exists(socket_path):
        if child.poll() is not None or time.monotonic() > deadline:
            sys.exit(f"node_helper.py: {socket_path} did not appear (helper status {child.poll()})")
        time.sleep(0.01)
    print(json.dumps({"ready": True, "devices": syspaths}), flush=True)
    for _ in sys.stdin:
        pass
    while True:
        signal.pause()


if __name__ == "__main__":
    main()
