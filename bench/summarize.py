#!/usr/bin/python3
"""The summary of one bench run, made from its raw JSON lines (build/bench/*.jsonl) for bench/results.

Usage: summarize.py RAW.jsonl [--output FILE | --results-dir DIR] [--revision REV]
       (default: bench/results/<the raw file's name, .json for .jsonl>)

A run's raw lines are one line per measurement and repeat, and a `*-summary` line per measurement with the medians
over the repeats (bench/README.md). The summary keeps their figures and drops their repetition:

- `run`: the date, the revisions (by build for two builds; from the raw file's name, <date>-<commit>[-<commit>]-...,
  or --revision, for lines of older runs that do not name theirs: `revisions_from` says so), the machine, the first
  and last line's time, the range of the 1-minute load, and the raw file's name, line count and SHA-256;
- `measurements`: one entry per measurement, that is the lines with the same bench name, parameters (tool, phase,
  subscribers, events, hosts...) and build, in the raw file's order, with the range of its lines' `load1`. A figure
  the same in all of them is given as it is; one that differs is `{"median": M, "values": [each line's, in order]}`,
  except for the per-repeat lines of a measurement that has summary lines: their summary lines hold the medians, so
  these give `{"median", "min", "max"}`, and a side-by-side run (bench/ab.sh: two builds, round after round) leaves
  them out, as bench/lines.py compare does. Nested objects are flattened (`bridge_session_at_end.queuedEvents`);
  lists of objects (the hostile suite's attackers' reports) are left out;
- `b_over_a`, for a run of two builds: for each measurement both builds have (its summary lines, or its plain lines
  when it has none), each figure's median for B ÷ A's.

Numbers keep 6 significant digits (the raw lines have no more that mean anything). Summarizing the same raw file
again gives the same bytes.
"""
import argparse
import hashlib
import json
import os
import re
import statistics
import sys
from collections import OrderedDict

# Fields that say which measurement a line is, beside the strings (bench, tool, phase...).
PARAMETERS = {"events", "subscribers", "clients", "preserved_sessions", "interval_us", "interval_ms", "burst",
              "devices", "storm_events", "accessories", "hosts", "accessories_per_host", "churn_per_s", "broker_queue",
              "history_entries", "entries", "latency_events", "burst_events", "reads", "rounds", "fd_limit", "run",
              "samples"}
# Bookkeeping: which repeat or round a line is (its place in `values`), and the run's circumstances (in `run`).
COUNTERS = {"repeat", "round"}
CIRCUMSTANCES = {"machine", "cpus", "kernel", "date", "load1", "revision", "suite"}
# Circumstances kept with each measurement too, as the range of its lines'.
RANGES = ("load1",)
LIST_LIMIT = 64


def significant(value):
    if isinstance(value, float):
        rounded = float(f"{value:.6g}")
        return int(rounded) if rounded.is_integer() and abs(rounded) >= 1e6 else rounded
    return value


def flatten(record, prefix=""):
    """(name, value) pairs of a line's fields, nested objects flattened with dotted names."""
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            yield from flatten(value, f"{name}.")
        elif isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
            continue  # reports of the run's helpers (the hostile suite's attackers), not its figures
        else:
            yield name, value


def is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_figure(name, value):
    """Numbers, lists of numbers, and verdicts (`meets_target`, `flat`): what a line measures."""
    if name in PARAMETERS or name in COUNTERS or name in CIRCUMSTANCES:
        return False
    if is_number(value) or isinstance(value, bool):
        return True
    return isinstance(value, list) and 0 < len(value) <= LIST_LIMIT and all(is_number(item) for item in value)


def identity(fields):
    """What names the measurement: every field that is not a figure, a counter or a circumstance; strings of nested
    objects and lists of strings (attackers' messages) only at the top level."""
    key = []
    for name, value in fields:
        if name in COUNTERS or name in CIRCUMSTANCES or is_figure(name, value):
            continue
        if "." in name and not is_number(value):
            continue
        if isinstance(value, list) and (len(value) > LIST_LIMIT or "." in name):
            continue
        key.append((name, tuple(value) if isinstance(value, list) else value))
    return tuple(key)


