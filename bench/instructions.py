#!/usr/bin/python3
"""Instructions per event of accmond on the udev path, counted by valgrind's callgrind, next to those of
`udevadm monitor --udev` on the same stream: figures the VM's noise cannot move, for before/after comparisons of the
daemon's work per event.

usage: bench/instructions.py BIN_DIR TOOLS_DIR CLIENT [--small 1000] [--large 4000] [--requests 5000]
                                                      [--only udev|requests] [--profiles DIR]

Runs bench/udev_stream.py twice with `--only burst` (a burst of SMALL events, then one of LARGE), each time with
accmond and udevadm under `valgrind --tool=callgrind` (accmond from a copy stripped with `strip -g`: valgrind cannot
read the Swift toolchain's debug information). Start-up, the testbed's coldplug and the warm-up events are the same
in both runs, so (instructions of the large run − those of the small run) ÷ (LARGE − SMALL) is the cost of one
event:
for accmond a USB device's add or remove received from the monitor, classified, authenticated, published to one
`accmon watch`; for udevadm the same event received (libudev's `udev_monitor_receive_device`) and printed as one
line. System calls count as the instructions that enter them; the kernel's work is not counted.

Then the request path (`--only requests`): accmond `--simulate --no-udev` under callgrind, its counters zeroed
(`callgrind_control -z`) once it listens and dumped (`-d`) once `tools/fanout measure SOCKET N EVENTS 10` is done
(N subscribers, 10 single `simulate connect` requests, then EVENTS back to back): the dump's total ÷ (EVENTS + 10) is
one request, decoded, authenticated, registered, its event encoded, queued to N subscribers and written, its `ok`
answered; every thread, without start-up and shutdown (whose state file save grows with the accessories connected).
For N = 1 and 10.

`--profiles DIR` keeps the callgrind profiles in DIR, to compare two builds function by function
(`callgrind_annotate`; bench/README.md, "Where the instructions go").
"""
import argparse, os, re, shutil, signal, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import accmond_arguments, emit, wait_for_socket  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("bin_dir")
parser.add_argument("tools_dir")
parser.add_argument("client")
parser.add_argument("--small", type=int, default=1000)
parser.add_argument("--large", type=int, default=4000)
parser.add_argument("--requests", type=int, default=5000)
parser.add_argument("--only", choices=["udev", "requests"])
parser.add_argument("--profiles", help="keep the callgrind profiles in this directory")
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


def request_instructions(bin_dir, subscribers, events, work):
    """accmond's instructions (every thread) per request while `fanout measure` sends `events` + 10 requests."""
    run = tempfile.mkdtemp(dir=work)
    socket_path, profile = os.path.join(run, "accmon.sock"), os.path.join(run, "callgrind.out")
    daemon = subprocess.Popen(["valgrind", "--tool=callgrind", f"--callgrind-out-file={profile}",
                               os.path.join(bin_dir, "accmond"), "--socket", socket_path, "--simulate", "--no-udev",
                               "--log-level", "warning"] + accmond_arguments(bin_dir, run), stderr=subprocess.DEVNULL)
    try:
        wait_for_socket(socket_path, timeout=120)
        subprocess.run(["callgrind_control", "-z", str(daemon.pid)], check=True, capture_output=True)
        result = subprocess.run([os.path.join(options.tools_dir, "fanout"), "measure", socket_path, str(subscribers),
                                 str(events), "10"], capture_output=True, text=True, timeout=900)
        if result.returncode != 0:
            raise SystemExit(f"instructions: fanout measure failed: {result.stderr}")
        subprocess.run(["callgrind_control", "-d", str(daemon.pid)], check=True, capture_output=True)
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=600)
    return totals(profile + ".1")


work = tempfile.mkdtemp(prefix="accmon-bench-instructions-")
try:
    bin_dir = os.path.join(work, "bin")
    os.mkdir(bin_dir)
    shutil.copy(os.path.join(options.bin_dir, "accmond"), bin_dir)
    subprocess.run(["strip", "-g", os.path.join(bin_dir, "accmond")], check=True)
    os.symlink(os.path.join(os.path.abspath(options.bin_dir), "accmon"), os.path.join(bin_dir, "accmon"))
    if options.only in (None, "udev"):
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
    if options.only in (None, "requests"):
        for subscribers in (1, 10):
            total = request_instructions(bin_dir, subscribers, options.requests, work)
            emit({"bench": "instructions-request", "tool": "accmond", "subscribers": subscribers,
                  "events": options.requests + 10, "instructions": total,
                  "instructions_per_request": round(total / (options.requests + 10))})
finally:
    if options.profiles:
        os.makedirs(options.profiles, exist_ok=True)
        for root, _, names in os.walk(work):
            for name in names:
                if name.startswith("callgrind"):
                    shutil.copy(os.path.join(root, name), options.profiles)
    shutil.rmtree(work, ignore_errors=True)
