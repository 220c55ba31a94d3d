#!/usr/bin/python3
"""Daemon RSS while suspended clients sit through a storm: the coalescing bound keeps it flat.

Starts accmond (simulated source), attaches N `accmon watch --json` processes and stops them with SIGSTOP, then plugs
and unplugs M accessories for E events in total through one pipelining driver connection, sampling accmond's RSS.
Prints one JSON line per sample and a summary line. Usage: suspended_memory.py BIN_DIR [clients] [events] [accessories]
"""
import json, os, platform, signal, socket, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import accmond_arguments, rss_kib, wait_for_socket  # noqa: E402

bin_dir = sys.argv[1]
clients = int(sys.argv[2]) if len(sys.argv) > 2 else 100
events = int(sys.argv[3]) if len(sys.argv) > 3 else 100_000
accessories = int(sys.argv[4]) if len(sys.argv) > 4 else 50

work = tempfile.mkdtemp(prefix="accmon-bench-")
sock = os.path.join(work, "s")
daemon = subprocess.Popen(
    [f"{bin_dir}/accmond", "--socket", sock, "--simulate", "--no-udev", "--max-client-buffer", "65536",
     "--log-level", "warning"] + accmond_arguments(bin_dir, work))
watchers = []
try:
    wait_for_socket(sock)
    idle = rss_kib(daemon.pid)
    for _ in range(clients):
        watchers.append(subprocess.Popen([f"{bin_dir}/accmon", "--socket", sock, "watch", "--json"],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    time.sleep(1.0)
    for watcher in watchers:
        watcher.send_signal(signal.SIGSTOP)
    attached = rss_kib(daemon.pid)
    driver = socket.socket(socket.AF_UNIX)
    driver.connect(sock)
    reader = driver.makefile("rb")
    live = {}
    samples = []
    sent = 0
    started = time.time()
    batch = accessories  # one request per accessory per batch: each knows the connection id it toggles
    while sent < events:
        lines = []
        pending_connects = []
        for _ in range(min(batch, events - sent)):
            index = sent % accessories
            if index in live:
                lines.append(json.dumps({"type": "simulate", "action": "disconnect", "connectionID": live.pop(index)}))
                pending_connects.append(None)
            else:
                lines.append(json.dumps({"type": "simulate", "action": "connect", "accessory": {
                    "kind": "usb", "vendorID": "1209", "productID": "%04x" % index, "serialNumber": f"S{index}",
                    "name": f"storm device {index}"}}))
                pending_connects.append(index)
            sent += 1
        driver.sendall(("\n".join(lines) + "\n").encode())
        for index in pending_connects:
            reply = json.loads(reader.readline())
            if index is not None:
                live[index] = reply["connectionID"]
        if sent % 10_000 == 0:
            sample = {"bench": "suspended-memory", "events": sent, "rss_kib": rss_kib(daemon.pid)}
            samples.append(sample["rss_kib"])
            print(json.dumps(sample), flush=True)
    elapsed = time.time() - started
    driver.sendall(b'{"type":"status"}\n')
    status = json.loads(reader.readline())
    queues = [c["queuedEvents"] for c in status["clients"] if c["state"] == "suspended"]
    print(json.dumps({
        "bench": "suspended-memory", "clients": clients, "events": events, "accessories": accessories,
        "rss_idle_kib": idle, "rss_attached_kib": attached, "rss_first_sample_kib": samples[0],
        "rss_last_sample_kib": samples[-1], "rss_max_kib": max(samples),
        "growth_after_first_sample_kib": samples[-1] - samples[0],
        "suspended_clients": len(queues), "max_queue": max(queues) if queues else 0,
        "queue_bound": 2 * accessories, "events_per_second": round(events / elapsed),
        "machine": platform.node(), "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}), flush=True)
finally:
    for watcher in watchers:
        watcher.send_signal(signal.SIGCONT)
        watcher.kill()
    daemon.send_signal(signal.SIGTERM)
    daemon.wait(timeout=10)
