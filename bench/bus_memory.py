#!/usr/bin/python3
"""accmond's memory with 1,000 bus subscribers: VmRSS of a fresh `accmond --simulate --no-udev --dbus` on the bench's
private bus (bench/bus_rig.py: the system bus's rules, the shipped policy), read 1 s after the peers settled:

  idle         accmond on the bus, no peer;
  subscribed   --subscribers subscriptions (Manager.Subscribe, each with its Snapshot), made by --connections
               tools/bus_subscribers processes (one bus connection each, one Subscribe after the other) run as
               `nobody` in the policy's group;
  after events --events events (half plugs of new accessories, then their unplugs, `simulate` requests on the socket
               one at a time) in steps of --step, each step received and acknowledged (Ack per Events signal) by every
               subscription before the next is sent: a load the bus keeps up with.
  storm        then --storm events back to back (plugs and unplugs, as above, not waiting for the subscribers): whether
               every subscription received and acknowledged them all, or accmond gave up its bus connection (it
               counts the bus as stuck when more than 50,000 messages wait to be written, docs/DBUS.md §6: each event
               is one Events signal per subscription), and how many bus subscriptions accmond has after it.

Per subscriber: (subscribed − idle) ÷ subscribers. The peers are one user's, so accmond runs with
--max-connections-per-user above their number (its default, 64, would refuse the 65th); --max-connections (1,024,
socket connections and bus subscriptions together) does not bite at 1,000 plus the driver. dbus-daemon keeps its
system-bus defaults: 10 connections stay under max_connections_per_user (256), one Subscribe at a time under
max_replies_per_connection (128), two match rules a connection under max_match_rules_per_connection (512).
dbus-daemon's own RSS is reported beside accmond's.

Usage: bus_memory.py BIN_DIR TOOLS_DIR [--policy FILE] [--subscribers 1000] [--connections 10] [--events 200]
                     [--step 10] [--storm 100] [--repeats R]
"""
import argparse, json, os, shutil, signal, socket, subprocess, sys, tempfile, threading, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bus_rig import ACCMON_NAME, PrivateBus, as_member, member_manifest  # noqa: E402
from common import accmond_arguments, emit, median, raise_fd_limit, rss_kib, stop, wait_for_socket  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("bin_dir")
parser.add_argument("tools_dir")
parser.add_argument("--policy", default=os.path.join(HERE, "..", "packaging", "dbus", "org.accmon.Accmon1.conf"))
parser.add_argument("--subscribers", type=int, default=1000)
parser.add_argument("--connections", type=int, default=10)
parser.add_argument("--events", type=int, default=200)
parser.add_argument("--step", type=int, default=10)
parser.add_argument("--storm", type=int, default=100)
parser.add_argument("--repeats", type=int, default=3)
options = parser.parse_args()
raise_fd_limit()
signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # a run stopped from outside still stops its processes
if options.subscribers % options.connections:
    raise SystemExit("bus_memory: --subscribers must be a multiple of --connections")
PER_CONNECTION = options.subscribers // options.connections


class Peer:
    """A bus_subscribers process and the last "subscribed" and "acked" counts it printed."""

    def __init__(self, command, env):
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        self.subscribed = 0
        self.acked = 0
        threading.Thread(target=self.read, daemon=True).start()

    def read(self):
        for line in self.process.stdout:
            word, _, number = line.partition(" ")
            if word == "subscribed":
                self.subscribed = int(number)
            elif word == "acked":
                self.acked = int(number)

    def failed(self):
        return self.process.poll() is not None and f"bus_subscribers exited: {self.process.stderr.read()[-2000:]}"


def wait_for(predicate, timeout, what, peers=()):
    deadline = time.time() + timeout
    while time.time() < deadline:
        for peer in peers:
            if peer.failed():
                raise SystemExit(f"bus_memory: {peer.failed()}")
        if predicate():
            return
        time.sleep(0.05)
    raise SystemExit(f"bus_memory: timed out waiting for {what}")


def settled_rss(pid, seconds=1.0):
    time.sleep(seconds)
    return rss_kib(pid)


def request(connection, buffer, message):
    connection.sendall((json.dumps(message) + "\n").encode())
    while b"\n" not in buffer[0]:
        chunk = connection.recv(65536)
        if not chunk:
            raise SystemExit("bus_memory: accmond closed the driver's connection")
        buffer[0] += chunk
    line, _, buffer[0] = buffer[0].partition(b"\n")
    return json.loads(line)


def reply(connection, buffer, message):
    answer = request(connection, buffer, message)
    if answer.get("type") != "ok":
        raise SystemExit(f"bus_memory: {message['action']}: {answer}")
    return answer


def send_events(driver, buffer, first, count, step=0, settled=None):
    """`count` simulate requests, each answered before the next: plugs of accessories first, first + 1, ..., then
    their unplugs; with `step`, `settled(events sent so far)` after every `step` of them."""
    plugs, connections = count // 2, []
    for n in range(count):
        if n < plugs:
            message = {"type": "simulate", "id": n, "action": "connect", "accessory": accessory(first + n)}
            connections.append(reply(driver, buffer, message)["connectionID"])
        else:
            reply(driver, buffer, {"type": "simulate", "id": n, "action": "disconnect",
                                   "connectionID": connections[n - plugs]})
        if step and ((n + 1) % step == 0 or n + 1 == count):
            settled(n + 1)


def connection_lost(log):
    with open(log) as source:
        return sum("bus: connection lost" in line for line in source)


