#!/usr/bin/python3
"""accmon-nodes in a umockdev test bed: its udev check (libudev, from a node's device number) meets devices that
accmon's rules marked (ACCMON_KIND) and devices they did not.

Run under umockdev-wrapper (the preload), as root:

    umockdev-wrapper /usr/bin/python3 Tests/umockdev/node_helper.py SOCKET DEVICES DEV -- HELPER [ARGS...]

DEVICES is a JSON list of devices to create, each {"name": "ttyUSB7", "dev": "188:7", "port": "1-3", "type": ...,
"properties": {...}}, whose `dev` attribute makes /sys/dev/char/MAJOR:MINOR point at the node's device, and whose
udev properties are `properties` (for example ACCMON_KIND, ACCMON_CLAIMED_PORT). `type` is
- "serial" (the default): a USB device on port `port` with one interface and the tty below it;
- "usbfs": the USB device itself on port `port` is the node's device (/dev/bus/usb/...), plugged in a root hub port
  whose `disable` attribute exists and whose hub switches port power (`power/pm_qos_no_power_off`), with the
  kernel's `port` link from the device to it; with "switched": false, the port has no power switching;
- "bluetooth-input": a Bluetooth HID device's input event node: event -> input -> hid -> hci0:N -> hci0 -> the
  adapter's USB interface -> the adapter, a USB device on port `port` (marked `usb` too, as 70-accmon.rules does).

A USB device's `authorized` attribute is watched: when a write sets it to 1 again, the node named `name` in the
directory DEV is made again (a new inode, root:dialout 0660), as the kernel and udev do after a re-authorization.

Then starts `systemd-socket-activate -l SOCKET HELPER ARGS...` in the test bed (it inherits the preload and
UMOCKDEV_DIR), prints one JSON line {"ready": true, "devices": {name: syspath}, "root": the test bed's directory} once SOCKET
listens, and on SIGTERM
stops it and exits with its status.
"""
import ctypes
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time

import gi

gi.require_version("UMockdev", "1.0")
from gi.repository import UMockdev  # noqa: E402


def usb_device(testbed, parent, port, number, kind="usb"):
    return testbed.add_device("usb", port, parent,
                              ["busnum", "1", "devnum", str(number), "idVendor", "0403", "idProduct", "6001",
                               "authorized", "1"],
                              ["DEVTYPE", "usb_device", "ACCMON_KIND", kind])


def node_properties(device):
    major, minor = device["dev"].split(":")
    properties = ["MAJOR", major, "MINOR", minor]
    for name, value in device.get("properties", {}).items():
        properties += [name, value]
    return properties


def add(testbed, root_hub, root_hub_interface, number, device):
    """Adds `device` and returns (its node's syspath, the sysfs path of its USB device's authorized attribute)."""
    port = device["port"]
    kind = device.get("type", "serial")
    if kind == "serial":
        usb = usb_device(testbed, root_hub, port, number)
        interface = testbed.add_device("usb", f"{port}:1.0", usb, ["bInterfaceNumber", "00"], ["DEVTYPE", "usb_interface"])
        tty = testbed.add_device("tty", device["name"], interface, ["dev", device["dev"]],
                                 ["DEVNAME", f"/dev/{device['name']}"] + node_properties(device))
        return tty, usb
    if kind == "usbfs":
        hub_port = testbed.add_device("usb", f"usb1-port{port.split('-')[1]}", root_hub_interface,
                                      ["disable", "0"], ["DEVTYPE", "usb_port"])
        if device.get("switched", True):
            power = os.path.join(testbed.get_root_dir() + hub_port, "power")
            os.makedirs(power, exist_ok=True)
            with open(os.path.join(power, "pm_qos_no_power_off"), "w") as attribute:
                attribute.write("0\n")
        usb = testbed.add_device("usb", port, root_hub,
                                 ["busnum", "1", "devnum", str(number), "authorized", "1", "dev", device["dev"]],
                                 ["DEVTYPE", "usb_device", "DEVNAME", f"/dev/bus/usb/001/{number:03d}"]
                                 + node_properties(device))
        os.symlink(os.path.relpath(testbed.get_root_dir() + hub_port, testbed.get_root_dir() + usb),
                   testbed.get_root_dir() + usb + "/port")
        return usb, usb
    if kind == "bluetooth-input":
        adapter = usb_device(testbed, root_hub, port, number)
        interface = testbed.add_device("usb", f"{port}:1.0", adapter, ["bInterfaceNumber", "00"],
                                       ["DEVTYPE", "usb_interface"])
        hci = testbed.add_device("bluetooth", "hci0", interface, [], ["DEVTYPE", "host"])
        link = testbed.add_device("bluetooth", "hci0:256", hci, [], ["DEVTYPE", "link"])
        hid = testbed.add_device("hid", "0005:05AC:0265.0001", link, [], ["HID_ID", "0005:000005AC:00000265"])
        input_device = testbed.add_device("input", "input9", hid, [], [])
        event = testbed.add_device("input", device["name"], input_device, ["dev", device["dev"]],
                                   ["DEVNAME", f"/dev/input/{device['name']}"] + node_properties(device))
        return event, adapter
    raise SystemExit(f"node_helper.py: unknown device type {kind!r}")


