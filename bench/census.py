#!/usr/bin/python3
"""The census and failover across a broker's addresses (docs/MQTT.md §2, §5, §11.2), on one local mosquitto per part.

- census N (N = 500 and 10,000 by default): N synthetic hosts whose online statuses (with a lease, no accessory) are
  retained, and one MQTT client (paho) that answers every census request for all N, as N bridges would. Each repeat:
  the bench's own reader publishes a request and counts the answers until all came (answers per second, from the
  request to the last answer); then `accmon list --broker --json` with the census (the default) and with
  `--census-wait 0`, alternating which goes first: the difference of their wall times is what the census costs the
  reader (its wait). The answerer answers as bridges do, each at a moment drawn within the request's window.
- census-only N: the same answerer for N hosts whose statuses are not retained (what a reader on a cluster node sees
  of the hosts whose bridges are on another node, docs/MQTT.md §11.2), through a mosquitto with its default
  `max_queued_messages 1000` and `accmon list --broker` with its default `--broker-queue 1000`: the hosts it shows,
  the census's rounds (requests the answerer got), its exit status and its wall time.
- list: `tools/fleet_publish` publishes H × M (500 × 100 by default) with the same answering client for its hosts;
  `accmon list --broker` (the table) with and without the census, alternating.
- failover: `accmond --simulate` and `accmon-mqtt` with a broker of two addresses, 10 accessories plugged; the first
  killed with SIGKILL; the time until the host's online status, with its count, arrives through the second. Two
  brokers: two mosquittos, and the two nodes of an ejabberd cluster (bench/ejabberd_rig.py; the bridge logs in).

Prints one JSON line per measurement, then a `census-summary` line with the medians.

Usage: census.py BIN_DIR TOOLS_DIR [--repeats R] [--census-hosts N,N] [--hosts H] [--accessories M]
"""
import argparse, json, os, random, signal, subprocess, sys, tempfile, threading, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import LoopbackBroker, free_port, emit, median, wait_accepting  # noqa: E402
from ejabberd_rig import TESTER, Cluster  # noqa: E402

import paho.mqtt.client as mqtt  # noqa: E402  (Debian's python3-paho-mqtt)
from paho.mqtt.packettypes import PacketTypes  # noqa: E402
from paho.mqtt.properties import Properties  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("bin_dir")
parser.add_argument("tools_dir")
parser.add_argument("--repeats", type=int, default=3)
parser.add_argument("--census-hosts", default="500,10000")
parser.add_argument("--hosts", type=int, default=500)
parser.add_argument("--accessories", type=int, default=100)
options = parser.parse_args()
ACCMON = os.path.join(options.bin_dir, "accmon")
QUEUE = 40000
DEFAULT_QUEUE = 1000  # mosquitto's max_queued_messages by default


class Broker(LoopbackBroker):
    def __init__(self, work, name, queue=QUEUE):
        self.port = free_port()
        config = os.path.join(work, f"{name}.conf")
        with open(config, "w") as out:
            out.write(f"listener {self.port} 127.0.0.1\nallow_anonymous true\npersistence false\nuser root\n"
                      f"max_queued_messages {queue}\nset_tcp_nodelay true\n")
        self.process = subprocess.Popen(["mosquitto", "-c", config], stderr=subprocess.DEVNULL)
        wait_accepting(self.port, "mosquitto")


def client(broker, name, login=None):
    made = mqtt.Client(client_id=name, protocol=mqtt.MQTTv5)
    made.max_queued_messages_set(0)
    if login:
        made.username_pw_set(*login)
    made.connect("127.0.0.1", broker.port)
    made.loop_start()
    return made


def status(name, count):
    return {"bridge": "0.1.0", "host": name, "lease": 600, "machineID": "m", "runID": "r", "since": 1.0,
            "state": "online", "retained": {"accessories": count}}


class Answerer:
    """Answers every census request for `names` as their bridges would: each at a moment drawn at random within the
    request's window (docs/MQTT.md §5; at once without one), sent in time order from a thread of its own (the answers
    are made beforehand). Counts the requests."""

    def __init__(self, broker, names, count):
        self.payloads = [json.dumps({"accessories": count, "digest": "0" * 16, "host": name,
                                     "status": status(name, count)}) for name in names]
        self.requests = 0
        self.client = client(broker, "census-answerer")
        self.client.on_message = lambda _c, _u, message: threading.Thread(target=self.answer, args=(message,)).start()
        self.client.subscribe("accmon/$census/+")
        time.sleep(0.2)

    def answer(self, message):
        started = time.monotonic()
        self.requests += 1
        try:
            window = float(json.loads(message.payload).get("window") or 0)
        except (ValueError, AttributeError, TypeError):
            window = 0.0
        reply = Properties(PacketTypes.PUBLISH)
        reply.CorrelationData = message.properties.CorrelationData
        plan = sorted((random.uniform(0, min(window, 10.0)), payload) for payload in self.payloads)
        for at, payload in plan:
            wait = started + at - time.monotonic()
            if wait > 0.001:
                time.sleep(wait)
            self.client.publish(message.properties.ResponseTopic, payload, qos=0, properties=reply)


