#!/usr/bin/python3
"""What one sysfs attribute read costs, through umockdev's preload (as in the stream bench) and on this host's real
sysfs, alternately in the same run (bench/tools/sysfs_read.c: `openat` in the device's directory, `pread`, `close`,
as accmond reads attributes).

The stream bench runs accmond under umockdev, whose preload rewrites every path and adds system calls of its own to
each `openat`; this tells how much of an attribute read's cost that is. The real file is the first of a few that
exist on most Linux hosts (a network interface's `mtu`, a CPU's `online`), since a VM may have no USB device.

Usage: sysfs_read.py TOOLS_DIR [--repeats R] [--reads N]
"""
import argparse, glob, json, os, subprocess, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import emit, median, reexec_under_umockdev  # noqa: E402

if os.environ.get("ACCMON_BENCH_TESTBED") != "1":
    # The real file is chosen here: under the preload, /sys is the testbed's.
    candidates = sorted(glob.glob("/sys/class/net/*/mtu")) + ["/sys/devices/system/cpu/cpu0/online",
                                                              "/sys/kernel/mm/transparent_hugepage/enabled"]
    real = next((path for path in candidates if os.path.exists(path)), None)
    if real is None:
        raise SystemExit("sysfs_read: no known sysfs attribute on this host")
    reexec_under_umockdev(__file__, {"ACCMON_BENCH_REAL_ATTRIBUTE": real})

import gi  # noqa: E402  (only inside the testbed's Python)

gi.require_version("UMockdev", "1.0")
from gi.repository import UMockdev  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("tools_dir")
parser.add_argument("--repeats", type=int, default=3)
parser.add_argument("--reads", type=int, default=20000)
options = parser.parse_args()
tool = os.path.join(options.tools_dir, "sysfs_read")

testbed = UMockdev.Testbed.new()
device = testbed.add_device("usb", "1-1", None, ["idVendor", "1209", "removable", "removable"],
                            ["DEVTYPE", "usb_device"])
real = os.environ["ACCMON_BENCH_REAL_ATTRIBUTE"]
# The real file is read without the preload.
plain_env = {key: value for key, value in os.environ.items() if key not in ("LD_PRELOAD", "UMOCKDEV_DIR")}

figures = {"testbed": [], "real": []}
for repeat in range(options.repeats):
    for kind, directory, name in (("testbed", device, "removable"),
                                  ("real", os.path.dirname(real), os.path.basename(real))):
        result = subprocess.run([tool, directory, name, str(options.reads)], capture_output=True, text=True,
                                env=None if kind == "testbed" else plain_env)
        if result.returncode != 0:
            raise SystemExit(f"sysfs_read: {result.stderr}")
        record = {"bench": "sysfs-read", "tool": f"umockdev-{kind}" if kind == "testbed" else "real-sysfs",
                  "repeat": repeat, **json.loads(result.stdout)}
        figures[kind].append(record["us_per_read"])
        emit(record)
emit({"bench": "sysfs-read-summary", "tool": "umockdev-testbed", "baseline": "real-sysfs", "repeats": options.repeats,
      "reads": options.reads, "us_per_read": median(figures["testbed"]),
      "baseline_us_per_read": median(figures["real"]),
      "ratio": round(median(figures["testbed"]) / median(figures["real"]), 3)})