def median_of(values):
    numbers = [value for value in values if is_number(value)]
    return statistics.median(numbers) if len(numbers) == len(values) else None


def figure_entry(values, spread_only):
    if all(value == values[0] and type(value) is type(values[0]) for value in values):
        return [significant(v) for v in values[0]] if isinstance(values[0], list) else significant(values[0])
    median = median_of(values)
    entry = OrderedDict()
    if median is not None:
        entry["median"] = significant(median)
    if spread_only and median is not None and all(is_number(value) for value in values):
        entry["min"], entry["max"] = significant(min(values)), significant(max(values))
    else:
        entry["values"] = [[significant(x) for x in v] if isinstance(v, list) else significant(v) for v in values]
    return entry


def load(path):
    with open(path, "rb") as source:
        data = source.read()
    records = []
    for number, line in enumerate(data.decode("utf-8").splitlines(), 1):
        if not line.startswith("{"):
            continue
        try:
            records.append(json.loads(line, object_pairs_hook=OrderedDict))
        except ValueError as error:
            raise SystemExit(f"summarize.py: {path}:{number}: not a JSON line: {error}")
    if not records:
        raise SystemExit(f"summarize.py: {path}: no JSON lines")
    return data, records


def run_header(path, data, records, revision=None):
    dates = sorted(record["date"] for record in records if isinstance(record.get("date"), str))
    loads = [record["load1"] for record in records if is_number(record.get("load1"))]
    revisions = OrderedDict()
    for record in records:
        if record.get("revision"):
            revisions.setdefault(record.get("build", "-"), record["revision"])
    header_source = None
    if not revisions:
        # Lines of older runs do not name their revision; their file's name does (<date>-<commit>[-<commit>]-...).
        named = re.findall(r"(?<=-)[0-9a-f]{7,40}(?=-)", os.path.basename(path)[len("YYYY-MM-DD"):] + "-")
        builds = sorted({record.get("build") for record in records if record.get("build") in ("A", "B")})
        if revision:
            revisions["-"], header_source = revision, "--revision"
        elif builds == ["A", "B"] and len(named) >= 2:
            revisions["A"], revisions["B"], header_source = named[0], named[1], "the raw file's name"
        elif named:
            revisions["-"], header_source = named[0], "the raw file's name"
    header = OrderedDict()
    header["date"] = dates[0][:10] if dates else None
    header["revisions"] = revisions
    if header_source:
        header["revisions_from"] = header_source
    for field in ("machine", "cpus", "kernel"):
        seen = sorted({json.dumps(record[field]) for record in records if field in record})
        header[field] = json.loads(seen[0]) if len(seen) == 1 else [json.loads(value) for value in seen]
    header["first_line"] = dates[0] if dates else None
    header["last_line"] = dates[-1] if dates else None
    if loads:
        header["load1"] = OrderedDict(min=min(loads), median=significant(statistics.median(loads)), max=max(loads))
    header["raw"] = OrderedDict(file=os.path.basename(path), lines=len(records),
                                sha256=hashlib.sha256(data).hexdigest())
    return header


def measurements(records, side_by_side):
    summarized = {record["bench"][: -len("-summary")] for record in records
                  if str(record.get("bench", "")).endswith("-summary")}
    groups = OrderedDict()
    for record in records:
        fields = list(flatten(record))
        key = identity(fields)
        groups.setdefault(key, []).append(OrderedDict(fields))
    result = []
    for key, lines in groups.items():
        bench = dict(key).get("bench")
        if side_by_side and bench in summarized:
            continue  # a side-by-side run's figures are its summary lines' (as bench/lines.py compare takes them)
        spread_only = bench in summarized or (side_by_side and str(bench).endswith("-summary"))
        entry = OrderedDict((name, list(value) if isinstance(value, tuple) else value) for name, value in key)
        entry["lines"] = len(lines)
        names = []
        for line in lines:
            names.extend(name for name, value in line.items() if is_figure(name, value) and name not in names)
        for name in names:
            present = [line[name] for line in lines if name in line and is_figure(name, line[name])]
            entry[name] = figure_entry(present, spread_only)
        for name in RANGES:
            present = [line[name] for line in lines if is_number(line.get(name))]
            if present:
                entry[name] = present[0] if min(present) == max(present) else OrderedDict(min=min(present),
                                                                                           max=max(present))
        result.append(entry)
    return result