def own_census(broker, expected):
    """The bench's reader: one request, the answers counted until `expected` came (or 20 s)."""
    reader = client(broker, "census-reader")
    answers = []
    done = threading.Event()

    def on_message(_c, _u, _message):
        answers.append(time.monotonic())
        if len(answers) >= expected:
            done.set()

    reader.on_message = on_message
    topic = "accmon/$readers/census-reader/census"
    reader.subscribe(topic)
    time.sleep(0.2)
    request = Properties(PacketTypes.PUBLISH)
    request.ResponseTopic, request.CorrelationData, request.MessageExpiryInterval = topic, b"bench", 5
    started = time.monotonic()
    reader.publish("accmon/$census/census-reader", "{}", qos=0, properties=request)
    done.wait(20)
    reader.loop_stop()
    reader.disconnect()
    last = (answers[-1] - started) if answers else None
    return len(answers), last


def timed_list(broker, extra, queue=QUEUE):
    started = time.monotonic()
    result = subprocess.run([ACCMON, "list", "--broker", broker.url, "--json", "--broker-queue", str(queue)] + extra,
                            capture_output=True, text=True)
    seconds = time.monotonic() - started
    hosts = len(json.loads(result.stdout)["hosts"]) if result.stdout.strip().startswith("{") else None
    return seconds, hosts, result.returncode


summary = {"bench": "census-summary", "repeats": options.repeats, "broker_queue": QUEUE}

# --- census of N synthetic hosts ---------------------------------------------------------------------------------
for count in [int(n) for n in options.census_hosts.split(",")]:
    with tempfile.TemporaryDirectory() as work:
        broker = Broker(work, f"census-{count}")
        names = [f"lab-{i:05d}" for i in range(count)]
        publisher = client(broker, "statuses")
        for name in names:
            properties = Properties(PacketTypes.PUBLISH)
            properties.MessageExpiryInterval = 600
            publisher.publish(f"accmon/{name}/status", json.dumps(status(name, 0)), qos=0, retain=True,
                              properties=properties)
        publisher.publish("bench/done", "x", qos=1).wait_for_publish()
        answerer = Answerer(broker, names, 0)
        rates, lasts, with_census, without, found = [], [], [], [], []
        for repeat in range(options.repeats):
            got, last = own_census(broker, count)
            rate = got / last if last else None
            emit({"bench": "census", "hosts": count, "repeat": repeat, "answers": got, "last_answer_s": last,
                  "answers_per_s": rate})
            rates.append(rate)
            lasts.append(last)
            order = [("census", []), ("no-census", ["--census-wait", "0"])]
            for label, extra in (order if repeat % 2 == 0 else order[::-1]):
                seconds, shown, status_code = timed_list(broker, extra)
                emit({"bench": "census-list", "hosts": count, "repeat": repeat, "mode": label, "seconds": seconds,
                      "hosts_shown": shown, "exit": status_code})
                (with_census if label == "census" else without).append(seconds)
                if label == "census":
                    found.append(shown)
        summary[f"census_{count}"] = {
            "answers_per_s": median(rates), "last_answer_s": median(lasts), "list_census_s": median(with_census),
            "list_no_census_s": median(without),
            "census_wait_s": median([a - b for a, b in zip(with_census, without)]), "hosts_shown_min": min(found)}
        answerer.client.loop_stop()
        broker.kill()

# --- census-only hosts: N bridges whose statuses the broker does not give, mosquitto's default queue ----------------
for count in [int(n) for n in options.census_hosts.split(",")]:
    with tempfile.TemporaryDirectory() as work:
        broker = Broker(work, f"census-only-{count}", queue=DEFAULT_QUEUE)
        answerer = Answerer(broker, [f"far-{i:05d}" for i in range(count)], 0)
        seconds_all, shown_all, rounds_all, exits = [], [], [], []
        for repeat in range(options.repeats):
            before = answerer.requests
            seconds, shown, status_code = timed_list(broker, [], queue=DEFAULT_QUEUE)
            rounds = answerer.requests - before
            emit({"bench": "census-only-list", "hosts": count, "repeat": repeat, "seconds": seconds,
                  "hosts_shown": shown, "rounds": rounds, "exit": status_code})
            seconds_all.append(seconds)
            shown_all.append(shown or 0)
            rounds_all.append(rounds)
            exits.append(status_code)
        summary[f"census_only_{count}"] = {
            "list_s": median(seconds_all), "hosts_shown_min": min(shown_all), "rounds_max": max(rounds_all),
            "exits": sorted(set(exits))}
        answerer.client.loop_stop()
        broker.kill()

