#!/usr/bin/python3
"""Fan-out: each event to 1, 10, 100 and 1,000 subscribers, accmond next to a minimal C sender in the same run.

For each subscriber count and repeat: a fresh `accmond --simulate --no-udev`, measured by bench/tools/fanout (raw
subscriber sockets that say hello and subscribe, and a driver that sends `simulate connect` requests), and the
minimal sender (`fanout serve`: same socket kind, same line length as accmond's event line, one batched send per
subscriber per epoll turn) measured the same way; accmond first in even repeats, the minimal sender first in odd
ones (with the line length of the repeat before). Figures: deliveries per second with requests back to back, and the
time from the request until the first and the last subscriber has read the event (single events), and the server's
CPU time per event in each phase (all its threads' schedstat). Prints a JSON line per run and a summary per subscriber
count with the medians and accmond / minimal sender.

Usage: fanout.py BIN_DIR TOOLS_DIR [--counts 1,10,100,1000] [--repeats R (11)] [--rounds N]
"""
import argparse, json, os, shutil, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import accmond_arguments, emit, median, raise_fd_limit, stop, wait_for_socket  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("bin_dir")
parser.add_argument("tools_dir")
parser.add_argument("--counts", default="1,10,100,1000")
parser.add_argument("--repeats", type=int, default=11)
parser.add_argument("--rounds", type=int, default=30)
options = parser.parse_args()
raise_fd_limit()
fanout = os.path.join(options.tools_dir, "fanout")


def events_for(count):
    return max(200, min(5000, 500_000 // count))


def measure(socket_path, count):
    result = subprocess.run([fanout, "measure", socket_path, str(count), str(events_for(count)), str(options.rounds)],
                            capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        raise SystemExit(f"fanout measure failed: {result.stderr}")
    return json.loads(result.stdout)


summary = {}
line_bytes = None  # accmond's event line size, from the last repeat that measured it
for count in [int(value) for value in options.counts.split(",")]:
    for repeat in range(options.repeats):
        work = tempfile.mkdtemp(prefix="accmon-bench-fanout-")
        try:
            def measure_accmond():
                socket_path = os.path.join(work, "accmon.sock")
                daemon = subprocess.Popen(
                    [f"{options.bin_dir}/accmond", "--socket", socket_path, "--simulate", "--no-udev", "--log-level",
                     "warning"] + accmond_arguments(options.bin_dir, work), stderr=subprocess.DEVNULL)
                try:
                    wait_for_socket(socket_path)
                    return measure(socket_path, count)
                finally:
                    stop(daemon)

            def measure_minimal_sender(event_bytes):
                raw_path = os.path.join(work, "raw.sock")
                server = subprocess.Popen([fanout, "serve", raw_path, str(event_bytes)])
                try:
                    wait_for_socket(raw_path)
                    return measure(raw_path, count)
                finally:
                    stop(server)

            # Which goes first alternates, so that a drift in the machine's load within a repeat favours neither.
            if repeat % 2 == 1 and line_bytes:
                raw = measure_minimal_sender(line_bytes)
                accmond = measure_accmond()
            else:
                accmond = measure_accmond()
                raw = measure_minimal_sender(accmond["event_bytes"])
            line_bytes = accmond["event_bytes"]
        finally:
            shutil.rmtree(work, ignore_errors=True)
        for tool, figures in (("accmond", accmond), ("minimal-sender", raw)):
            emit({"bench": "fanout", "tool": tool, "repeat": repeat, **figures})
        summary.setdefault(count, []).append((accmond, raw))
    runs = summary[count]
    record = {"bench": "fanout-summary", "tool": "accmond", "baseline": "minimal-sender", "subscribers": count,
              "repeats": len(runs), "events": runs[0][0]["events"], "event_bytes": runs[0][0]["event_bytes"]}
    for key in ("deliveries_per_s", "first_subscriber_p50_us", "last_subscriber_p50_us", "last_subscriber_p99_us",
                "server_cpu_us_per_single_event", "server_cpu_us_per_burst_event"):
        record[key] = median([a[key] for a, _ in runs])
        record[f"baseline_{key}"] = median([b[key] for _, b in runs])
    record["ratio_deliveries"] = round(median([a["deliveries_per_s"] / b["deliveries_per_s"] for a, b in runs]), 3)
    record["ratio_last_subscriber_p50"] = round(
        median([a["last_subscriber_p50_us"] / b["last_subscriber_p50_us"] for a, b in runs]), 3)
    record["target_ratio"] = 0.7
    record["meets_target"] = record["ratio_deliveries"] >= 0.7
    emit(record)
