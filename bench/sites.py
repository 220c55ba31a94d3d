#!/usr/bin/python3
"""Site brokers bridged to a centre (docs/MQTT.md §11.1): the fleet view through the centre beside one mosquitto, the
status lease's publications, and a plug's latency to a reader of the centre beside a reader of the site.

The topology: a central mosquitto and two site mosquittos, each site bridged to the centre with the configuration of
docs/MQTT.md §11.1 (read from --docs; anonymous here: the remote_username and remote_password lines are left out),
every broker with max_queued_messages 100000 as that section asks. Beside it, one mosquitto alone with the same
settings.

- list: tools/fleet_publish publishes a synthetic fleet of N hosts × M accessories (the scale suite's, about 480 bytes
  an accessory object), its first half to site A, its second to site B (--first), and the whole of it to the lone
  mosquitto; both keep toggling --churn accessories a second in all. Once the centre holds every accessory (the time
  it took from the end of the publishing is a figure), each repeat measures `accmon list --broker` of every host and
  of one host through the centre and on the lone mosquitto, alternating which goes first; figures: seconds, and the
  centre's and a site's RSS beside the lone mosquitto's.
- lease: H real hosts (`accmond --simulate` and `accmon-mqtt` with the default statusLeaseSeconds, 20) on the lone
  mosquitto; a subscriber of `accmon/+/status` counts the statuses they publish for --lease-seconds once every host
  is synchronized (nothing plugged: every status is a renewal); figure: publications per host per hour.
- latency: fresh brokers; one real host on site A; `accmon watch --broker --json` of the centre and of site A, each
  line timed by tools/stamp; K plugs (then unplugs), one every 20 ms; figure: the time from the `simulate` request to
  each reader's `connect` line, percentiles.

Prints one JSON line per measurement and repeat, then a `sites-summary` line.

Usage: sites.py BIN_DIR TOOLS_DIR --docs DOCS/MQTT.md [--repeats R] [--hosts N] [--accessories M] [--churn E]
                                  [--lease-hosts H] [--lease-seconds S] [--latency-events K]
"""
import argparse, json, os, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Driver, free_port, accmond_arguments, emit, median, rss_kib, stop, wait_accepting, wait_for_socket  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("bin_dir")
parser.add_argument("tools_dir")
parser.add_argument("--docs", required=True, help="docs/MQTT.md of the build measured: its site configuration")
parser.add_argument("--repeats", type=int, default=3)
parser.add_argument("--hosts", type=int, default=500)
parser.add_argument("--accessories", type=int, default=100)
parser.add_argument("--churn", type=float, default=20, help="accessory toggles a second during the measurements")
parser.add_argument("--lease-hosts", type=int, default=5)
parser.add_argument("--lease-seconds", type=float, default=120)
parser.add_argument("--latency-events", type=int, default=400)
options = parser.parse_args()
ACCMON = os.path.join(options.bin_dir, "accmon")
STAMP = os.path.join(options.tools_dir, "stamp")
ONE = "lab-00042" if options.hosts > 42 else "lab-00000"
QUEUE = "max_queued_messages 100000"


def site_configuration(site, centre_port):
    """docs/MQTT.md §11.1's site configuration for `site`, bridged to the centre on `centre_port`, without a login."""
    with open(options.docs) as docs:
        text = docs.read()
    start = text.index("```\n# /etc/mosquitto/conf.d/accmon-centre.conf (on each site's broker)\n")
    block = text[start:].split("```")[1].splitlines()
    lines = [line for line in block if line and not line.startswith("#")
             and not line.startswith(("remote_username", "remote_password"))]  # fmt: skip
    return [f"address 127.0.0.1:{centre_port}" if line.startswith("address ")
            else f"remote_clientid {site}" if line.startswith("remote_clientid ") else line for line in lines]  # fmt: skip


class Broker:
    """One mosquitto on a free port with `settings` added to its configuration."""

    def __init__(self, work, name, settings=()):
        self.name = name
        self.port = free_port()
        config = os.path.join(work, f"{name}.conf")
        with open(config, "w") as out:
            out.write(f"listener {self.port} 127.0.0.1\nallow_anonymous true\npersistence false\nuser root\n"
                      + "".join(line + "\n" for line in settings))
        self.process = subprocess.Popen(["/usr/sbin/mosquitto", "-c", config], stderr=subprocess.DEVNULL)
        wait_accepting(self.port, f"mosquitto {name}")

    @property
    def url(self):
        return f"mqtt://127.0.0.1:{self.port}"


def topology(work):
    centre = Broker(work, "centre", [QUEUE])
    sites = {site: Broker(work, site, [QUEUE] + site_configuration(site, centre.port)) for site in ("site-a", "site-b")}
    return centre, sites


