#!/usr/bin/python3
"""Start-up with 1,000 accessories present at coldplug: time from start to READY=1 (sd_notify), and to the socket
accepting and `accmon list` showing all of them; then the stop: time from SIGTERM to exit, which includes writing
the state file with the 1,000 connected accessories.

A umockdev testbed holds N USB devices (vendor 1209, each with a device node and descriptors), allowed by the bench
manifest. Each repeat starts a fresh accmond (empty state directory) with NOTIFY_SOCKET pointing at a datagram socket
this script reads; it times READY=1, then polls the socket and `accmon list --json` until all N are listed.
Re-executes itself under umockdev-wrapper (no network namespace needed: no uevents are sent).

Usage: startup.py BIN_DIR [--devices 1000] [--repeats R]
"""
import argparse, json, os, shutil, socket, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import accmond_arguments, emit, median, reexec_under_umockdev, stop  # noqa: E402

reexec_under_umockdev(__file__)

import gi  # noqa: E402

gi.require_version("UMockdev", "1.0")
from gi.repository import UMockdev  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("bin_dir")
parser.add_argument("--devices", type=int, default=1000)
parser.add_argument("--repeats", type=int, default=5)
options = parser.parse_args()

testbed = UMockdev.Testbed.new()
os.environ["UMOCKDEV_DIR"] = testbed.get_root_dir()
pci = testbed.add_device("pci", "pci0000:00/0000:00:14.0", None, ["vendor", "0x8086"], ["DRIVER", "xhci_hcd"])
descriptor = bytes([18, 1, 0, 2, 0, 0, 0, 64, 0x09, 0x12, 0x01, 0xB0, 0, 1, 1, 2, 3, 1])
started = time.monotonic()
for hub_index in range((options.devices + 99) // 100):
    bus = hub_index + 1
    hub = testbed.add_device("usb", f"usb{bus}", pci, ["idVendor", "1d6b", "idProduct", "0002", "bDeviceClass", "09"],
                             ["DEVTYPE", "usb_device", "DEVNAME", f"/dev/bus/usb/{bus:03d}/001"])
    for port in range(1, 101):
        index = hub_index * 100 + port - 1
        if index >= options.devices:
            break
        path = testbed.add_device(
            "usb", f"{bus}-{port}", hub,
            ["idVendor", "1209", "idProduct", "b001", "bcdDevice", "0100", "bDeviceClass", "00", "removable",
             "removable", "manufacturer", "accmon", "product", "Startup Device", "serial", f"S{index:05d}"],
            ["DEVTYPE", "usb_device", "DEVNAME", f"/dev/bus/usb/{bus:03d}/{port + 1:03d}", "ID_VENDOR_ID", "1209",
             "ID_MODEL_ID", "b001", "ID_SERIAL_SHORT", f"S{index:05d}"])
        testbed.set_attribute_binary(path, "descriptors", list(descriptor))
setup_seconds = time.monotonic() - started

plain_env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
records = []
for repeat in range(options.repeats):
    work = tempfile.mkdtemp(prefix="accmon-bench-startup-")
    try:
        notify_path = os.path.join(work, "notify")
        notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        notify.bind(notify_path)
        socket_path = os.path.join(work, "accmon.sock")
        environment = dict(os.environ, NOTIFY_SOCKET=notify_path)
        start = time.monotonic()
        daemon = subprocess.Popen([f"{options.bin_dir}/accmond", "--socket", socket_path, "--log-level", "warning"]
                                  + accmond_arguments(options.bin_dir, work), env=environment,
                                  stderr=open(os.path.join(work, "accmond.err"), "w"))
        try:
            ready = None
            notify.settimeout(0.05)
            deadline = start + 60
            while ready is None and time.monotonic() < deadline and daemon.poll() is None:
                try:
                    message = notify.recv(4096).decode()
                except socket.timeout:
                    continue
                if "READY=1" in message.split("\n"):
                    ready = time.monotonic() - start
            accepts = listed = None
            while time.monotonic() < deadline and daemon.poll() is None:
                try:
                    probe = socket.socket(socket.AF_UNIX)
                    probe.connect(socket_path)
                    probe.close()
                    accepts = accepts or time.monotonic() - start
                except OSError:
                    time.sleep(0.005)
                    continue
                result = subprocess.run([f"{options.bin_dir}/accmon", "--socket", socket_path, "list", "--json"],
                                        capture_output=True, text=True, env=plain_env)
                if result.returncode == 0 and len(json.loads(result.stdout)["accessories"]) >= options.devices:
                    listed = time.monotonic() - start
                    break
                time.sleep(0.01)
        finally:
            stopping = time.monotonic()
            exited = daemon.poll() is None
            stop(daemon)
            stop_seconds = time.monotonic() - stopping if exited else None
            notify.close()
        record = {"bench": "startup", "tool": "accmond", "repeat": repeat, "devices": options.devices,
                  "ready_seconds": round(ready, 4) if ready is not None else None,
                  "socket_accepts_seconds": round(accepts, 4) if accepts is not None else None,
                  "all_listed_seconds": round(listed, 4) if listed is not None else None,
                  "stop_seconds": round(stop_seconds, 4) if stop_seconds is not None else None}
        if ready is None:
            record["note"] = "no READY=1 received (no NOTIFY_SOCKET support in this accmond?)"
        emit(record)
        records.append(record)
    finally:
        shutil.rmtree(work, ignore_errors=True)

emit({"bench": "startup-summary", "tool": "accmond", "devices": options.devices, "repeats": len(records),
      "testbed_setup_seconds": round(setup_seconds, 2),
      "ready_seconds": round(median([r["ready_seconds"] for r in records]), 4),
      "socket_accepts_seconds": round(median([r["socket_accepts_seconds"] for r in records]), 4),
      "all_listed_seconds": round(median([r["all_listed_seconds"] for r in records]), 4),
      "stop_seconds": round(median([r["stop_seconds"] for r in records]), 4)})
