#!/usr/bin/python3
"""Writes each udev monitor datagram it receives to a file: the udev fuzzer's seeds, in the real format.

Stands in for accmond under Tests/umockdev/testbed.py (Fuzz/tools/make-udev-seeds.sh drives it): it opens a libudev
monitor on the "udev" group, which the umockdev preload turns into a Unix datagram socket, prints "listening on" to
stderr as accmond does, and saves every datagram the testbed's uevents bring, whole, as OUTDIR/NNN-ACTION-SUBSYSTEM,
until SIGTERM.

    udev-capture.py OUTDIR
"""
import ctypes
import os
import signal
import socket
import sys

lib = ctypes.CDLL("libudev.so.1")
lib.udev_new.restype = ctypes.c_void_p
lib.udev_monitor_new_from_netlink.restype = ctypes.c_void_p
lib.udev_monitor_new_from_netlink.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
lib.udev_monitor_enable_receiving.argtypes = [ctypes.c_void_p]
lib.udev_monitor_get_fd.argtypes = [ctypes.c_void_p]


def field(block, key):
    for entry in block.split(b"\0"):
        if entry.startswith(key + b"="):
            return entry[len(key) + 1:].decode("ascii", "replace")
    return "none"


def main():
    if len(sys.argv) != 2 or sys.argv[1].startswith("-"):
        sys.exit("usage: udev-capture.py OUTDIR")  # testbed.py asks `--help` whether it takes --state-dir: no
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    monitor = lib.udev_monitor_new_from_netlink(lib.udev_new(), b"udev")
    if not monitor or lib.udev_monitor_enable_receiving(monitor) < 0:
        sys.exit("udev-capture: cannot open a libudev monitor (not under umockdev-wrapper?)")
    sock = socket.socket(fileno=os.dup(lib.udev_monitor_get_fd(monitor)))
    sock.setblocking(True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print("udev-capture: listening on the udev monitor", file=sys.stderr, flush=True)
    count = 0
    while True:
        datagram = sock.recv(1 << 16)
        count += 1
        offset = int.from_bytes(datagram[16:20], "little") if datagram.startswith(b"libudev\0") else 0
        name = f"{count:03d}-{field(datagram[offset:], b'ACTION')}-{field(datagram[offset:], b'SUBSYSTEM')}"
        with open(os.path.join(out, name), "wb") as file:
            file.write(datagram)


if __name__ == "__main__":
    main()
