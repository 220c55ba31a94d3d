#!/usr/bin/python3
"""The results table of bench/README.md, from one `make bench` run's JSON lines: one row per measurement, from the
suites' summary lines (medians over the repeats) and, for the hostile suite, its per-phase lines.

Usage: table.py FILE
"""
import json, sys


def load(path):
    with open(path) as source:
        return [json.loads(line) for line in source if line.startswith("{")]


def find(records, bench, **fields):
    for record in records:
        if record.get("bench") == bench and all(record.get(k) == v for k, v in fields.items()):
            return record
    return None


def n(value, digits=0):
    if value is None:
        return "–"
    if isinstance(value, float) and digits:
        return f"{value:,.{digits}f}"
    return f"{round(value):,}" if abs(value) >= 10 or not digits else f"{value:.{digits}f}"


def ratio(value):
    return "–" if value is None else f"{value:.2f}×"


def met(value):
    return "" if value is None else ("yes" if value else "no")


def rows(records):
    out = []

    def add(*cells):
        out.append("| " + " | ".join(str(c) for c in cells) + " |")

    receivers = [("accmon-watch", "`accmon watch --json`"), ("accmon-client-handler", "AccmonClient app, handler"),
                 ("accmon-client-executor", "AccmonClient app, `for try await` on the reader executor"),
                 ("accmon-client", "AccmonClient app, `for try await` on the main actor"),
                 ("relay", "minimal relay `tools/relay.c`"),
                 ("relay-descriptors", "minimal relay reading and hashing an added device's descriptors")]
    for tool, label in receivers:
        r = find(records, "latency-summary", tool=tool)
        if r:
            relay = (f"; relay {ratio(r.get('relay_ratio_p50'))} / {ratio(r.get('relay_ratio_p99'))}"
                     if "relay_ratio_p50" in r else "")
            add(f"latency p50 / p99, {label} (stream)", f"{n(r['p50_us'])} / {n(r['p99_us'])} µs",
                f"udevadm {n(r['baseline_p50_us'])} / {n(r['baseline_p99_us'])} µs",
                f"{ratio(r['ratio_p50'])} / {ratio(r['ratio_p99'])}{relay}",
                "p50 ≤ 1.2× relay" if relay else "",
                met(r["relay_ratio_p50"] <= 1.2) if relay and r.get("relay_ratio_p50") is not None else "")
            if r.get("ratio_add_remove") is not None:
                floor = r.get("floor_ratio_add_remove")
                add(f"latency p50 of an add / of a remove, {label} (stream)",
                    f"{n(r['p50_add_us'])} / {n(r['p50_remove_us'])} µs",
                    f"hashing relay's add ÷ remove {ratio(floor)}" if floor is not None else "",
                    ratio(r["ratio_add_remove"]), "add ≤ 1.10× remove" if "target_ratio_add_remove" in r else "",
                    met(r.get("meets_target_add_remove")))
    for size in (5000, 50000):
        r = find(records, "burst-summary", tool="accmon-watch", events=size)
        if r:
            add(f"burst {size:,}: events/s to `accmon watch`; lost; CPU µs per event, accmond + watch (stream)",
                f"{n(r['events_per_s'])}; {r['lost']}; {n(r['cpu_us_per_event'], 1)}",
                f"udevadm {n(r['baseline_events_per_s'])}; {r['baseline_lost']}; "
                f"{n(r['baseline_cpu_us_per_event'], 1)}", ratio(r["ratio_rate"]), "≥ 0.8×; 0; ≤ 25 µs",
                met(r["meets_target"]))
    fanout = {r["subscribers"]: r for r in records if r.get("bench") == "fanout-summary"}
    for count, r in sorted(fanout.items()):
        add(f"fan-out {count:,}: deliveries/s (fanout)", n(r["deliveries_per_s"]),
            f"minimal sender {n(r['baseline_deliveries_per_s'])}", f"{r['ratio_deliveries']:.2f}", "≥ 0.7",
            met(r["meets_target"]))
    if fanout:
        counts = sorted(fanout)
        join = lambda key, digits=0: " / ".join(n(fanout[c][key], digits) for c in counts)  # noqa: E731
        label = " / ".join(f"{c:,}" for c in counts)
        add(f"fan-out {label}: time until the last subscriber has a single event, p50 (fanout)",
            join("last_subscriber_p50_us") + " µs", join("baseline_last_subscriber_p50_us") + " µs",
            " / ".join(f"{fanout[c]['ratio_last_subscriber_p50']:.1f}" for c in counts) + "×", "", "")
        add(f"fan-out {label}: the server's CPU per single event (fanout)",
            join("server_cpu_us_per_single_event") + " µs",
            "minimal sender " + join("baseline_server_cpu_us_per_single_event") + " µs", "", "", "")
        add(f"fan-out {label}: the server's CPU per event back to back (fanout)",
            join("server_cpu_us_per_burst_event", 2) + " µs",
            "minimal sender " + join("baseline_server_cpu_us_per_burst_event", 2) + " µs", "", "", "")
    r = find(records, "memory-summary")
    if r:
        add("memory: RSS idle / per idle subscribed client (1,000) / per preserved session (1,000) (memory)",
            f"{n(r['rss_idle_kib'])} KiB / {r['per_client_kib']:.2f} KiB / {r['per_preserved_session_kib']:.2f} KiB",
            "", "", "", "")
    r = find(records, "memory-suspended-summary")
    if r:
        add("memory: 100 suspended clients, 100,000 events over 50 accessories (memory)",
            f"{n(r['rss_first_sample_kib'])} → {n(r['rss_last_sample_kib'])} KiB "
            f"({r['growth_after_first_sample_kib']:+,} KiB); max queue {r['max_queue']} of bound {r['queue_bound']}",
            "", "", "flat", met(r["flat"]))
    r = find(records, "startup-summary")
    if r:
        add(f"start-up, {r['devices']:,} devices at coldplug: `READY=1` / all listed; stop (startup)",
            f"{r['ready_seconds']:.3f} / {r['all_listed_seconds']:.3f} s; {r['stop_seconds']:.3f} s", "", "", "", "")
    r = find(records, "instructions")
    if r:
        add("instructions per udev event (instructions)", f"accmond {n(r['instructions_per_event'])}",
            f"udevadm {n(r['baseline_instructions_per_event'])}", ratio(r["ratio"]), "", "")
    requests = {r["subscribers"]: r for r in records if r.get("bench") == "instructions-request"}
    if requests:
        add("instructions per `simulate` request at " + " / ".join(f"{c}" for c in sorted(requests))
            + " subscribers (instructions)", " / ".join(n(requests[c]["instructions_per_request"])
                                                        for c in sorted(requests)), "", "", "", "")
    r = find(records, "sysfs-read-summary")
    if r:
        add("one sysfs attribute read, warm: umockdev testbed / real sysfs (sysfs)", f"{r['us_per_read']:.2f} µs",
            f"real sysfs {r['baseline_us_per_read']:.2f} µs", ratio(r["ratio"]), "", "")
    for r in (x for x in records if x.get("bench") == "python-client-summary" and x["tool"] != "accmon-watch"):
        add(f"Python client `{r['tool']}`: events/s; latency p50 / p99; CPU µs per event (python)",
            f"{n(r['events_per_s'])}; {n(r['latency_p50_us'])} / {n(r['latency_p99_us'])} µs; "
            f"{n(r['receiver_cpu_us_per_event'], 1)}",
            f"accmon watch {n(r['baseline_events_per_s'])}; {n(r['baseline_latency_p50_us'])} / "
            f"{n(r['baseline_latency_p99_us'])} µs; {n(r['baseline_receiver_cpu_us_per_event'], 1)}",
            f"{r['ratio_events_per_s']:.2f} (rate), {ratio(r['ratio_latency_p50'])} (p50)", "", "")
    r = find(records, "mqtt-latency-summary")
    if r:
        add("MQTT: plug → subscriber through accmond, the bridge and mosquitto, p50 / p99 (mqtt)",
            f"{n(r['p50_us'])} / {n(r['p99_us'])} µs (accmon watch {n(r['accmon_watch_p50_us'])} / "
            f"{n(r['accmon_watch_p99_us'])} µs)", f"mosquitto_pub → sub {n(r['baseline_p50_us'])} / "
            f"{n(r['baseline_p99_us'])} µs", f"{r['ratio_p50_us']:.2f}× / {r['ratio_p99_us']:.2f}×", "", "")
    r = find(records, "mqtt-sustained-summary")
    if r and "baseline_events_per_s" in r and "mosquitto_pub_sub_messages_per_s" in r:
        add(f"MQTT sustained, {n(r.get('events'))}-event burst: events/s; lost; pairs coalesced (the bridge "
            "suspended); peak RSS (mqtt)",
            f"{n(r['events_per_s'])}; {r['lost']}; {r['coalesced_pairs']}; bridge peak RSS "
            f"{n(r.get('bridge_peak_rss_kib'))} KiB",
            f"minimal relay (same hops, no work) {n(r['baseline_events_per_s'])}; {r['relay_lost']}; "
            f"{r['relay_coalesced_pairs']}", ratio(r["ratio"]), "0 lost, 0 coalesced",
            met(r["lost"] == 0 and r["coalesced_pairs"] == 0))
        add("MQTT sustained against mosquitto_pub → sub (QoS 1, one message per line), counting messages (an event "
            "is two) / counting events (mqtt)",
            f"{n(2 * r['events_per_s'])} msg/s; {n(r['events_per_s'])} events/s",
            f"{n(r['mosquitto_pub_sub_messages_per_s'])} msg/s (relay: "
            f"{r['relay_ratio_to_mosquitto_pub_sub_counting_events'] * 2:.2f}× / "
            f"{r['relay_ratio_to_mosquitto_pub_sub_counting_events']:.2f}×)",
            f"{r['ratio_to_mosquitto_pub_sub_counting_messages']:.2f}× / "
            f"{r['ratio_to_mosquitto_pub_sub_counting_events']:.2f}×", "≥ 0.8×",
            met(r["ratio_to_mosquitto_pub_sub_counting_messages"] >= 0.8))
        add("MQTT sustained: CPU µs per event, bridge / accmond (mqtt)",
            f"{n(r['bridge_cpu_us_per_event'], 1)} / {n(r['accmond_cpu_us_per_event'], 1)}",
            f"minimal relay {n(r['relay_cpu_us_per_event'], 1)}",
            ratio(r["bridge_cpu_us_per_event"] / r["relay_cpu_us_per_event"]), "bridge ≤ 20 µs",
            met(r["bridge_cpu_us_per_event"] <= 20))
    elif r:
        add("MQTT sustained: events/s; lost; pairs coalesced; CPU µs per event, bridge / accmond (mqtt)",
            f"{n(r['events_per_s'])}; {r['lost']}; {r.get('coalesced_pairs', '–')}; "
            f"{n(r['bridge_cpu_us_per_event'])} / "
            f"{n(r['accmond_cpu_us_per_event'])}", f"mosquitto_pub → sub {n(r['baseline_events_per_s'])} msg/s",
            f"{r['events_per_s'] / r['baseline_events_per_s']:.2f}×", "", "")
    r = find(records, "mqtt-outage")
    if r:
        add(f"MQTT: bridge RSS through a {n(r['seconds'])} s broker outage, {n(r['events'])} events; restart → "
            "`accmon list --broker` equals the truth (mqtt)",
            f"{n(r['bridge_rss_kib_first'])} → max {n(r['bridge_rss_kib_max'])} KiB "
            f"({r['growth_after_first_sample_percent']:+.1f} %); {r['converged_seconds_after_restart']} s", "", "",
            "flat", met(r["flat"]))
    r = find(records, "dashboard-page-load-summary")
    if r:
        add(f"dashboard: page load with {n(r['rows'])} rows, navigation → every row drawn (dashboard)",
            f"{n(r['state_rendered_ms'])} ms", f"static HTML {n(r['baseline_static_ms'])} ms", ratio(r["ratio"]), "", "")
    r = find(records, "dashboard-latency-summary")
    if r:
        add("dashboard: plug → row in the page through accmond, the bridge, mosquitto, the reader, p50 / p99 (dashboard)",
            f"{n(r['p50_ms'], 1)} / {n(r['p99_ms'], 1)} ms",
            f"accmon watch --broker {n(r['baseline_p50_ms'], 1)} / {n(r['baseline_p99_ms'], 1)} ms",
            f"{ratio(r['ratio_p50'])} / {ratio(r['ratio_p99'])}", "", "")
    r = find(records, "dashboard-load-summary")
    if r:
        add(f"dashboard: {n(r['hosts'])} hosts, {n(r['rows'])} rows, {n(r['events_per_s'])} events/s: CPU s/s "
            "dashboard + reader; RSS KiB start → end (max) (dashboard)",
            f"{r['dashboard_cpu_per_s']:.3f} + {r['reader_cpu_per_s']:.3f}; {n(r['dashboard_rss_kib_start'])} → "
            f"{n(r['dashboard_rss_kib_end'])} ({n(r['dashboard_rss_kib_max'])})",
            f"reader alone {r['baseline_reader_cpu_per_s']:.3f}; {n(r['baseline_reader_rss_kib'])}",
            ratio(r["cpu_ratio"]), "", "")
    summaries = [x for x in records if x.get("bench") == "hostile-summary"]
    for r in summaries or (x for x in records if x.get("bench") == "hostile"):
        target = r.get("target_ratio_p99_control", "absent")
        if target == "absent":  # lines from before the control was the reference
            add(f"hostile `{r['phase']}`: healthy p50 / p99; RSS peak; CPU/s; log B/min; state B/event (hostile)",
                f"{n(r['p50_us'])} / {n(r['p99_us'])} µs; {n(r['rss_peak_kib'])} KiB; {r['cpu_per_second']:.2f}; "
                f"{n(r['log_bytes_per_minute'])}; {n(r['state_bytes_per_event'])}",
                "unattacked", f"{ratio(r.get('ratio_p50'))} / {ratio(r.get('ratio_p99'))}", "p99 ≤ 2×",
                met(r["meets_target"]))
            continue
        add(f"hostile `{r['phase']}`: healthy p50 / p99; RSS peak; CPU/s (hostile, median of {r.get('rounds', 1)})",
            f"{n(r['p50_us'])} / {n(r['p99_us'])} µs; {n(r['rss_peak_kib'])} KiB; {r['cpu_per_second']:.2f}",
            "cpu-hog control, same round", f"p99 {ratio(r.get('ratio_p99_control'))}",
            "" if target is None else f"p99 ≤ {target:g}×", met(r["meets_target"]))
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    print("| Measurement (suite) | accmon | baseline | ratio | target | met |")
    print("| --- | --- | --- | --- | --- | --- |")
    print("\n".join(rows(load(sys.argv[1]))))


if __name__ == "__main__":
    main()
