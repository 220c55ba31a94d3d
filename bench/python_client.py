#!/usr/bin/python3
"""The Python client (clients/python): events per second it decodes and hands to a consumer, and its latency from a
plug to the consumer's loop body, side by side with the Swift `accmon watch --json` in the same run.

Receivers, one at a time, each with a fresh `accmond --simulate --no-udev` (the bench manifest) and a raw driver
socket that sends `simulate connect` requests:

- `accmon-watch`, the baseline: the Swift `accmon watch --json`, its output through tools/stamp;
- `python-watch`: `python3 -m accmon watch --json`, the same way;
- `python-async`: bench/python_receiver.py async: `accmon.connect`, `subscribe`, `async for`;
- `python-blocking`: the same through the blocking `accmon.Client().subscribe()`;
- `python-session`: the same through `accmon.Session`, which acknowledges each event (an `ack` line) as the next is
  asked for.

The watch receivers are timed when stamp reads their line from the pipe; the python_receiver ones in the loop body,
one hop earlier (no pipe). Phases per receiver: 100 warm-up events, then `--latency-events` events one at a time,
`--interval-ms` apart (latency: from just before the request is written to the receiver's time; the daemon sends the
event before its `ok`), then a burst of `--burst` requests written back to back (events/s: the burst's events / (the
last one received - the first request written); CPU µs per event of the receiver process, from /proc/PID/stat
before and after the burst). The accessory is a serial port with the fields of a real one (a ~480-byte event line).
Receivers go in a rotated order in each repeat. One JSON line per receiver and repeat; then a summary per receiver
with the medians and the ratios to accmon-watch's.

Usage: python_client.py BIN_DIR TOOLS_DIR [--burst 20000] [--latency-events 500] [--interval-ms 2] [--repeats 3]
       [--receivers accmon-watch,python-watch,python-async,python-blocking,python-session] [--python-source DIR]
"""
import argparse, json, os, shutil, socket, subprocess, sys, tempfile, threading, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import accmond_arguments, emit, median, percentile, stop, wait_for_socket  # noqa: E402

PYTHON_SOURCE = os.path.join(os.path.dirname(HERE), "clients", "python", "src")
RECEIVERS = ["accmon-watch", "python-watch", "python-async", "python-blocking", "python-session"]
WARM_UP = 100

parser = argparse.ArgumentParser()
parser.add_argument("bin_dir")
parser.add_argument("tools_dir")
parser.add_argument("--burst", type=int, default=20000)
parser.add_argument("--latency-events", type=int, default=500)
parser.add_argument("--interval-ms", type=float, default=2.0)
parser.add_argument("--repeats", type=int, default=3)
parser.add_argument("--receivers", default=",".join(RECEIVERS))
parser.add_argument("--python-source", default=PYTHON_SOURCE, help="the accmon package's source (clients/python/src)")
options = parser.parse_args()
receivers = options.receivers.split(",")
total = WARM_UP + options.latency_events + options.burst
environment = dict(os.environ, PYTHONPATH=options.python_source, PYTHONDONTWRITEBYTECODE="1", NO_COLOR="1")


def request(serial):
    accessory = {"kind": "serial", "vendorID": "1209", "productID": "0001", "name": "Bench Serial Adapter",
                 "manufacturer": "accmon bench", "modelNumber": "0001", "serialNumber": serial,
                 "firmwareRevision": "1.00", "deviceNodes": ["/dev/ttyUSB0", f"/dev/serial/by-id/usb-bench_{serial}-if00"],
                 "sysfsPath": "/sys/devices/pci0000:00/0000:00:14.0/usb1/1-1/1-1.2/1-1.2:1.0/ttyUSB0/tty/ttyUSB0",
                 "portPath": "1-1.2", "interfaceNumber": "00"}
    return (json.dumps({"type": "simulate", "action": "connect", "accessory": accessory}) + "\n").encode()


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Driver:
    """The raw socket that plugs the bench's accessories."""

    def __init__(self, path):
        self.socket = socket.socket(socket.AF_UNIX)
        self.socket.connect(path)
        self.file = self.socket.makefile("rb")

    def plug_one(self, serial):
        line = request(serial)
        sent = time.monotonic_ns()
        self.socket.sendall(line)
        reply = self.file.readline()
        if b'"ok"' not in reply:
            raise SystemExit(f"bench: simulate failed: {reply!r}")
        return sent

    def plug_burst(self, count):
        lines = b"".join(request(f"B{index}") for index in range(count))
        replies = threading.Thread(target=lambda: [self.file.readline() for _ in range(count)])
        replies.start()
        started = time.monotonic_ns()
        self.socket.sendall(lines)
        replies.join()
        return started

    def close(self):
        self.file.close()
        self.socket.close()


