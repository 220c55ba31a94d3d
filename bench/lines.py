#!/usr/bin/python3
"""The bench's JSON lines: tag them with the build that made them, and compare two builds' lines side by side.

  lines.py tag --revision SHA [--build A] [--round N] [--suite S]
      a filter: each JSON line of stdin goes to stdout with the build's revision (and its label, the round and the
      suite when given) and the 1-minute load average when the line went by; other lines pass unchanged
  lines.py compare FILE... [--all] [--markdown]
      the medians over rounds of every figure of builds A and B, and B ÷ A; the speed guard's figures (issue 20)
      first, each with its verdict: within 10 % of A, or better, or worse by how much

A measurement is a bench name with its parameters (tool, subscribers, events...). Its figures are the numeric fields
of its `*-summary` line (each suite prints one per round, with the medians over that round's repeats); a
measurement without summary lines (instructions, hostile phases...) takes its plain lines. A figure's value for a build
is the median over the rounds, each round's value being the median of that round's lines.
"""
import argparse, json, re, statistics, sys
from collections import defaultdict

# Fields that name a measurement rather than measure it.
PARAMETERS = ("bench", "tool", "baseline", "events", "subscribers", "clients", "preserved_sessions", "alongside",
              "phase", "attack", "receiver", "interval_us", "burst", "devices", "storm_events", "accessories")
# Fields that are neither: bookkeeping, machine, targets.
IGNORED = {"repeat", "repeats", "cpus", "round", "load1", "date", "machine", "kernel", "build", "revision", "suite",
           "meets_target", "flat", "lost", "baseline_lost"}

# The speed guard of issue 20: (label, bench, parameters, figure). Each measurement's ratio B ÷ A must be within 10 %.
GUARD = [
    ("burst 5,000: events/s to accmon watch", "burst-summary", {"tool": "accmon-watch", "events": 5000},
     "events_per_s"),
    ("burst 5,000: CPU µs per event, accmond + watch", "burst-summary", {"tool": "accmon-watch", "events": 5000},
     "cpu_us_per_event"),
    ("burst 50,000: events/s to accmon watch", "burst-summary", {"tool": "accmon-watch", "events": 50000},
     "events_per_s"),
    ("burst 50,000: CPU µs per event, accmond + watch", "burst-summary", {"tool": "accmon-watch", "events": 50000},
     "cpu_us_per_event"),
    ("latency p50, accmon watch ÷ udevadm", "latency-summary", {"tool": "accmon-watch"}, "ratio_p50"),
    ("latency p99, accmon watch ÷ udevadm", "latency-summary", {"tool": "accmon-watch"}, "ratio_p99"),
    ("latency p50, accmon watch ÷ relay", "latency-summary", {"tool": "accmon-watch"}, "relay_ratio_p50"),
    ("latency p99, accmon watch ÷ relay", "latency-summary", {"tool": "accmon-watch"}, "relay_ratio_p99"),
    ("latency p50, accmon watch (µs)", "latency-summary", {"tool": "accmon-watch"}, "p50_us"),
    ("latency p99, accmon watch (µs)", "latency-summary", {"tool": "accmon-watch"}, "p99_us"),
    ("fan-out 10: deliveries/s", "fanout-summary", {"subscribers": 10}, "deliveries_per_s"),
    ("fan-out 10: ÷ minimal sender", "fanout-summary", {"subscribers": 10}, "ratio_deliveries"),
    ("fan-out 10: server CPU µs per event back to back", "fanout-summary", {"subscribers": 10},
     "server_cpu_us_per_burst_event"),
    ("fan-out 100: deliveries/s", "fanout-summary", {"subscribers": 100}, "deliveries_per_s"),
    ("fan-out 100: ÷ minimal sender", "fanout-summary", {"subscribers": 100}, "ratio_deliveries"),
    ("fan-out 100: server CPU µs per event back to back", "fanout-summary", {"subscribers": 100},
     "server_cpu_us_per_burst_event"),
    ("memory: KiB per idle subscribed client", "memory-summary", {}, "per_client_kib"),
    ("memory: KiB per preserved session", "memory-summary", {}, "per_preserved_session_kib"),
    ("memory: RSS idle (KiB)", "memory-summary", {}, "rss_idle_kib"),
]

HIGHER_IS_BETTER = re.compile(r"per_s|deliveries|ratio_rate|received")
LOWER_IS_BETTER = re.compile(r"_us|_kib|cpu|seconds|ratio_p|ratio_last|instructions|bytes|ratio$")


def tag(options):
    for line in sys.stdin:
        if not line.startswith("{"):
            sys.stdout.write(line)
            continue
        try:
            record = json.loads(line)
        except ValueError:
            sys.stdout.write(line)
            continue
        record["revision"] = options.revision
        if options.build:
            record["build"] = options.build
        if options.round is not None:
            record["round"] = options.round
        if options.suite:
            record["suite"] = options.suite
        with open("/proc/loadavg") as load:
            record["load1"] = float(load.read().split()[0])
        print(json.dumps(record), flush=True)


