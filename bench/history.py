#!/usr/bin/python3
"""The history's cost (issue 29): the event path's latency with the history on (the default, 10,000 entries) against
`--history-entries 0`, two daemons measured side by side in the same run, round after round (A B, B A, ...); and the
memory the history takes per 10,000 entries.

Latency: a raw subscriber and a driver connection on each daemon; the driver sends `simulate` `connect` (then
`disconnect`) one at a time, and each sample is the time from the request's send to the event line at the
subscriber. Every accessory is a different one (name, serial, sysfs path), as a day of plugging would make.

Memory: VmRSS of a daemon that recorded `--entries` entries (connects and disconnects of different accessories),
less its RSS before, less the same difference for a daemon with `--history-entries 0` doing the same; given per
10,000 entries. Then the history is filled to twice and three times its capacity, to show that it stays bounded
(the first rewrite of the file, past twice the ring, allocates its buffer once).

Usage: history.py BIN_DIR [--events 2000] [--rounds 3] [--entries 10000]
"""
import argparse, json, os, shutil, socket, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import accmond_arguments, emit, median, percentile, rss_kib, stop, wait_for_socket  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("bin_dir")
parser.add_argument("--events", type=int, default=2000, help="events per daemon and round (latency)")
parser.add_argument("--rounds", type=int, default=3)
parser.add_argument("--entries", type=int, default=10000, help="history entries recorded for the memory figure")
options = parser.parse_args()


class Lines:
    def __init__(self, connection):
        self.connection = connection
        self.buffer = b""

    def next(self):
        while b"\n" not in self.buffer:
            chunk = self.connection.recv(1 << 20)
            if not chunk:
                raise SystemExit("history bench: accmond closed a connection")
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return json.loads(line)


def connect(path):
    connection = socket.socket(socket.AF_UNIX)
    connection.connect(path)
    return connection, Lines(connection)


def start(history_entries, work):
    path = os.path.join(work, "accmon.sock")
    daemon = subprocess.Popen(
        [f"{options.bin_dir}/accmond", "--socket", path, "--simulate", "--no-udev", "--log-level", "warning",
         "--history-entries", str(history_entries)] + accmond_arguments(options.bin_dir, work),
        stderr=subprocess.DEVNULL)
    wait_for_socket(path)
    return daemon, path


def accessory(number):
    return {"kind": "usb", "vendorID": "1209", "productID": "a%03x" % (number % 4096), "name": f"Bench Board {number}",
            "manufacturer": "pid.codes", "serialNumber": f"SN-{number:08d}",
            "sysfsPath": f"/sys/devices/pci0000:00/0000:00:14.0/usb1/1-1/1-1.{number}",
            "portPath": f"1-1.{number}", "deviceNodes": [f"/dev/bus/usb/001/{number % 1000:03d}"]}


class Driver:
    """A driver connection that plugs and unplugs simulated accessories, and a subscriber that sees the events."""

    def __init__(self, path):
        self.driver, self.replies = connect(path)
        self.subscriber, self.events = connect(path)
        self.subscriber.sendall(b'{"type":"subscribe","id":1}\n')
        assert self.events.next()["type"] == "snapshot"
        self.number = 0

    def plug_and_unplug(self, timed):
        """One connect and one disconnect; returns their latencies in microseconds."""
        self.number += 1
        latencies = []
        request = {"type": "simulate", "id": 1, "action": "connect", "accessory": accessory(self.number)}
        started = time.perf_counter()
        self.driver.sendall((json.dumps(request) + "\n").encode())
        event = self.events.next()
        latencies.append((time.perf_counter() - started) * 1e6)
        connection_id = self.replies.next()["connectionID"]
        assert event["type"] == "connect"
        request = {"type": "simulate", "id": 2, "action": "disconnect", "connectionID": connection_id}
        started = time.perf_counter()
        self.driver.sendall((json.dumps(request) + "\n").encode())
        event = self.events.next()
        latencies.append((time.perf_counter() - started) * 1e6)
        assert event["type"] == "disconnect" and self.replies.next()["type"] == "ok"
        return latencies if timed else []

    def close(self):
        self.driver.close()
        self.subscriber.close()