# --- list H x M with and without the census -----------------------------------------------------------------------
with tempfile.TemporaryDirectory() as work:
    broker = Broker(work, "list")
    publisher = subprocess.Popen([os.path.join(options.tools_dir, "fleet_publish"), str(broker.port),
                                  str(options.hosts), str(options.accessories)], stdout=subprocess.PIPE, text=True)
    published = json.loads(publisher.stdout.readline())
    publisher.wait()
    answerer = Answerer(broker, [f"lab-{i:05d}" for i in range(options.hosts)], options.accessories)
    with_census, without = [], []
    for repeat in range(options.repeats):
        order = [("census", []), ("no-census", ["--census-wait", "0"])]
        for label, extra in (order if repeat % 2 == 0 else order[::-1]):
            seconds, shown, status_code = timed_list(broker, extra)
            emit({"bench": "census-fleet-list", "hosts": options.hosts, "accessories": options.accessories,
                  "repeat": repeat, "mode": label, "seconds": seconds, "hosts_shown": shown, "exit": status_code})
            (with_census if label == "census" else without).append(seconds)
    summary["list"] = {"hosts": options.hosts, "accessories": options.accessories, "census_s": median(with_census),
                       "no_census_s": median(without), "ratio": median(with_census) / median(without)}
    answerer.client.loop_stop()
    broker.kill()

# --- failover: the first of a broker's two addresses killed -----------------------------------------------------
def failover(work, first, second, login=None):
    """accmond --simulate with 10 accessories and accmon-mqtt with [first, second]; once the host's status with its
    count is on the first, the first is killed: the seconds until that status arrives again through the second (a
    watcher there, counting only what comes after the kill: a cluster's nodes pass each other's messages on)."""
    socket_path = os.path.join(work, "accmond.sock")
    manifest = os.path.join(work, "manifest.json")
    with open(manifest, "w") as out:
        json.dump({"version": 1, "accessories": [{"name": "all", "match": {"id": "*:*"}}]}, out)
    daemon = subprocess.Popen([os.path.join(options.bin_dir, "accmond"), "--socket", socket_path, "--no-udev",
                               "--simulate", "--state-dir", os.path.join(work, "state"), "--manifest", manifest,
                               "--manifest-dir", os.path.join(work, "manifest.d")], stderr=subprocess.DEVNULL)
    with open(machine := os.path.join(work, "machine-id"), "w") as out:
        out.write("bench\n")
    settings = {"broker": [first.url, second.url], "host": "lab-1", "socket": socket_path, "machineIDFile": machine,
                "keepAlive": 5, "stateDirectory": os.path.join(work, "bridge")}
    sub_login = []
    if login:
        with open(password := os.path.join(work, "lab-1.password"), "w") as out:
            out.write("pw-lab-1\n")
        os.chmod(password, 0o600)
        settings.update(username="lab-1", passwordFile=password)
        sub_login = ["-u", login[0], "-P", login[1]]
    with open(config := os.path.join(work, "mqtt.json"), "w") as out:
        json.dump(settings, out)
    time.sleep(0.5)
    for index in range(10):
        subprocess.run([ACCMON, "--socket", socket_path, "simulate", "connect", "--kind", "usb", "--vendor",
                        "1209", "--product", f"{index:04x}", "--serial", f"S{index}"], capture_output=True)
    bridge = subprocess.Popen([os.path.join(options.bin_dir, "accmon-mqtt"), "--config", config],
                              stderr=subprocess.DEVNULL)
    arrived, killed = threading.Event(), [None]

    def on_message(_c, _u, message):
        if killed[0] is not None and b'"accessories":10' in message.payload and b'"online"' in message.payload:
            arrived.set()

    watcher = client(second, "failover-watcher", login)
    watcher.on_message = on_message
    watcher.subscribe("accmon/lab-1/status")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the bridge on the first, with its count
        seen = subprocess.run(["mosquitto_sub", "-V", "mqttv5", "-p", str(first.port), *sub_login, "-t",
                               "accmon/lab-1/status", "-C", "1", "-W", "2"], capture_output=True, text=True).stdout
        if '"accessories":10' in seen:
            break
    killed[0] = time.monotonic()
    first.kill()
    arrived.wait(30)
    seconds = time.monotonic() - killed[0] if arrived.is_set() else None
    watcher.loop_stop()
    for process in (bridge, daemon):
        process.send_signal(signal.SIGTERM)
        process.wait(10)
    return seconds


failovers = {"mosquitto": [], "ejabberd_cluster": []}
for repeat in range(options.repeats):
    with tempfile.TemporaryDirectory() as work:
        first, second = Broker(work, "a"), Broker(work, "b")
        seconds = failover(work, first, second)
        emit({"bench": "failover", "broker": "mosquitto", "repeat": repeat, "seconds": seconds})
        failovers["mosquitto"].append(seconds)
        second.kill()
    with tempfile.TemporaryDirectory() as work:
        cluster = Cluster(work, ["lab-1"])
        seconds = failover(work, cluster.a, cluster.b, login=TESTER)
        emit({"bench": "failover", "broker": "ejabberd-cluster", "repeat": repeat, "seconds": seconds})
        failovers["ejabberd_cluster"].append(seconds)
        cluster.kill()
for broker, values in failovers.items():
    summary[f"failover_{broker}_ms"] = median(values) * 1000 if values and all(values) else None
emit(summary)