def timed_list(broker, host=None):
    arguments = [ACCMON, "list", "--broker", broker.url] + (["--host", host] if host else [])
    started = time.monotonic()
    result = subprocess.run(arguments, capture_output=True, text=True, timeout=600)
    seconds = time.monotonic() - started
    return {"seconds": round(seconds, 3), "rows": len(result.stdout.splitlines()) - 1, "exit": result.returncode,
            "warnings": result.stderr.strip()[:300] or None}


def wait_for_rows(broker, rows, timeout=600):
    """Waits until `accmon list --broker` of `broker` shows `rows` rows; returns the seconds it took."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if timed_list(broker)["rows"] >= rows:
            return round(time.monotonic() - started, 3)
        time.sleep(0.5)
    raise SystemExit(f"bench: {broker.name} never held {rows} accessories")


def publisher(broker, hosts, first, churn):
    process = subprocess.Popen(
        [os.path.join(options.tools_dir, "fleet_publish"), str(broker.port), str(hosts), str(options.accessories),
         "--churn", str(churn), "--first", str(first)], stdout=subprocess.PIPE, text=True)
    return process, json.loads(process.stdout.readline())


def list_part(work):
    centre, sites = topology(work)
    alone = Broker(work, "alone", [QUEUE])
    half = options.hosts // 2
    processes = []
    try:
        started = time.monotonic()
        a, published_a = publisher(sites["site-a"], half, 0, options.churn / 2)
        b, published_b = publisher(sites["site-b"], options.hosts - half, half, options.churn / 2)
        published = time.monotonic()
        lone, published_alone = publisher(alone, options.hosts, 0, options.churn)
        processes = [a, b, lone]
        total = options.hosts * options.accessories
        # Churn deletes and publishes again: the count moves around the total; most of it is enough to be there.
        at_centre = wait_for_rows(centre, int(total * 0.99))
        fleet = {"hosts": options.hosts, "accessories_per_host": options.accessories, "churn_per_s": options.churn}
        emit({"bench": "sites-publish", "tool": "fleet_publish", **fleet, "site_a": published_a,
              "site_b": published_b, "alone": published_alone,
              "sites_publish_s": round(published - started, 3),
              "centre_complete_after_s": round(time.monotonic() - published, 3), "centre_wait_s": at_centre,
              "centre_rss_kib": rss_kib(centre.process.pid), "site_rss_kib": rss_kib(sites["site-a"].process.pid),
              "alone_rss_kib": rss_kib(alone.process.pid)})  # fmt: skip
        figures = {key: [] for key in ("centre_all", "alone_all", "centre_one", "alone_one")}
        for repeat in range(options.repeats):
            pairs = [("centre_all", lambda: timed_list(centre)), ("alone_all", lambda: timed_list(alone)),
                     ("centre_one", lambda: timed_list(centre, ONE)), ("alone_one", lambda: timed_list(alone, ONE))]
            for pair in (pairs[:2], pairs[2:]):
                for key, measure in (pair if repeat % 2 == 0 else list(reversed(pair))):
                    result = measure()
                    emit({"bench": "sites-list", "tool": key.replace("_", "-"), "repeat": repeat, **fleet, **result})
                    figures[key].append(result["seconds"])
        rss = {"centre_rss_kib": rss_kib(centre.process.pid), "site_rss_kib": rss_kib(sites["site-a"].process.pid),
               "alone_rss_kib": rss_kib(alone.process.pid)}
        return {key: median(values) for key, values in figures.items()}, rss
    finally:
        for process in processes:
            stop(process)
        for broker in [centre, alone, *sites.values()]:
            stop(broker.process)


class Host:
    """accmond --simulate and accmon-mqtt publishing it as `name` to `broker`."""

    def __init__(self, work, name, broker):
        self.work = os.path.join(work, name)
        os.makedirs(self.work)
        self.socket = os.path.join(self.work, "accmon.sock")
        self.accmond = subprocess.Popen(
            [f"{options.bin_dir}/accmond", "--socket", self.socket, "--simulate", "--no-udev", "--log-level",
             "warning"] + accmond_arguments(options.bin_dir, self.work), stderr=subprocess.DEVNULL)
        wait_for_socket(self.socket)
        with open(os.path.join(self.work, "machine-id"), "w") as machine:
            machine.write(f"{abs(hash(name)):032x}\n")
        config = os.path.join(self.work, "mqtt.json")
        with open(config, "w") as out:
            json.dump({"broker": broker.url, "host": name, "socket": self.socket,
                       "machineIDFile": os.path.join(self.work, "machine-id")}, out)  # fmt: skip
        self.log = os.path.join(self.work, "bridge.err")
        self.bridge = subprocess.Popen([f"{options.bin_dir}/accmon-mqtt", "--config", config, "--log-level", "info"],
                                       stderr=open(self.log, "w"))
        self.driver = Driver(self.socket, "bench-sites")
        self.request = self.driver.request

    def synchronized(self):
        with open(self.log) as log:
            return "mqtt: synchronized" in log.read()

    def close(self):
        stop(self.bridge)
        stop(self.accmond)


def wait_until(condition, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise SystemExit(f"bench: {what}")


def lease_part(work):
    broker = Broker(work, "lease")
    hosts = [Host(work, f"lease-{index}", broker) for index in range(options.lease_hosts)]
    try:
        wait_until(lambda: all(host.synchronized() for host in hosts), 30, "the hosts never synchronized")
        time.sleep(2)  # the statuses with their counts published
        counted = subprocess.run(["mosquitto_sub", "-p", str(broker.port), "-t", "accmon/+/status", "-R", "-F", "%t",
                                  "-W", str(int(options.lease_seconds))], capture_output=True, text=True)  # fmt: skip
        renewals = len(counted.stdout.splitlines())
        per_hour = renewals / options.lease_hosts * 3600 / options.lease_seconds
        result = {"hosts": options.lease_hosts, "seconds": options.lease_seconds, "status_lease_s": 20,
                  "statuses_received": renewals, "per_host_per_hour": round(per_hour, 1)}  # fmt: skip
        emit({"bench": "sites-lease", "tool": "accmon-mqtt", **result})
        return result
    finally:
        for host in hosts:
            host.close()
        stop(broker.process)


def percentiles(values):
    values = sorted(values)
    if not values:
        return {"p50_us": None, "p95_us": None, "p99_us": None}
    pick = lambda q: round(values[min(len(values) - 1, int(q * len(values)))] / 1000, 1)
    return {"p50_us": pick(0.50), "p95_us": pick(0.95), "p99_us": pick(0.99)}


def latency_part(work, repeat):
    centre, sites = topology(work)
    host = Host(work, f"lab-{repeat}", sites["site-a"])
    readers = {}
    processes = []
    try:
        wait_until(host.synchronized, 30, "the host never synchronized")
        for name, broker in (("centre", centre), ("site", sites["site-a"])):
            out = open(os.path.join(work, f"{name}-{repeat}.txt"), "w")
            stamp = subprocess.Popen([STAMP], stdin=subprocess.PIPE, stdout=out)
            watch = subprocess.Popen([ACCMON, "watch", "--broker", broker.url, "--json"], stdout=stamp.stdin,
                                     stderr=subprocess.DEVNULL)
            stamp.stdin.close()
            processes += [watch, stamp]
            readers[name] = out.name
        time.sleep(1.5)  # both read the fleet and follow it
        sent = {}
        live = []
        for index in range(options.latency_events):
            started = time.monotonic_ns()
            if live and index % 2:
                host.request({"type": "simulate", "action": "disconnect", "connectionID": live.pop(0)})
            else:
                reply = host.request({"type": "simulate", "action": "connect", "accessory": {
                    "kind": "usb", "vendorID": "1209", "productID": "0001", "serialNumber": f"L{repeat}-{index}",
                    "name": "bench accessory"}})  # fmt: skip
                live.append(reply["connectionID"])
                sent[reply["connectionID"]] = started
            time.sleep(0.02)
        time.sleep(2)
        result = {}
        for name, path in readers.items():
            arrivals = []
            with open(path) as lines:
                for line in lines:
                    stamp, _, text = line.rstrip("\n").partition(" ")
                    try:
                        event = json.loads(text)
                    except ValueError:
                        continue
                    if event.get("type") == "connect" and event["accessory"]["connectionID"] in sent:
                        arrivals.append(int(stamp) - sent[event["accessory"]["connectionID"]])
            figures = dict({"received": len(arrivals), "plugs": len(sent)}, **percentiles(arrivals))
            emit({"bench": "sites-latency", "tool": f"watch-{name}", "repeat": repeat, **figures})
            result[name] = figures
        return result
    finally:
        for process in processes:
            stop(process)
        host.close()
        for broker in [centre, *sites.values()]:
            stop(broker.process)


def main():
    work = tempfile.mkdtemp(prefix="accmon-bench-sites-")
    listed, rss = list_part(work)
    lease = lease_part(work)
    latencies = [latency_part(work, repeat) for repeat in range(options.repeats)]
    ratio = lambda a, b: round(a / b, 2) if a and b else None
    emit({"bench": "sites-summary", "tool": "accmon", "hosts": options.hosts,
          "accessories_per_host": options.accessories, "churn_per_s": options.churn,
          "list_all_centre_s": listed["centre_all"], "list_all_alone_s": listed["alone_all"],
          "ratio_all": ratio(listed["centre_all"], listed["alone_all"]),
          "list_one_centre_s": listed["centre_one"], "list_one_alone_s": listed["alone_one"], **rss,
          "lease_per_host_per_hour": lease["per_host_per_hour"],
          "latency_centre_p50_us": median([l["centre"]["p50_us"] for l in latencies]),
          "latency_site_p50_us": median([l["site"]["p50_us"] for l in latencies]),
          "latency_centre_p99_us": median([l["centre"]["p99_us"] for l in latencies]),
          "latency_site_p99_us": median([l["site"]["p99_us"] for l in latencies])})  # fmt: skip


main()
