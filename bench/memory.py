#!/usr/bin/python3
"""accmond's memory: idle, per idle client (1,000 clients), with 1,000 preserved sessions, and with 100 suspended
clients through a 100,000-event storm over 50 accessories (bench/suspended_memory.py, whose summary is repeated here).

Every figure is VmRSS of a fresh `accmond --simulate --no-udev`, read from /proc after the clients settled. A client
here is a raw socket that says hello and subscribes (the protocol's cheapest subscriber); a preserved session is a
client that said hello with a restore id, subscribed and closed its socket (docs/SESSIONS.md).

Usage: memory.py BIN_DIR [--clients 1000] [--preserved 1000] [--repeats R] [--skip-suspended]
"""
import argparse, json, os, shutil, socket, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import accmond_arguments, accmond_help, emit, median, raise_fd_limit, rss_kib, stop, wait_for_socket  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("bin_dir")
parser.add_argument("--clients", type=int, default=1000)
parser.add_argument("--preserved", type=int, default=1000)
parser.add_argument("--repeats", type=int, default=3)
parser.add_argument("--skip-suspended", action="store_true")
options = parser.parse_args()
raise_fd_limit()


def start(work):
    path = os.path.join(work, "accmon.sock")
    limits = ["--max-preserved", str(max(1024, options.preserved))]
    if "--max-preserved-per-user" in accmond_help(options.bin_dir):  # all the bench's sessions are root's
        limits += ["--max-preserved-per-user", str(max(1024, options.preserved))]
    daemon = subprocess.Popen(
        [f"{options.bin_dir}/accmond", "--socket", path, "--simulate", "--no-udev", "--log-level", "warning"]
        + limits + accmond_arguments(options.bin_dir, work), stderr=subprocess.DEVNULL)
    wait_for_socket(path)
    return daemon, path


def read_line(connection, buffer):
    while b"\n" not in buffer[0]:
        chunk = connection.recv(65536)
        if not chunk:
            raise SystemExit("memory: accmond closed a connection")
        buffer[0] += chunk
    line, _, buffer[0] = buffer[0].partition(b"\n")
    return json.loads(line)


def subscribe_all(path, count, restore_prefix=None):
    """Opens `count` subscribed sessions (all requests first, then all replies); returns the sockets."""
    connections = []
    for index in range(count):
        connection = socket.socket(socket.AF_UNIX)
        connection.connect(path)
        hello = {"type": "hello", "id": 1, "versions": [1], "client": "bench-memory"}
        if restore_prefix:
            hello["restoreID"] = f"{restore_prefix}{index}"
        connection.sendall((json.dumps(hello) + "\n" + '{"type":"subscribe","id":2}\n').encode())
        connections.append(connection)
    for connection in connections:
        buffer = [b""]
        while read_line(connection, buffer).get("type") != "snapshot":
            pass
    return connections


def status(path):
    connection = socket.socket(socket.AF_UNIX)
    connection.connect(path)
    connection.sendall(b'{"type":"status","id":1}\n')
    reply = read_line(connection, [b""])
    connection.close()
    return reply


def settled_rss(pid, seconds=1.0):
    time.sleep(seconds)
    return rss_kib(pid)


records = {"idle": [], "clients": [], "preserved": []}
for repeat in range(options.repeats):
    work = tempfile.mkdtemp(prefix="accmon-bench-memory-")
    try:
        daemon, path = start(work)
        try:
            idle = settled_rss(daemon.pid)
            connections = subscribe_all(path, options.clients)
            with_clients = settled_rss(daemon.pid)
            sessions = status(path).get("sessions")
            for connection in connections:
                connection.close()
        finally:
            stop(daemon)
        record = {"bench": "memory-idle-clients", "tool": "accmond", "repeat": repeat, "clients": options.clients,
                  "sessions_seen": sessions, "rss_idle_kib": idle, "rss_with_clients_kib": with_clients,
                  "per_client_kib": round((with_clients - idle) / options.clients, 2)}
        emit(record)
        records["clients"].append(record)
        shutil.rmtree(work, ignore_errors=True)
        work = tempfile.mkdtemp(prefix="accmon-bench-memory-")
        daemon, path = start(work)
        try:
            idle = settled_rss(daemon.pid)
            for connection in subscribe_all(path, options.preserved, restore_prefix="bench-"):
                connection.close()
            deadline = time.time() + 30
            preserved = 0
            while time.time() < deadline:
                reply = status(path)
                body = reply.get("status", reply)
                preserved = sum(1 for c in body.get("clients", []) if c.get("state") == "preserved")
                if preserved >= options.preserved:
                    break
                time.sleep(0.1)
            if preserved < options.preserved:
                raise SystemExit(f"memory: accmond preserved {preserved} of {options.preserved} sessions")
            with_preserved = settled_rss(daemon.pid)
        finally:
            stop(daemon)
        record = {"bench": "memory-preserved", "tool": "accmond", "repeat": repeat, "preserved_sessions": preserved,
                  "rss_idle_kib": idle, "rss_with_preserved_kib": with_preserved,
                  "per_preserved_session_kib": round((with_preserved - idle) / options.preserved, 2)}
        emit(record)
        records["preserved"].append(record)
        records["idle"].append(idle)
    finally:
        shutil.rmtree(work, ignore_errors=True)

emit({"bench": "memory-summary", "tool": "accmond", "repeats": options.repeats,
      "rss_idle_kib": median(records["idle"] + [r["rss_idle_kib"] for r in records["clients"]]),
      "clients": options.clients,
      "rss_with_clients_kib": median([r["rss_with_clients_kib"] for r in records["clients"]]),
      "per_client_kib": median([r["per_client_kib"] for r in records["clients"]]),
      "preserved_sessions": options.preserved,
      "rss_with_preserved_kib": median([r["rss_with_preserved_kib"] for r in records["preserved"]]),
      "per_preserved_session_kib": median([r["per_preserved_session_kib"] for r in records["preserved"]])})

if not options.skip_suspended:
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "suspended_memory.py")
    result = subprocess.run([sys.executable, script, options.bin_dir, "100", "100000", "50"], capture_output=True,
                            text=True, timeout=900)
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    if result.returncode != 0 or not lines:
        raise SystemExit(f"memory: suspended_memory.py failed: {result.stderr[-2000:]}")
    summary = lines[-1]
    summary["bench"] = "memory-suspended-summary"
    summary["tool"] = "accmond"
    summary["flat"] = summary["growth_after_first_sample_kib"] <= 0.05 * summary["rss_first_sample_kib"]
    summary["samples_kib"] = [line["rss_kib"] for line in lines[:-1]]
    emit(summary)
