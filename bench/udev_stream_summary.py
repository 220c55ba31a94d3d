"""What bench/udev_stream.py's measurements add up to: percentiles of one run's latencies, and the summary lines,
one per measurement and receiver, with the medians over repeats, the ratios against udevadm monitor (measured in the
same phases) and against the relays, and whether each target is met. Apart from the script so that the figures and
targets are read in one place, away from the processes that produce them."""
import statistics


def percentile(values, fraction):
    ordered = sorted(values)
    if not ordered:
        return None
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def median_of(records, key):
    """The median of `key` over the repeats' records that have it (None when none has)."""
    values = [r[key] for r in records if r.get(key) is not None]
    return statistics.median(values) if values else None


def summary_records(summary):
    """The summary lines, from `summary`: {(bench, events, phase, receiver): [the repeats' records]}, where bench is
    "latency" or "burst" and phase the accmon receiver the phase measured (udevadm monitor ran beside it)."""
    for (bench, size, phase, name), records in summary.items():
        if name == "udevadm-monitor":
            continue
        base = summary[(bench, size, phase, "udevadm-monitor")]  # measured in the same phases
        record = {"bench": f"{bench}-summary", "tool": name, "baseline": "udevadm-monitor", "events": size,
                  "repeats": len(records)}
        if bench == "latency":
            for key in ("p50_us", "p95_us", "p99_us"):
                record[key] = median_of(records, key)
                record[f"baseline_{key}"] = median_of(base, key)
                record[f"ratio_{key[:3]}"] = round(record[key] / record[f"baseline_{key}"], 3)
            record["lost"] = sum(r["lost"] for r in records)
            # The add path against the remove path, in the same phase: the ratio of each repeat, then the median.
            record["p50_add_us"] = median_of(records, "p50_add_us")
            record["p50_remove_us"] = median_of(records, "p50_remove_us")
            record["ratio_add_remove"] = round(statistics.median(
                r["p50_add_us"] / r["p50_remove_us"] for r in records), 3)
            relay = summary.get((bench, size, "relay", "relay"))
            if relay and not name.startswith("relay"):  # the relay's own phases of the same repeats
                for key in ("p50_us", "p99_us"):
                    record[f"relay_{key}"] = median_of(relay, key)
                    record[f"relay_ratio_{key[:3]}"] = round(record[key] / record[f"relay_{key}"], 3)
                record["target_relay_ratio_p50"] = 1.2
                record["meets_target_relay"] = record["relay_ratio_p50"] <= 1.2
            hashing = summary.get((bench, size, "relay-descriptors", "relay-descriptors"))
            if hashing and not name.startswith("relay"):  # the add path's floor: its own add ÷ remove
                record["floor_ratio_add_remove"] = round(statistics.median(
                    r["p50_add_us"] / r["p50_remove_us"] for r in hashing), 3)
            if not name.startswith("relay"):
                record["target_ratio_add_remove"] = 1.1
                record["meets_target_add_remove"] = record["ratio_add_remove"] <= 1.1
            record["target_p50_ratio"], record["target_p99_ratio"] = 1.3, 1.5
            record["meets_target"] = record["ratio_p50"] <= 1.3 and record["ratio_p99"] <= 1.5
        else:
            record["events_per_s"] = median_of(records, "events_per_s")
            record["baseline_events_per_s"] = median_of(base, "events_per_s")
            record["ratio_rate"] = round(record["events_per_s"] / record["baseline_events_per_s"], 3)
            record["lost"] = sum(r["lost"] for r in records)
            record["coalesced_pairs"] = sum(r.get("coalesced_pairs", 0) for r in records)
            record["baseline_lost"] = sum(r["lost"] for r in base)
            record["cpu_us_per_event"] = median_of(records, "cpu_us_per_event")
            record["baseline_cpu_us_per_event"] = median_of(base, "cpu_us_per_event")
            record["meets_target"] = (record["ratio_rate"] >= 0.8 and record["lost"] == 0
                                      and record["cpu_us_per_event"] <= 25)
        yield record