def accessory(number):
    return {"kind": "usb", "vendorID": "1209", "productID": "a%03x" % (number % 4096), "name": f"Bench Board {number}",
            "manufacturer": "pid.codes", "serialNumber": f"SN-{number:08d}",
            "sysfsPath": f"/sys/devices/pci0000:00/0000:00:14.0/usb1/1-1/1-1.{number}",
            "portPath": f"1-1.{number}", "deviceNodes": [f"/dev/bus/usb/001/{number % 1000:03d}"]}


def bus_sessions(path):
    connection = socket.socket(socket.AF_UNIX)
    connection.connect(path)
    reply = request(connection, [b""], {"type": "status", "id": 1})
    connection.close()
    clients = reply.get("status", reply).get("clients", [])
    return [client for client in clients if client.get("transport") == "bus"]


records = []
for repeat in range(options.repeats):
    work = tempfile.mkdtemp(prefix="accmon-bench-bus-memory-")
    bus = PrivateBus(options.policy)
    env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=bus.address)
    peers = []
    daemon = None
    try:
        path = os.path.join(work, "accmon.sock")
        limits = ["--max-connections-per-user", str(options.subscribers + 64)]
        arguments = accmond_arguments(options.bin_dir, work)
        member_manifest(work)
        daemon = subprocess.Popen(
            [f"{options.bin_dir}/accmond", "--socket", path, "--simulate", "--no-udev", "--dbus", "--log-level",
             "warning"] + limits + arguments,
            stderr=open(os.path.join(work, "accmond.err"), "w"), env=env)
        wait_for_socket(path)
        bus.wait_for_name(ACCMON_NAME, env)
        idle = settled_rss(daemon.pid)
        bus_idle = rss_kib(bus.pid)
        started = time.time()
        peers = [Peer(as_member() + [os.path.join(options.tools_dir, "bus_subscribers"), ACCMON_NAME,
                                     str(PER_CONNECTION)], env) for _ in range(options.connections)]
        wait_for(lambda: all(peer.subscribed == PER_CONNECTION for peer in peers), 300, "every subscription", peers)
        subscribe_seconds = time.time() - started
        subscribed = settled_rss(daemon.pid)
        bus_subscribed = rss_kib(bus.pid)
        sessions = len(bus_sessions(path))
        # Events: plugs of new accessories, then their unplugs, each request answered before the next, in steps that
        # every subscription receives and acknowledges before the next step.
        driver = socket.socket(socket.AF_UNIX)
        driver.connect(path)
        buffer = [b""]
        started = time.time()
        send_events(driver, buffer, 0, options.events, options.step, lambda done: wait_for(
            lambda: all(peer.acked >= done for peer in peers), 120, "every event acknowledged", peers))
        events_seconds = time.time() - started
        after = settled_rss(daemon.pid)
        bus_after = rss_kib(bus.pid)
        queued = sum(client.get("queuedEvents", 0) or 0 for client in bus_sessions(path))
        # The storm: back to back, then until every subscription has acknowledged it or accmond dropped the bus.
        log = os.path.join(work, "accmond.err")
        started = time.time()
        send_events(driver, buffer, options.events, options.storm)
        total = options.events + options.storm
        wait_for(lambda: all(peer.acked >= total for peer in peers) or connection_lost(log), 300, "the storm", peers)
        storm_seconds = time.time() - started
        lost_connection = connection_lost(log)
        storm_sessions = len(bus_sessions(path))
        driver.close()
    finally:
        for peer in peers:
            stop(peer.process)
        if daemon:
            stop(daemon)
        bus.close()
        shutil.rmtree(work, ignore_errors=True)
    record = {"bench": "bus-memory", "tool": "accmond", "repeat": repeat, "subscribers": options.subscribers,
              "connections": options.connections, "events": options.events, "step": options.step,
              "bus_sessions_seen": sessions,
              "rss_idle_kib": idle, "rss_subscribed_kib": subscribed, "rss_after_events_kib": after,
              "per_subscriber_kib": round((subscribed - idle) / options.subscribers, 2),
              "growth_after_events_kib": after - subscribed, "queued_events_at_end": queued,
              "subscribe_seconds": round(subscribe_seconds, 2), "events_seconds": round(events_seconds, 2),
              "dbus_daemon_rss_idle_kib": bus_idle, "dbus_daemon_rss_subscribed_kib": bus_subscribed,
              "dbus_daemon_rss_after_events_kib": bus_after, "storm_events": options.storm,
              "storm_acknowledged_by_all": not lost_connection, "storm_bus_connection_lost": lost_connection,
              "storm_bus_sessions_after": storm_sessions, "storm_seconds": round(storm_seconds, 2)}
    emit(record)
    records.append(record)

summary = {"bench": "bus-memory-summary", "tool": "accmond", "repeats": options.repeats,
           "subscribers": options.subscribers, "connections": options.connections, "events": options.events,
           "step": options.step, "storm_events": options.storm,
           "max_connections_per_user": options.subscribers + 64}
for key in ("rss_idle_kib", "rss_subscribed_kib", "rss_after_events_kib", "per_subscriber_kib",
            "growth_after_events_kib", "subscribe_seconds", "events_seconds", "dbus_daemon_rss_idle_kib",
            "dbus_daemon_rss_subscribed_kib", "dbus_daemon_rss_after_events_kib"):
    summary[key] = median([record[key] for record in records])
summary["bus_sessions_seen"] = min(record["bus_sessions_seen"] for record in records)
summary["queued_events_at_end"] = max(record["queued_events_at_end"] for record in records)
summary["storm_seconds"] = median([record["storm_seconds"] for record in records])
summary["storm_bus_connection_lost"] = sum(record["storm_bus_connection_lost"] for record in records)
summary["storm_bus_sessions_after"] = median([record["storm_bus_sessions_after"] for record in records])
summary["storm_acknowledged_by_all"] = all(record["storm_acknowledged_by_all"] for record in records)
emit(summary)