class Receiver:
    """One receiver process; `times()` gives {serial: CLOCK_MONOTONIC ns} once it has received everything."""

    def __init__(self, name, socket_path, work):
        self.name = name
        self.output = os.path.join(work, f"{name}.out")
        if name in ("accmon-watch", "python-watch"):
            command = ([os.path.join(options.bin_dir, "accmon")] if name == "accmon-watch"
                       else ["/usr/bin/python3", "-m", "accmon"]) + ["--socket", socket_path, "watch", "--json"]
            self.process = subprocess.Popen(command, stdout=subprocess.PIPE, env=environment)
            with open(self.output, "wb") as out:
                self.stamp = subprocess.Popen([os.path.join(options.tools_dir, "stamp")], stdin=self.process.stdout,
                                              stdout=out)
            self.process.stdout.close()
            self.wait_for(lambda text: text.count("\n") >= 1, "its snapshot")
        else:
            self.stamp = None
            self.out = open(self.output, "wb")
            self.process = subprocess.Popen(["/usr/bin/python3", os.path.join(HERE, "python_receiver.py"),
                                             name.split("-")[1], socket_path, str(total)],
                                            stdin=subprocess.PIPE, stdout=self.out, env=environment)
            self.wait_for(lambda text: text.startswith("ready\n"), "ready")

    def wait_for(self, condition, what, timeout=120):
        deadline = time.monotonic() + timeout
        while True:
            with open(self.output, errors="replace") as out:
                if condition(out.read()):
                    return
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise SystemExit(f"bench: {self.name}: no {what} (exit status {self.process.poll()})")
            time.sleep(0.005)

    def wait_for_all(self):
        if self.stamp is not None:
            self.wait_for(lambda text: text.count("\n") >= 1 + total, f"{total} events")
        else:
            self.wait_for(lambda text: "done\n" in text, f"{total} events")

    def times(self):
        if self.stamp is not None:
            stop(self.process)
            self.stamp.wait(10)
        else:
            self.process.stdin.write(b"\n")
            self.process.stdin.close()
            self.process.wait(60)
            self.out.close()
        received = {}
        with open(self.output) as out:
            for line in out:
                stamp, _, rest = line.partition(" ")
                if self.stamp is not None:
                    message = json.loads(rest)
                    if message.get("type") != "connect":
                        continue
                    received[message["accessory"]["serialNumber"]] = int(stamp)
                elif stamp.isdigit():
                    received[rest.strip()] = int(stamp)
        return received


def measure(name):
    work = tempfile.mkdtemp(prefix="accmon-bench-python-")
    socket_path = os.path.join(work, "accmon.sock")
    daemon = subprocess.Popen([os.path.join(options.bin_dir, "accmond"), "--socket", socket_path, "--simulate",
                               "--no-udev", "--log-level", "warning"] + accmond_arguments(options.bin_dir, work),
                              stderr=subprocess.DEVNULL)
    try:
        wait_for_socket(socket_path)
        receiver = Receiver(name, socket_path, work)
        driver = Driver(socket_path)
        sent = {}
        for index in range(WARM_UP + options.latency_events):
            serial = f"W{index}" if index < WARM_UP else f"L{index - WARM_UP}"
            sent[serial] = driver.plug_one(serial)
            time.sleep(options.interval_ms / 1000)
        cpu_before = cpu_seconds(receiver.process.pid)
        burst_started = driver.plug_burst(options.burst)
        receiver.wait_for_all()
        cpu_after = cpu_seconds(receiver.process.pid)
        driver.close()
        received = receiver.times()
    finally:
        stop(daemon)
        shutil.rmtree(work, ignore_errors=True)
    latencies = [(received[serial] - sent[serial]) / 1000 for serial in sent if serial.startswith("L") and serial in received]
    burst = [received[f"B{index}"] for index in range(options.burst) if f"B{index}" in received]
    return {
        "latency_events": options.latency_events,
        "latency_p50_us": round(percentile(latencies, 0.50), 1),
        "latency_p95_us": round(percentile(latencies, 0.95), 1),
        "latency_p99_us": round(percentile(latencies, 0.99), 1),
        "burst_events": options.burst,
        "events_per_s": round(len(burst) / ((max(burst) - burst_started) / 1e9)),
        "receiver_cpu_us_per_event": round((cpu_after - cpu_before) * 1e6 / options.burst, 2),
        "lost": total - len(received),
    }


results = {name: [] for name in receivers}
for repeat in range(options.repeats):
    order = receivers[repeat % len(receivers):] + receivers[:repeat % len(receivers)]
    for name in order:
        print(f"bench: python client: repeat {repeat}: {name}", file=sys.stderr)
        figures = measure(name)
        emit({"bench": "python-client", "tool": name, "repeat": repeat, **figures})
        results[name].append(figures)

baseline = results.get("accmon-watch")
for name, runs in results.items():
    record = {"bench": "python-client-summary", "tool": name, "baseline": "accmon-watch", "repeats": len(runs),
              "burst_events": options.burst, "latency_events": options.latency_events}
    for key in ("events_per_s", "latency_p50_us", "latency_p99_us", "receiver_cpu_us_per_event", "lost"):
        record[key] = median([run[key] for run in runs])
        if baseline:
            record[f"baseline_{key}"] = median([run[key] for run in baseline])
    if baseline:
        record["ratio_events_per_s"] = round(median([r["events_per_s"] / b["events_per_s"] for r, b in zip(runs, baseline)]), 3)
        record["ratio_latency_p50"] = round(median([r["latency_p50_us"] / b["latency_p50_us"] for r, b in zip(runs, baseline)]), 3)
    emit(record)