def is_figure(key, value):
    return (key not in IGNORED and key not in PARAMETERS and not key.startswith("target_")
            and isinstance(value, (int, float)) and not isinstance(value, bool))


def identity(record):
    return tuple((key, record[key]) for key in PARAMETERS if key in record)


def load(paths):
    records = []
    for path in paths:
        with open(path) as source:
            for line in source:
                if line.startswith("{"):
                    record = json.loads(line)
                    if record.get("build") in ("A", "B"):
                        records.append(record)
    return records


def figures_by_build(records):
    """{measurement: {figure: {build: [median of each round]}}}, and each build's revision."""
    summarized = {r["bench"][: -len("-summary")] for r in records if r["bench"].endswith("-summary")}
    values = defaultdict(lambda: defaultdict(lambda: defaultdict(lambda: defaultdict(list))))
    revisions = {}
    for record in records:
        if record["bench"] in summarized:
            continue  # the per-repeat lines of a measurement that has summaries
        revisions[record["build"]] = record.get("revision")
        for key, value in record.items():
            if is_figure(key, value):
                values[identity(record)][key][record["build"]][record.get("round")].append(value)
    result = {}
    for measurement, figures in values.items():
        result[measurement] = {figure: {build: [statistics.median(v) for v in rounds.values()]
                                        for build, rounds in builds.items()} for figure, builds in figures.items()}
    return result, revisions


def verdict(figure, ratio):
    if ratio is None:
        return ""
    if HIGHER_IS_BETTER.search(figure):
        worse = 1 / ratio if ratio else float("inf")
    elif LOWER_IS_BETTER.search(figure):
        worse = ratio
    else:
        return "?"
    if worse <= 1.0:
        return "better" if worse < 0.9 else "within 10 %"
    return "within 10 %" if worse <= 1.1 else f"worse by {round((worse - 1) * 100)} %"


def number(value):
    if value is None:
        return "–"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def row(label, builds, figure, markdown):
    a, b = builds.get("A", []), builds.get("B", [])
    median_a = statistics.median(a) if a else None
    median_b = statistics.median(b) if b else None
    ratio = median_b / median_a if median_a and median_b is not None else None
    cells = [label, f"{number(median_a)} ({len(a)})", f"{number(median_b)} ({len(b)})",
             f"{ratio:.3f}" if ratio is not None else "–", verdict(figure, ratio)]
    return "| " + " | ".join(cells) + " |" if markdown else "  ".join(f"{c:<{w}}" for c, w in
                                                                       zip(cells, (60, 18, 18, 8, 16)))


def matches(measurement, bench, parameters):
    fields = dict(measurement)
    return fields.get("bench") == bench and all(fields.get(k) == v for k, v in parameters.items())


def compare(options):
    records = load(options.files)
    if not records:
        raise SystemExit("lines.py compare: no lines tagged with a build A or B")
    table, revisions = figures_by_build(records)
    rounds = sorted({r.get("round") for r in records if r.get("round") is not None})
    loads = [r["load1"] for r in records if "load1" in r]
    header = ["measurement", f"A {revisions.get('A', '?')[:12]} (rounds)",
              f"B {revisions.get('B', '?')[:12]} (rounds)", "B ÷ A", "verdict"]
    print(f"{len(rounds)} rounds; 1-minute load average during the run: min {min(loads):.2f}, "
          f"median {statistics.median(loads):.2f}, max {max(loads):.2f}" if loads else "")
    print("| " + " | ".join(header) + " |\n|" + " --- |" * len(header) if options.markdown else "  ".join(header))
    for label, bench, parameters, figure in GUARD:
        for measurement, figures in table.items():
            if matches(measurement, bench, parameters) and figure in figures:
                print(row(label, figures[figure], figure, options.markdown))
    if options.all:
        print()
        for measurement, figures in sorted(table.items(), key=lambda item: str(item[0])):
            name = " ".join(f"{k}={v}" if k != "bench" else str(v) for k, v in measurement)
            for figure, builds in sorted(figures.items()):
                print(row(f"{name}: {figure}", builds, figure, options.markdown))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    tagger = commands.add_parser("tag")
    tagger.add_argument("--revision", required=True)
    tagger.add_argument("--build")
    tagger.add_argument("--round", type=int)
    tagger.add_argument("--suite")
    comparer = commands.add_parser("compare")
    comparer.add_argument("files", nargs="+")
    comparer.add_argument("--all", action="store_true", help="every figure, after the speed guard's")
    comparer.add_argument("--markdown", action="store_true")
    options = parser.parse_args()
    tag(options) if options.command == "tag" else compare(options)


if __name__ == "__main__":
    main()
