"""The receivers' side of bench/udev_stream.py: each receiver's output, timed line by line by bench/tools/stamp.c
into a file, read as it grows, and each line matched to the event sent (its index in the stream, and the stamp).
Every receiver but udevadm forwards the serial number uevent_blast puts in each event (B<index of the add>);
udevadm prints none, so its lines are matched by (devpath, action, occurrence)."""
import re

SERIAL = re.compile(r'"serialNumber":"B(\d+)"')
TYPE = re.compile(r'"type":"(connect|disconnect)"')


class Follower:
    """Reads a stamp file as it grows."""

    def __init__(self, path):
        self.path, self.offset, self.partial = path, 0, ""

    def new_lines(self):
        with open(self.path) as source:
            source.seek(self.offset)
            data = source.read()
            self.offset = source.tell()
        data = self.partial + data
        lines = data.split("\n")
        self.partial = lines.pop()
        return lines


def parse_watch(line):
    stamp_text, _, body = line.partition(" ")
    serial, kind = SERIAL.search(body), TYPE.search(body)
    if not serial or not kind:
        return None
    return int(serial.group(1)) + (1 if kind.group(1) == "disconnect" else 0), int(stamp_text)


def parse_client(line):
    parts = line.split()
    # "STAMP connect|disconnect B<serial> DEVPATH", and for `relay serve --descriptors` the hash after an add's path
    if len(parts) not in (4, 5) or parts[1] not in ("connect", "disconnect") or not parts[2].startswith("B"):
        return None
    return int(parts[2][1:]) + (1 if parts[1] == "disconnect" else 0), int(parts[0])


class UdevadmLines:
    """Matches `udevadm monitor --udev` lines to the stream's events; one for the whole run, as it counts each
    device's adds and removes so far (`devpath_index`: {devpath: device number}, of `devices` devices)."""

    def __init__(self, devpath_index, devices):
        self.devpath_index = devpath_index
        self.devices = devices
        self.seen = {}  # (device, action) -> occurrences so far

    def parse(self, line):
        # "T UDEV  [12345.678901] add      /devices/.../1-3 (usb)"
        parts = line.split()
        if len(parts) < 6 or parts[1] != "UDEV":
            return None
        action, devpath = parts[3], parts[4]
        device = self.devpath_index.get(devpath)
        if device is None or action not in ("add", "remove"):
            return None
        occurrence = self.seen.get((device, action), 0)
        self.seen[(device, action)] = occurrence + 1
        pair = device + occurrence * self.devices
        return 2 * pair + (1 if action == "remove" else 0), int(parts[0])