builds = {"history-on": 10000, "history-off": 0}
latency = {name: [] for name in builds}
for round_number in range(options.rounds):
    order = list(builds) if round_number % 2 == 0 else list(reversed(builds))
    for name in order:
        work = tempfile.mkdtemp(prefix="accmon-bench-history-")
        daemon, path = start(builds[name], work)
        try:
            driver = Driver(path)
            for _ in range(200):
                driver.plug_and_unplug(timed=False)  # warm-up
            samples = []
            for _ in range(options.events // 2):
                samples += driver.plug_and_unplug(timed=True)
            driver.close()
        finally:
            stop(daemon)
            shutil.rmtree(work, ignore_errors=True)
        record = {"bench": "history-latency", "tool": "accmond", "variant": name, "history_entries": builds[name],
                  "round": round_number, "events": len(samples), "p50_us": round(percentile(samples, 0.5), 1),
                  "p99_us": round(percentile(samples, 0.99), 1)}
        emit(record)
        latency[name].append(record)

summary = {"bench": "history-latency-summary", "tool": "accmond", "rounds": options.rounds}
for name in builds:
    summary[f"{name}_p50_us"] = median([r["p50_us"] for r in latency[name]])
    summary[f"{name}_p99_us"] = median([r["p99_us"] for r in latency[name]])
summary["p50_on_over_off"] = round(summary["history-on_p50_us"] / summary["history-off_p50_us"], 3)
summary["p99_on_over_off"] = round(summary["history-on_p99_us"] / summary["history-off_p99_us"], 3)
emit(summary)


def recorded_rss(history_entries, entries):
    """RSS before, after `entries` entries, after twice and after three times as many, of a daemon with this history;
    and the history file's size at the end."""
    work = tempfile.mkdtemp(prefix="accmon-bench-history-")
    daemon, path = start(history_entries, work)
    try:
        driver = Driver(path)
        time.sleep(0.5)
        before = rss_kib(daemon.pid)
        for _ in range(entries // 2):
            driver.plug_and_unplug(timed=False)
        time.sleep(1)
        after = rss_kib(daemon.pid)
        for _ in range(entries // 2):
            driver.plug_and_unplug(timed=False)
        time.sleep(1)
        twice = rss_kib(daemon.pid)
        for _ in range(entries // 2):
            driver.plug_and_unplug(timed=False)
        time.sleep(1)
        thrice = rss_kib(daemon.pid)
        file_bytes = os.path.getsize(os.path.join(work, "state", "history.jsonl")) if history_entries else 0
        driver.close()
        return before, after, twice, thrice, file_bytes
    finally:
        stop(daemon)
        shutil.rmtree(work, ignore_errors=True)


memory = []
for round_number in range(options.rounds):
    on = recorded_rss(options.entries, options.entries)
    off = recorded_rss(0, options.entries)
    per_entry_kib = ((on[1] - on[0]) - (off[1] - off[0])) / options.entries
    record = {"bench": "history-memory", "tool": "accmond", "round": round_number, "entries": options.entries,
              "rss_before_kib": on[0], "rss_after_kib": on[1], "rss_after_twice_kib": on[2],
              "rss_after_thrice_kib": on[3], "off_rss_before_kib": off[0], "off_rss_after_kib": off[1],
              "file_bytes": on[4], "per_10000_entries_kib": round(per_entry_kib * 10000, 1),
              "growth_from_once_to_twice_kib": on[2] - on[1], "growth_from_twice_to_thrice_kib": on[3] - on[2]}
    emit(record)
    memory.append(record)

emit({"bench": "history-memory-summary", "tool": "accmond", "rounds": options.rounds, "entries": options.entries,
      "per_10000_entries_kib": median([r["per_10000_entries_kib"] for r in memory]),
      "growth_from_once_to_twice_kib": median([r["growth_from_once_to_twice_kib"] for r in memory]),
      "growth_from_twice_to_thrice_kib": median([r["growth_from_twice_to_thrice_kib"] for r in memory]),
      "file_bytes": median([r["file_bytes"] for r in memory])})
