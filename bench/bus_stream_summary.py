"""What bench/bus_stream.py's measurements add up to: the receivers and their brokers, each phase's latency record,
and the summary lines, one per measurement and receiver, with the medians over repeats, the ratios to udevadm monitor
(`baseline_*`, measured in the same phases) and to the bus floor with the same client, and whether each target is
met. Apart from
the script so that the figures and targets are read in one place, away from the processes that produce them."""
import statistics

from udev_stream_summary import median_of, percentile

# The latency phases, in order (bus_stream.py puts the floor first in odd repeats).
LATENCY_ORDER = ["bus-sdbus", "floor-sdbus", "bus-glib", "floor-glib", "bus-sdbus-subscription",
                 "floor-sdbus-subscription", "floor-full-sdbus", "accmon-watch", "relay"]
BURST_RECEIVERS = ["bus-sdbus-subscription", "floor-sdbus-subscription", "bus-sdbus", "floor-sdbus"]
# Whose events each receiver gets (which process the sender feeds, whose CPU is the broker's).
BROKER_OF = {"bus-sdbus": "accmond", "bus-glib": "accmond", "bus-sdbus-subscription": "accmond",
             "accmon-watch": "accmond", "floor-sdbus": "floor", "floor-glib": "floor",
             "floor-sdbus-subscription": "floor", "floor-full-sdbus": "floor-full", "relay": "relay"}
# Each receiver's floor: the same client, the same hops, against the minimal broker.
FLOOR_OF = {"bus-sdbus": "floor-sdbus", "bus-glib": "floor-glib", "bus-sdbus-subscription": "floor-sdbus-subscription",
            "floor-full-sdbus": "floor-sdbus", "accmon-watch": "relay"}
# Targets of issue 39: accmond's p50 within 1.5× of the bus floor's with the same client, nothing lost.
TARGET_FLOOR_RATIO_P50 = 1.5


def latency_record(tool, phase, repeat, events, interval_us, sent, received, listener, cpu):
    """One receiver's latencies in one phase: {index: receive time} against the send times to its listener."""
    latencies = [(t - sent[i][listener]) / 1000 for i, t in received.items()]
    record = {"bench": "bus-latency", "tool": tool, "repeat": repeat, "events": events, "interval_us": interval_us,
              "lost": events - len(latencies)}
    for name, fraction in (("p50_us", 0.50), ("p99_us", 0.99)):
        value = percentile(latencies, fraction)
        record[name] = round(value, 1) if value is not None else None
    if tool == "udevadm-monitor":
        record["alongside"] = phase
        return record
    for key in ("broker", "dbus_daemon", "client"):
        record[f"cpu_us_per_event_{key}"] = round(cpu[key] / 1000 / events, 1)
    # How often the broker's threads were scheduled in per event: its wake-ups (a thread handing an event to another
    # costs one more).
    record["runs_per_event_broker"] = round(cpu["broker_runs"] / events, 2)
    return record


def _ratio(a, b):
    return round(a / b, 3) if a is not None and b else None


def summary_records(summary):
    """The summary lines, from `summary`: {(bench, events, phase, receiver): [the repeats' records]}, where bench is
    "latency" or "burst" and phase the receiver the phase measured (udevadm monitor ran beside it)."""
    own = {(bench, size, name): records for (bench, size, phase, name), records in summary.items() if phase == name}
    for (bench, size, phase, name), records in summary.items():
        if name == "udevadm-monitor":
            continue
        base = summary[(bench, size, phase, "udevadm-monitor")]
        floor_name = FLOOR_OF.get(name)
        floor = own.get((bench, size, floor_name)) if floor_name else None
        record = {"bench": f"bus-{bench}-summary", "tool": name, "events": size, "repeats": len(records),
                  "lost": sum(r["lost"] for r in records)}
        cpu_keys = ("cpu_us_per_event_broker", "cpu_us_per_event_dbus_daemon", "cpu_us_per_event_client")
        if bench == "latency":
            record["p50_us"], record["p99_us"] = median_of(records, "p50_us"), median_of(records, "p99_us")
            record["baseline_p50_us"] = median_of(base, "p50_us")
            record["ratio_p50"] = _ratio(record["p50_us"], record["baseline_p50_us"])
            if floor:  # the floor's own summary line has its figures
                record["floor"] = floor_name
                for key in ("p50_us", "p99_us"):
                    record[f"floor_ratio_{key[:3]}"] = _ratio(record[key], median_of(floor, key))
                # The phases of one repeat ran one after the other: each repeat's ratio, then their median.
                paired = [r["p50_us"] / f["p50_us"] for r, f in zip(records, floor) if r["p50_us"] and f["p50_us"]]
                if paired:
                    record["floor_ratio_p50_paired"] = round(statistics.median(paired), 3)
            if name == "bus-sdbus" and own.get((bench, size, "floor-full-sdbus")):
                # The floor with accmond's message sizes: what the properties alone cost the hops.
                record["full_floor_ratio_p50"] = _ratio(record["p50_us"],
                                                        median_of(own[(bench, size, "floor-full-sdbus")], "p50_us"))
        else:
            record["events_per_s"] = median_of(records, "events_per_s")
            record["baseline_events_per_s"] = median_of(base, "events_per_s")
            record["ratio_rate"] = _ratio(record["events_per_s"], record["baseline_events_per_s"])
            record["coalesced_pairs"] = sum(r.get("coalesced_pairs", 0) for r in records)
            record["suspended"] = sum(r.get("subscriber_suspended", 0) for r in records)
            if floor:
                record["floor"] = floor_name
                record["floor_ratio_rate"] = _ratio(record["events_per_s"], median_of(floor, "events_per_s"))
        if bench == "latency":
            record["runs_per_event_broker"] = median_of(records, "runs_per_event_broker")
        for key in cpu_keys:
            record[key] = median_of(records, key)
            if floor and BROKER_OF.get(name) == "accmond":
                ratio = _ratio(record[key], median_of(floor, key))
                if ratio is not None:
                    record[f"floor_ratio_cpu_{key[len('cpu_us_per_event_'):]}"] = ratio
        if BROKER_OF.get(name) == "accmond" and name != "accmon-watch":
            if bench == "latency":
                record["target_floor_ratio_p50"] = TARGET_FLOOR_RATIO_P50
                record["meets_target"] = (record.get("floor_ratio_p50") is not None
                                          and record["floor_ratio_p50"] <= TARGET_FLOOR_RATIO_P50
                                          and record["lost"] == 0)
            else:
                record["meets_target"] = record["lost"] == 0
        yield record