def recreate_on_reauthorization(watched, dev):
    """Makes each node in `dev` again once its USB device's authorized attribute is written back to 1."""
    def state(path):
        status = os.stat(path)
        with open(path) as attribute:
            return status.st_mtime_ns, attribute.read().strip()

    # Signals are the main thread's (its pause() must wake up for SIGTERM): not delivered to this one.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    seen = {path: state(path) for path in watched}
    while True:
        for path, devices in watched.items():
            now = state(path)
            if now != seen[path] and now[1] == "1":
                for name, number in devices:
                    node = os.path.join(dev, name)
                    if os.path.exists(node):
                        os.unlink(node)
                        os.mknod(node, stat.S_IFCHR | 0o660, os.makedev(*number))
                        os.chown(node, 0, 20)
                        os.chmod(node, 0o660)
            seen[path] = now
        time.sleep(0.005)


def main():
    separator = sys.argv.index("--")
    socket_path, devices, dev = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
    helper = sys.argv[separator + 1:]
    testbed = UMockdev.Testbed.new()
    root_hub = testbed.add_device("usb", "usb1", None, ["busnum", "1", "devnum", "1", "bDeviceClass", "09"],
                                  ["DEVTYPE", "usb_device"])
    root_hub_interface = testbed.add_device("usb", "1-0:1.0", root_hub, ["bInterfaceNumber", "00"],
                                            ["DEVTYPE", "usb_interface"])
    syspaths = {}
    watched = {}
    for number, device in enumerate(devices, start=2):
        syspaths[device["name"]], usb = add(testbed, root_hub, root_hub_interface, number, device)
        major, minor = device["dev"].split(":")
        watched.setdefault(f"{usb}/authorized", []).append((device["name"], (int(major), int(minor))))
    threading.Thread(target=recreate_on_reauthorization, args=(watched, dev), daemon=True).start()
    if os.path.exists(socket_path):  # an earlier run's: its existence must mean the new one listens
        os.unlink(socket_path)
    # systemd-socket-activate passes on only the variables named with -E: the preload's among them. It becomes the
    # helper (exec), which dies with this script (PR_SET_PDEATHSIG), however the script ends.
    libc = ctypes.CDLL(None, use_errno=True)
    child = subprocess.Popen(["systemd-socket-activate", "-l", socket_path, "-E", "LD_PRELOAD", "-E", "UMOCKDEV_DIR"]
                             + helper, preexec_fn=lambda: libc.prctl(1, signal.SIGKILL))

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
    # Listening, not only bound (the file exists from bind(2) on; a connect before listen(2) is refused).
    deadline = time.monotonic() + 10
    while True:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
                probe.connect(socket_path)
            break
        except OSError:
            if child.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"node_helper.py: {socket_path} does not listen (helper status {child.poll()})")
            time.sleep(0.01)
    print(json.dumps({"ready": True, "devices": syspaths, "root": testbed.get_root_dir()}), flush=True)
    for _ in sys.stdin:
        pass
    while True:
        signal.pause()


if __name__ == "__main__":
    main()
