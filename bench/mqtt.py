#!/usr/bin/python3
"""The MQTT bridge: plug-to-subscriber latency, sustained throughput and memory through a broker outage.

Each repeat starts a fresh mosquitto on a free port, `accmond --simulate --no-udev` and `accmon-mqtt` (release
builds) publishing it as host `bench`. The driver plugs and unplugs simulated accessories over accmond's socket
(`simulate` requests, as root); every receiver's output goes through tools/stamp, which times each line as it is read.

- latency: N events, one every 2 ms. For each, the time from sending the `simulate` request until
  (a) `mosquitto_sub` on the accessory's retained topic has the message (through accmond, the bridge and mosquitto),
  (b) `accmon watch --json` has the event (accmond's own hop).
  Floor: N messages written one every 2 ms to `mosquitto_pub -l -q 1` and read by `mosquitto_sub` on the same broker.
- sustained: K `simulate` requests back to back (connects, then disconnects); figures: events/s as the events topic's
  subscriber reads them, pairs coalesced (a plug and its unplug that both waited in accmond while the bridge was
  suspended: the events topic skips them), messages lost (K minus the lines read and the coalesced pairs), the
  bridge's and accmond's CPU per event.
  Floor: the same burst through tools/mqtt_relay, the same hops with no work (it reads accmond's event lines and
  publishes each as two QoS 1 messages, the retained topic and the events line, without parsing), on an accmond and
  a mosquitto of its own (no bridge); bridge first in even repeats, relay first in odd ones. Beside it, K
  lines through `mosquitto_pub -l -q 1` to `mosquitto_sub`, one message per line: compared counting messages (an
  event is two) and counting events.
- outage (once, --outage-seconds, 600 by default): mosquitto killed (SIGKILL); 50 accessories toggled at random,
  --outage-rate events/s, the whole time; the bridge's VmRSS every 10 s (flat: growth after the first sample at most
  5 %); then mosquitto restarted and the time until the retained topics equal accmond's truth.

Prints one JSON line per measurement and repeat, then a summary per measurement.

Usage: mqtt.py BIN_DIR TOOLS_DIR [--repeats R] [--latency-events N] [--sustained-events K] [--outage-seconds S]
                                 [--outage-rate E]
"""
import argparse, json, os, random, shutil, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import emit, median, rss_kib  # noqa: E402
from mqtt_rig import BRIDGE_HOST as HOST, Rig, cpu_seconds, peak_rss_kib, percentiles  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("bin_dir")
parser.add_argument("tools_dir")
parser.add_argument("--repeats", type=int, default=3)
parser.add_argument("--latency-events", type=int, default=1000)
parser.add_argument("--sustained-events", type=int, default=20000)
parser.add_argument("--outage-seconds", type=float, default=600)
parser.add_argument("--outage-rate", type=float, default=200)
options = parser.parse_args()
STAMP = os.path.join(options.tools_dir, "stamp")