def b_over_a(entries):
    """B ÷ A of each figure's median, for the measurements both builds have."""
    def is_figure_field(key, value):
        return key not in PARAMETERS and key not in RANGES and key != "lines" and _is_figure_entry(value)

    summarized = {str(entry.get("bench"))[: -len("-summary")] for entry in entries
                  if str(entry.get("bench")).endswith("-summary")}
    by_build = {}
    for entry in entries:
        # As bench/lines.py compare: a measurement's summary lines, or its plain lines when it has none.
        if entry.get("build") in ("A", "B") and entry.get("bench") not in summarized:
            name = tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in entry.items()
                         if k not in ("build", "lines") + RANGES and not isinstance(v, (bool, dict))
                         and not is_figure_field(k, v))
            by_build.setdefault(name, {})[entry["build"]] = entry
    ratios = []
    for name, builds in by_build.items():
        if set(builds) != {"A", "B"}:
            continue
        ratio = OrderedDict((k, list(v) if isinstance(v, tuple) else v) for k, v in name)
        for figure, value in builds["A"].items():
            a, b = _median(value), _median(builds["B"].get(figure))
            same_count = is_number(value) and value == builds["B"].get(figure)
            if is_figure_field(figure, value) and a is not None and b is not None and a != 0 and not same_count:
                ratio[figure] = significant(b / a)
        ratios.append(ratio)
    return ratios


def _is_figure_entry(value):
    return is_number(value) or (isinstance(value, dict) and "median" in value)


def _median(value):
    if is_number(value):
        return value
    if isinstance(value, dict):
        return value.get("median")
    return None


def dumps(summary):
    """JSON with one measurement a line, so that a measurement and its figures are one line for grep."""
    def line(value):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))

    lines = ["{", f'  "run": {line(summary["run"])},']
    for section in ("measurements", "b_over_a"):
        if section not in summary:
            continue
        entries = summary[section]
        lines.append(f'  "{section}": [')
        lines.extend(f"    {line(entry)}{',' if index < len(entries) - 1 else ''}"
                     for index, entry in enumerate(entries))
        lines.append("  ],")
    lines[-1] = lines[-1].rstrip(",")
    lines.append("}")
    return "\n".join(lines) + "\n"


def summarize(path, revision=None):
    data, records = load(path)
    summary = OrderedDict()
    summary["run"] = run_header(path, data, records, revision)
    two_builds = {record.get("build") for record in records} >= {"A", "B"}
    # bench/ab.sh's runs: two builds, round after round (their per-repeat lines are left out, see measurements).
    side_by_side = two_builds and any(record.get("round") is not None for record in records if record.get("build"))
    summary["measurements"] = measurements(records, side_by_side)
    if two_builds:
        summary["b_over_a"] = b_over_a(summary["measurements"])
    return dumps(summary)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("raw", help="a run's raw JSON lines")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--output", help="the summary's path ('-': standard output)")
    where.add_argument("--results-dir", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))
    parser.add_argument("--revision", help="the revision measured, for lines and a file name that do not say it")
    options = parser.parse_args()
    text = summarize(options.raw, options.revision)
    name = os.path.basename(options.raw)
    output = options.output or os.path.join(options.results_dir, (name[: -len(".jsonl")] if name.endswith(".jsonl")
                                                                  else name) + ".json")
    if output == "-":
        sys.stdout.write(text)
        return
    with open(output + ".tmp", "w", encoding="utf-8") as target:
        target.write(text)
    os.replace(output + ".tmp", output)
    print(f"summarize.py: {output}: {len(text):,} bytes from {name}", file=sys.stderr)


if __name__ == "__main__":
    main()
