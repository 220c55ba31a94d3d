#!/usr/bin/python3
"""Instructions per event of accmond on the udev path, counted by valgrind's callgrind, next to those of
`udevadm monitor --udev` on the same stream: figures the VM's noise cannot move, for before/after comparisons of the
daemon's work per event.

usage: bench/instructions.py BIN_DIR TOOLS_DIR CLIENT [--small 1000] [--large 4000]

Runs bench/udev_stream.py twice with `--only burst` (a burst of SMALL events, then one of LARGE), each time with
accmond and udevadm under `valgrind --tool=callgrind` (accmond from a copy stripped with `strip -g`: valgrind cannot
read the Swift toolchain's debug information). Start-up, the testbed's coldplug and the warm-up events are the same
in both runs, so (instructions of the large run − those of the small run) ÷ (LARGE − SMALL) is the cost of one event:
for accmond a USB device's add or remove received from the monitor, classified, authenticated, published to one
`accmon watch`; for udevadm the same event received (libudev's `udev_monitor_receive_device`) and printed as one
line. System calls count as the instructions that enter them; the kernel's work is not counted.
"""
import argparse, os, re, shutil, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import emit  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("bin_dir")
parser.add_argument("tools_dir")
parser.add_argument("client")
parser.add_argument("--small", type=int, default=1000)
parser.add_argument("--large", type=int, default=4000)
options = parser.parse_args()


def totals(path):
    with open(path) as profile:
        found = re.search(r"^(?:summary|totals): (\d+)", profile.read(), re.MULTILINE)
    if not found:
        raise SystemExit(f"instructions: no totals in {path}")
    return int(found.group(1))


def instructions(bin_dir, events, work):
    """Total instructions of accmond and of udevadm in a udev_stream burst run of `events` events."""
    accmond_out = os.path.join(work, f"callgrind-accmond-{events}.out")
    udevadm_out = os.path.join(work, f"callgrind-udevadm-{events}.out")
    command = ["/usr/bin/python3", os.path.join(os.path.dirname(os.path.abspath(__file__)), "udev_stream.py"),
               bin_dir, options.tools_dir, options.client, "--only", "burst", "--bursts", str(events),
               "--repeats", "1", "--accmond-prefix", f"valgrind --tool=callgrind --callgrind-out-file={accmond_out}",
               "--udevadm-prefix", f"valgrind --tool=callgrind --callgrind-out-file={udevadm_out}"]
    result = subprocess.run(command, capture_output=True, text=True)
    received = re.search(r'"tool": "accmon-watch", "repeat": 0, "events": \d+, "received": (\d+)', result.stdout)
    if result.returncode != 0 or not received or not all(map(os.path.exists, (accmond_out, udevadm_out))):
        raise SystemExit(f"instructions: the run with {events} events failed:\n{result.stderr[-2000:]}")
    return totals(accmond_out), totals(udevadm_out), int(received.group(1))


work = tempfile.mkdtemp(prefix="accmon-bench-instructions-")
try:
    bin_dir = os.path.join(work, "bin")
    os.mkdir(bin_dir)
    shutil.copy(os.path.join(options.bin_dir, "accmond"), bin_dir)
    subprocess.run(["strip", "-g", os.path.join(bin_dir, "accmond")], check=True)
    os.symlink(os.path.join(os.path.abspath(options.bin_dir), "accmon"), os.path.join(bin_dir, "accmon"))
    small, small_udevadm, small_received = instructions(bin_dir, options.small, work)
    large, large_udevadm, large_received = instructions(bin_dir, options.large, work)
    events = options.large - options.small
    accmond_per_event = round((large - small) / events)
    udevadm_per_event = round((large_udevadm - small_udevadm) / events)
    emit({"bench": "instructions", "tool": "accmond", "baseline": "udevadm-monitor", "events": events,
          "instructions_small_run": small, "instructions_large_run": large,
          "watch_received": [small_received, large_received],
          "instructions_per_event": accmond_per_event, "baseline_instructions_per_event": udevadm_per_event,
          "ratio": round(accmond_per_event / udevadm_per_event, 3)})
finally:
    shutil.rmtree(work, ignore_errors=True)