def latency(rig, repeat):
    count = options.latency_events
    rig.subscriber(f"accmon/{HOST}/accessories/+/+", "mqtt-latency")
    rig.stamped([f"{options.bin_dir}/accmon", "--socket", rig.socket_path, "watch", "--json"], "watch-latency")
    time.sleep(0.3)
    sent = []  # (send time, connection id, change)
    live = []
    for index in range(count):
        started = time.monotonic_ns()
        if live and (index % 2 == 1):
            connection = live.pop(0)
            rig.request({"type": "simulate", "action": "disconnect", "connectionID": connection})
            sent.append((started, connection, "disconnect"))
        else:
            connection = rig.request(Rig.plug_message(f"L{repeat}-{index}"))["connectionID"]
            live.append(connection)
            sent.append((started, connection, "connect"))
        time.sleep(0.002)
    time.sleep(1)
    # The retained topic of a connection gets its accessory, then its deletion: first and second line per connection.
    arrivals = {}
    for stamp, topic in rig.lines("mqtt-latency"):
        arrivals.setdefault(int(topic.rsplit("/", 1)[1]), []).append(int(stamp))
    watch = {}
    for stamp, line in rig.lines("watch-latency"):
        event = json.loads(line)
        if event.get("type") in ("connect", "disconnect"):
            watch[(event["accessory"]["connectionID"], event["type"])] = int(stamp)
    mqtt, own = [], []
    for started, connection, change in sent:
        times = arrivals.get(connection, [])
        index = 0 if change == "connect" else 1
        if len(times) > index:
            mqtt.append(times[index] - started)
        if (connection, change) in watch:
            own.append(watch[(connection, change)] - started)
    emit(dict({"bench": "mqtt-latency", "tool": "accmon-mqtt", "repeat": repeat, "events": count,
               "received": len(mqtt)}, **percentiles(mqtt)))
    emit(dict({"bench": "mqtt-latency", "tool": "accmon-watch", "repeat": repeat, "events": count,
               "received": len(own)}, **percentiles(own)))

    # The floor: mosquitto_pub to mosquitto_sub on the same broker, QoS 1 as the bridge publishes.
    rig.subscriber("bench/floor", "floor-latency", fmt="%p")
    publisher = subprocess.Popen(["mosquitto_pub", "-p", str(rig.port), "-t", "bench/floor", "-q", "1", "-l"],
                                 stdin=subprocess.PIPE)
    time.sleep(0.3)
    sent_at = {}
    for index in range(count):
        sent_at[str(index)] = time.monotonic_ns()
        publisher.stdin.write(f"{index}\n".encode())
        publisher.stdin.flush()
        time.sleep(0.002)
    time.sleep(1)
    publisher.stdin.close()
    publisher.wait(timeout=10)
    floor = [int(stamp) - sent_at[payload] for stamp, payload in rig.lines("floor-latency") if payload in sent_at]
    emit(dict({"bench": "mqtt-latency", "tool": "mosquitto-pub-sub", "repeat": repeat, "events": count,
               "received": len(floor)}, **percentiles(floor)))
    return percentiles(mqtt), percentiles(own), percentiles(floor)


