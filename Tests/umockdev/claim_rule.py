#!/usr/bin/python3
"""What udev makes of a USB serial adapter's nodes (its usbfs node and its tty) with and without accmon's port mark:
the reference for udev-rules/72-accmon-claims.rules.

Run under umockdev-wrapper, as root. Reads one scenario per line on stdin, a JSON object: {"node": "tty" or "usb",
"action": "add" or "change", "marked": PORT or null}. The adapter sits on port 1-3. Each scenario runs
`udevadm test --action=ACTION SYSPATH` in a mount namespace of its own, where the rules are this system's
(/usr/lib/udev/rules.d), accmon's (udev-rules/) and one an admin might add to give seat users serial ports
(70-uaccess-serial.rules: TAG+="uaccess"), /run is empty but for the mark /run/accmon-nodes/ports/PORT when given,
and /etc/udev/rules.d is hidden. Writes one JSON line per scenario: {"owner": UID, "group": GID, "mode": "0660",
"current_tags": [...], "properties": {NAME: VALUE}} where owner, group and mode are what udev would give the node:
the last OWNER, GROUP and MODE a rule set (udev logs each as "FILE:LINE OWNER 0"), and for no MODE, 0660 when a
group was set and 0600 otherwise, as udev does.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import gi

gi.require_version("UMockdev", "1.0")
from gi.repository import UMockdev  # noqa: E402

REPOSITORY_RULES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "udev-rules")
ISOLATED = ("mount -t tmpfs tmpfs /run && mkdir -p /run/udev/rules.d && "
            "{ [ -z \"$3\" ] || { mkdir -p /run/accmon-nodes/ports && touch \"/run/accmon-nodes/ports/$3\"; }; } && "
            "mount --bind \"$1\" /usr/lib/udev/rules.d && "
            "{ [ ! -d /etc/udev/rules.d ] || mount -t tmpfs tmpfs /etc/udev/rules.d; } && "
            "{ [ ! -d /usr/local/lib/udev/rules.d ] || mount -t tmpfs tmpfs /usr/local/lib/udev/rules.d; } && "
            "exec udevadm test --action=\"$4\" \"$2\"")
ASSIGNMENT = re.compile(r"^\S+: \S+\.rules:\d+ (OWNER|GROUP|MODE) (\S+)$")

rules = tempfile.mkdtemp(prefix="accmon-rules-")
for directory in ["/usr/lib/udev/rules.d", REPOSITORY_RULES]:
    for name in os.listdir(directory):
        if name.endswith(".rules"):
            shutil.copy(os.path.join(directory, name), rules)
with open(os.path.join(rules, "70-uaccess-serial.rules"), "w") as extra:
    extra.write('SUBSYSTEM=="tty", KERNEL=="ttyUSB[0-9]*", TAG+="uaccess"\n')

testbed = UMockdev.Testbed.new()
hub = testbed.add_device("usb", "usb1", None, ["busnum", "1", "devnum", "1", "bDeviceClass", "09", "idVendor", "1d6b",
                                               "idProduct", "0002"], ["DEVTYPE", "usb_device"])
usb = testbed.add_device("usb", "1-3", hub, ["busnum", "1", "devnum", "5", "idVendor", "0403", "idProduct", "6001",
                                             "bDeviceClass", "00", "removable", "removable", "dev", "189:4"],
                         ["DEVTYPE", "usb_device", "DEVNAME", "/dev/bus/usb/001/005", "MAJOR", "189", "MINOR", "4"])
interface = testbed.add_device("usb", "1-3:1.0", usb, ["bInterfaceNumber", "00"], ["DEVTYPE", "usb_interface"])
tty = testbed.add_device("tty", "ttyUSB7", interface, ["dev", "188:7"],
                         ["DEVNAME", "/dev/ttyUSB7", "MAJOR", "188", "MINOR", "7"])
try:
    for line in sys.stdin:
        scenario = json.loads(line)
        syspath = tty if scenario["node"] == "tty" else usb
        result = subprocess.run(["unshare", "-m", "sh", "-c", ISOLATED, "sh", rules, syspath,
                                 scenario.get("marked") or "", scenario.get("action", "add")], capture_output=True)
        output = result.stdout.decode(errors="replace") + result.stderr.decode(errors="replace")
        if result.returncode != 0:
            sys.exit(f"claim_rule.py: udevadm test {syspath} failed: {output}")
        assigned = {}
        properties = {}
        for entry in output.split("\n"):
            match = ASSIGNMENT.match(entry)
            if match:
                assigned[match.group(1)] = match.group(2)
            name, separator, value = entry.partition("=")
            if separator and re.fullmatch(r"[A-Z_]+", name):
                properties[name] = value
        group = int(assigned.get("GROUP", "0"))
        mode = assigned.get("MODE") or ("0660" if "GROUP" in assigned else "0600")
        print(json.dumps({"owner": int(assigned.get("OWNER", "0")), "group": group, "mode": mode.zfill(4),
                          "current_tags": sorted(t for t in properties.get("CURRENT_TAGS", "").split(":") if t),
                          "properties": {k: v for k, v in properties.items()
                                         if k.startswith("ACCMON_") or k == "ID_SEAT"}}), flush=True)
finally:
    shutil.rmtree(rules)