def burst(rig, repeat, tag, topic):
    """K `simulate` requests back to back (connects, then disconnects), read on `topic`: events/s as its subscriber
    reads them, and what was coalesced or lost."""
    count = options.sustained_events
    rig.subscriber(topic, tag, fmt="%p")
    started = time.monotonic_ns()
    connections = []
    batch = 500
    for base in range(0, count // 2, batch):  # connects, in pipelined batches
        size = min(batch, count // 2 - base)
        for index in range(size):
            rig.send(Rig.plug_message(f"{tag}{repeat}-{base + index}"))
        connections += [rig.reply()["connectionID"] for _ in range(size)]
    for base in range(0, len(connections), batch):  # then the disconnects
        chunk = connections[base:base + batch]
        for connection in chunk:
            rig.send({"type": "simulate", "action": "disconnect", "connectionID": connection})
        for _ in chunk:
            rig.reply()
    deadline = time.time() + 120
    while time.time() < deadline and len(rig.lines(tag)) < count:
        time.sleep(0.1)
    time.sleep(1)
    lines = rig.lines(tag)
    last = max((int(stamp) for stamp, _ in lines), default=started)
    events = len(lines)
    # A plug and its unplug that both waited in the relay's queue in accmond (it fell behind and was suspended)
    # cancel out: the events topic never carries them (docs/MQTT.md). Lost is what is missing otherwise.
    seen = set()
    for _, payload in lines:
        event = json.loads(payload)
        seen.add((event["type"], event["accessory"]["connectionID"]))
    coalesced = sum(1 for c in connections if ("connect", c) not in seen and ("disconnect", c) not in seen)
    return {"events": count, "received": events, "coalesced_pairs": coalesced, "lost": count - events - 2 * coalesced,
            "events_per_s": round(events / ((last - started) / 1e9))}


def sustained(rig, repeat):
    """The bridge's burst and the minimal relay's (tools/mqtt_relay: the same hops, no work), one after the other in
    alternating order; the relay on an accmond and a broker of its own, without a bridge."""
    count = options.sustained_events

    def bridge_run():
        bridge_cpu, accmond_cpu = cpu_seconds(rig.bridge.pid), cpu_seconds(rig.accmond.pid)
        figures = burst(rig, repeat, "sustained", f"accmon/{HOST}/events")
        figures.update({"bridge_peak_rss_kib": peak_rss_kib(rig.bridge.pid),
                        "bridge_cpu_us_per_event": round((cpu_seconds(rig.bridge.pid) - bridge_cpu) / count * 1e6, 1),
                        "accmond_cpu_us_per_event": round((cpu_seconds(rig.accmond.pid) - accmond_cpu) / count * 1e6,
                                                          1)})
        return dict({"bench": "mqtt-sustained", "tool": "accmon-mqtt", "repeat": repeat}, **figures)

    def relay_run():
        work = tempfile.mkdtemp(prefix="accmon-bench-mqtt-relay-")
        own = Rig(work, options.bin_dir, STAMP, bridge=False)
        try:
            relay = own.spawn([os.path.join(options.tools_dir, "mqtt_relay"), own.socket_path, str(own.port)],
                              stdout=subprocess.PIPE, log="relay")
            if relay.stdout.readline().strip() != b"ready":
                raise SystemExit("bench: mqtt_relay did not start")
            relay_cpu, accmond_cpu = cpu_seconds(relay.pid), cpu_seconds(own.accmond.pid)
            figures = burst(own, repeat, "relay-sustained", "bench/relay/events")
            figures.update({"relay_cpu_us_per_event": round((cpu_seconds(relay.pid) - relay_cpu) / count * 1e6, 1),
                            "accmond_cpu_us_per_event": round(
                                (cpu_seconds(own.accmond.pid) - accmond_cpu) / count * 1e6, 1)})
        finally:
            own.close()
            shutil.rmtree(work, ignore_errors=True)
        return dict({"bench": "mqtt-sustained", "tool": "minimal-relay", "repeat": repeat}, **figures)

    if repeat % 2 == 0:
        record, relayed = bridge_run(), relay_run()
    else:
        relayed, record = relay_run(), bridge_run()
    emit(record)
    emit(relayed)

    rig.subscriber("bench/floor-sustained", "floor-sustained", fmt="%p")
    publisher = subprocess.Popen(["mosquitto_pub", "-p", str(rig.port), "-t", "bench/floor-sustained", "-q", "1",
                                  "-l"], stdin=subprocess.PIPE)
    time.sleep(0.3)
    payload = "x" * 450  # about an event line's length
    started = time.monotonic_ns()
    publisher.stdin.write("".join(f"{index} {payload}\n" for index in range(count)).encode())
    publisher.stdin.close()
    publisher.wait(timeout=120)
    deadline = time.time() + 60
    while time.time() < deadline and len(rig.lines("floor-sustained")) < count:
        time.sleep(0.1)
    lines = rig.lines("floor-sustained")
    last = max((int(stamp) for stamp, _ in lines), default=started)
    # One line, one message: its rate is in messages/s (the bridge sends two messages per event).
    floor = {"bench": "mqtt-sustained", "tool": "mosquitto-pub-sub", "repeat": repeat, "messages": count,
             "received": len(lines), "lost": count - len(lines),
             "messages_per_s": round(len(lines) / ((last - started) / 1e9))}
    emit(floor)
    return record, floor, relayed


def outage(rig):
    for index in range(50):
        rig.request(Rig.plug_message(f"O{index}"))
    time.sleep(1)
    rig.broker.kill()
    rig.broker.wait()
    samples = [rss_kib(rig.bridge.pid)]
    accmond_samples = [rss_kib(rig.accmond.pid)]
    live = sorted(rig.truth())
    events = 0
    started = time.time()
    next_sample = started + 10
    rng = random.Random(1)
    while time.time() - started < options.outage_seconds:
        if rng.random() < 0.5 and live:
            connection = live.pop(rng.randrange(len(live)))
            rig.request({"type": "simulate", "action": "disconnect", "connectionID": connection})
        else:
            live.append(rig.request(Rig.plug_message(f"O-{events}"))["connectionID"])
        events += 1
        time.sleep(max(0.0, started + events / options.outage_rate - time.time()))
        if time.time() >= next_sample:
            samples.append(rss_kib(rig.bridge.pid))
            accmond_samples.append(rss_kib(rig.accmond.pid))
            next_sample += 10
    samples.append(rss_kib(rig.bridge.pid))
    session = [client for client in rig.request({"type": "status"})["clients"] if client["clientName"] == "accmon-mqtt"]
    rig.start_broker()
    restarted = time.time()
    truth = rig.truth()
    converge = None
    while time.time() - restarted < 120:
        if rig.retained() == truth:
            converge = round(time.time() - restarted, 2)
            break
        time.sleep(0.2)
    growth = (max(samples[1:]) - samples[1]) / samples[1] * 100 if len(samples) > 2 else 0.0
    emit({"bench": "mqtt-outage", "tool": "accmon-mqtt", "seconds": options.outage_seconds, "events": events,
          "connected_at_end": len(truth), "bridge_rss_kib_samples": samples, "bridge_rss_kib_first": samples[1],
          "bridge_rss_kib_max": max(samples), "growth_after_first_sample_percent": round(growth, 1),
          "flat": growth <= 5, "accmond_rss_kib_first": accmond_samples[0], "accmond_rss_kib_last": accmond_samples[-1],
          "bridge_session_at_end": {key: session[0][key] for key in ("state", "suspendedBecause", "queuedEvents")}
          if session else None, "converged_seconds_after_restart": converge})


latencies, throughputs = [], []
for repeat in range(options.repeats):
    work = tempfile.mkdtemp(prefix="accmon-bench-mqtt-")
    rig = Rig(work, options.bin_dir, STAMP)
    try:
        latencies.append(latency(rig, repeat))
        throughputs.append(sustained(rig, repeat))
        if repeat == options.repeats - 1 and options.outage_seconds > 0:
            outage(rig)
    finally:
        rig.close()
        shutil.rmtree(work, ignore_errors=True)

summary = {"bench": "mqtt-latency-summary", "tool": "accmon-mqtt", "baseline": "mosquitto-pub-sub"}
for key in ("p50_us", "p99_us"):
    bridge, own, floor = (median([run[index][key] for run in latencies]) for index in range(3))
    summary[key] = bridge
    summary[f"baseline_{key}"] = floor
    summary[f"accmon_watch_{key}"] = own
    summary[f"ratio_{key}"] = round(bridge / floor, 2) if bridge and floor else None
emit(summary)
bridge_rate = median([run[0]["events_per_s"] for run in throughputs])
relay_rate = median([run[2]["events_per_s"] for run in throughputs])
floor_messages = median([run[1]["messages_per_s"] for run in throughputs])
emit({"bench": "mqtt-sustained-summary", "tool": "accmon-mqtt", "baseline": "minimal-relay",
      "events": options.sustained_events, "events_per_s": bridge_rate, "baseline_events_per_s": relay_rate,
      "ratio": round(bridge_rate / relay_rate, 2) if relay_rate else None,
      # mosquitto_pub -l -q 1 to mosquitto_sub: one message per line; an event is two messages.
      "mosquitto_pub_sub_messages_per_s": floor_messages,
      "ratio_to_mosquitto_pub_sub_counting_messages": round(2 * bridge_rate / floor_messages, 2) if floor_messages
      else None,
      "ratio_to_mosquitto_pub_sub_counting_events": round(bridge_rate / floor_messages, 2) if floor_messages else None,
      "relay_ratio_to_mosquitto_pub_sub_counting_events": round(relay_rate / floor_messages, 2) if floor_messages
      else None,
      "lost": max(run[0]["lost"] for run in throughputs),
      "coalesced_pairs": max(run[0]["coalesced_pairs"] for run in throughputs),
      "relay_lost": max(run[2]["lost"] for run in throughputs),
      "relay_coalesced_pairs": max(run[2]["coalesced_pairs"] for run in throughputs),
      "bridge_cpu_us_per_event": median([run[0]["bridge_cpu_us_per_event"] for run in throughputs]),
      "bridge_peak_rss_kib": max(run[0]["bridge_peak_rss_kib"] for run in throughputs),
      "relay_cpu_us_per_event": median([run[2]["relay_cpu_us_per_event"] for run in throughputs]),
      "accmond_cpu_us_per_event": median([run[0]["accmond_cpu_us_per_event"] for run in throughputs])})
