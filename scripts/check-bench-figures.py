#!/usr/bin/env python3
"""Checks that the bench figures the docs quote are in the run summaries of bench/results they cite.

Usage: check-bench-figures.py              (the docs: docs/*.md and bench/README.md)
       check-bench-figures.py --prune FILE...  (keeps in each summary only the figures the docs quote)
       check-bench-figures.py --explain    (each number checked, and where it was found or why it need not be)
       check-bench-figures.py --self-test  (feeds the check docs that break each rule; each must be refused)

Rules:
1. A doc cites a run by its summary's name, `results/<date>-<commit>-<what>.json` (a `*` matches several runs):
   every citation names summaries that exist.
2. In a section (a heading to the next) that cites runs, from the paragraph, list item or table of the first
   citation on, every number is a figure of those runs: a number of a cited summary in a field of the doc's unit (µs,
   ms, s; KiB, MiB, MB, KB; × for ratios, % for percentages or ratios; a field's unit is in its name: `p50_us`,
   `rss_kib`, `file_bytes`, `ratio_p50`), rounded as the doc rounds it. Unless bench/figures-not-in-results.tsv says
   what else it is: a target, a parameter of the method, a figure derived from the runs' (how), a reference, or a
   figure no run recorded. Numbers in code spans and blocks, dates, times of day and references (issue 30, §10,
   3 repeats) are not figures. A listed number the section no longer has is an error too.
3. Every summary in bench/results is cited by some doc (a run no doc quotes leaves: git keeps it), no raw lines are
   there (*.jsonl: they stay in build/bench, where `make bench` writes them), and all of it is under 300 KiB.
Prints one line per problem as `bench figures: FILE: section: problem` and exits 1 when there is any.
"""
import glob
import json
import os
import re
import sys
import tempfile
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

LIMIT_BYTES = 300 * 1024
EXCEPTIONS_FILE = os.path.join("bench", "figures-not-in-results.tsv")
KINDS = ("target", "parameter", "derived", "reference", "unrecorded")
CITATION = re.compile(r"results/(\d{4}-\d{2}-\d{2}-[A-Za-z0-9_.*-]+?)\.json\b")
UNITS = r"µs|ms|s|KiB|MiB|MB|KB|kB|GB|%|×"
NUMBER = re.compile(r"(?<![\w.,/+-])[+−-]?(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?"
                    rf"(?:\s?({UNITS})(?!\w))?(?![\w.]\d)")
# A number without a unit takes the unit of the number it is listed with ("80 / 55 / 106 MiB", "1.15–1.31×").
LISTED_WITH = re.compile(rf"(?:\s*(?:/|–|-|to|and|or)\s*[+−-]?\d[\d,]*(?:\.\d+)?)+\s?({UNITS})(?!\w)")
NOT_FIGURES = [
    re.compile(r"```.*?```", re.S),  # code blocks
    re.compile(r"`[^`\n]*`"),  # code spans: commands, options, commits, file names
    re.compile(r"\]\([^)]*\)"),  # link targets
    re.compile(r"\b\d{4}-\d{2}-\d{2}(T[\d:]+Z)?\b"),  # dates
    re.compile(r"\b\d{2}:\d{2}(?:–\d{2}:\d{2})?(?=\s+UTC)"),  # times of day
    re.compile(r"(?:[Ii]ssues?|[Ss]ections?|[Rr]ounds?|[Rr]uns?|[Rr]epeats?|[Ii]tem)\s\d+(?:(?:–|, | and )\d+)*"
               r"(?![\d.,]\d)"),  # issue 30, round 1, repeats 1 and 2
    re.compile(r"§\s?\d+(?:\.\d+)*"),
    re.compile(r"\b\d+(?:\.\d+)?(?:–\d+(?:\.\d+)?)?"
               r"(?=\s+(?:shared\s+)?(?:repeats|rounds|runs|CPUs|cores|vCPU|phases)\b)"),  # 3 repeats, 2 cores
    re.compile(r"\b\d+-core|\d+-vCPU|\bMQTT 5|\bSHA-256|\bmosquitto \d[\d.]*"),
    re.compile(r"\b\d[\d,]*\s×\s\d[\d,]*\b"),  # fleet sizes (hosts × accessories), the runs' parameters
]
# The unit of a summary's figure, from its name: µs, ms, s, KiB, bytes, a ratio or a percentage; None for counts and
# rates (`events_per_s`).
FIELD_UNITS = [(re.compile(r"per_s($|_)|per_second"), None), (re.compile(r"(^|_)us($|_)"), "µs"),
               (re.compile(r"(^|_)ms($|_)"), "ms"), (re.compile(r"(^|_)(s|seconds)($|_)"), "s"),
               (re.compile(r"kib"), "KiB"), (re.compile(r"bytes"), "B"), (re.compile(r"percent"), "%"),
               (re.compile(r"ratio|_over_"), "ratio")]
# For a doc's unit: the units of the fields its figure may be in, each with its factor to the doc's unit.
CONVERSIONS = {
    "µs": {"µs": 1, "ms": 1e3, "s": 1e6}, "ms": {"ms": 1, "µs": 1e-3, "s": 1e3}, "s": {"s": 1, "ms": 1e-3, "µs": 1e-6},
    "KiB": {"KiB": 1, "B": 1 / 1024}, "MiB": {"KiB": 1 / 1024, "B": 1 / 1024 ** 2},
    "GB": {"B": 1e-9, "KiB": 1024 / 1e9}, "MB": {"B": 1e-6, "KiB": 1024 / 1e6}, "KB": {"B": 1e-3, "KiB": 1.024},
    "kB": {"B": 1e-3, "KiB": 1.024}, "%": {"%": 1, "ratio": 100}, "×": {"ratio": 1},
}
# Counts of a summary's own making, not figures of the run.
BOOKKEEPING = {"lines", "repeats", "rounds", "cpus"}


def load_exceptions(root):
    """(doc, the section's heading from its start, the number as the doc writes it, "kind: why") of each number the
    file lists: one line a group of numbers, `doc<TAB>section<TAB>the numbers as written<TAB>kind<TAB>why`."""
    exceptions = []
    with open(os.path.join(root, EXCEPTIONS_FILE), encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip() or line.startswith("#"):
                continue
            fields = line.rstrip("\n").split("\t")
            if len(fields) != 5 or fields[3] not in KINDS or not fields[4].strip() or not NUMBER.search(fields[2]):
                raise SystemExit(f"{EXCEPTIONS_FILE}:{number}: expected doc, section, numbers, one of "
                                 f"{', '.join(KINDS)} and why, separated by tabs")
            doc, section, numbers, kind, why = fields
            exceptions.extend((doc, section, match.group(0).strip(), f"{kind}: {why}")
                              for match in NUMBER.finditer(numbers))
    return exceptions


def field_unit(name):
    return next((unit for pattern, unit in FIELD_UNITS if pattern.search(name)), None)


def numbers_of(value, found, path, unit=None):
    """Every figure of a summary, into `found`: {unit: {number: [where it is]}}. A figure's unit is its field's;
    `median`, `min`, `max` and `values` have their figure's, the claims suite's `p50` and `p99` that of its `figure`
    (`claim_to_command_us`), and every figure of `b_over_a` is a ratio."""
    if isinstance(value, bool):
        return
    if isinstance(value, (int, float)):
        found.setdefault(unit, {}).setdefault(float(value), []).append(path)
    elif isinstance(value, dict):
        names = ",".join(str(value[key]) for key in ("bench", "tool", "phase", "build", "figure")
                         if isinstance(value.get(key), str))
        here = f"{path}[{names}]" if names else path
        for key, item in value.items():
            if key in BOOKKEEPING:
                continue
            if key in ("median", "min", "max", "values"):
                key_unit = unit
            elif ".b_over_a" in path:
                key_unit = "ratio"
            elif key in ("p50", "p99") and "figure" in value:
                key_unit = field_unit(str(value["figure"]))
            else:
                key_unit = field_unit(key)
            numbers_of(item, found, f"{here}.{key}", key_unit)
    elif isinstance(value, list):
        for item in value:
            numbers_of(item, found, path, unit)


def pruned(value, hits, path="", unit=None):
    """`value` with only the figures a doc quotes (`hits`, from check): a summary's identifying strings and its
    bookkeeping stay, an unquoted number goes, and so does a dict or list left with no number; None when nothing is
    left. `run` (the summary's date, commits, machine, raw file) stays whole."""
    if isinstance(value, bool) or isinstance(value, str) or value is None:
        return value
    if isinstance(value, (int, float)):
        return value if (unit, float(value)) in hits else None
    if isinstance(value, list):
        items = [pruned(item, hits, path, unit) for item in value]
        if all(isinstance(item, (int, float)) and not isinstance(item, bool) for item in value):
            return value if any(item is not None for item in items) else None  # a series stays whole or goes
        kept = [item for item in items if item is not None]
        return kept or None
    kept, has_figure = {}, False
    for key, item in value.items():
        if key == "run" or key in BOOKKEEPING:
            kept[key] = item
            continue
        if key in ("median", "min", "max", "values"):
            key_unit = unit
        elif ".b_over_a" in path:
            key_unit = "ratio"
        elif key in ("p50", "p99") and "figure" in value:
            key_unit = field_unit(str(value["figure"]))
        else:
            key_unit = field_unit(key)
        result = pruned(item, hits, f"{path}.{key}", key_unit)
        if result is not None:
            kept[key] = result
            has_figure = has_figure or not isinstance(result, str)
    return kept if has_figure else None


def figure_of(text, unit, candidates, hits=None):
    """Where `text` (digits, maybe with thousands separators and decimals) is in `candidates`, converted to `unit`
    and rounded to the places `text` has; None when it is nowhere. The (field's unit, figure) found goes into `hits`."""
    try:
        target = abs(Decimal(text.replace(",", "")))
    except InvalidOperation:
        return None
    quantum = Decimal(1).scaleb(-(len(text.split(".")[1]) if "." in text else 0))
    # A number with a unit is a figure in that unit (or one that converts to it); one without, any figure as it is.
    units = CONVERSIONS[unit].items() if unit in CONVERSIONS else [(field, 1) for field in candidates]
    for field, factor in units:
        for candidate, places in candidates.get(field, {}).items():
            value = abs(candidate * factor)
            if value >= 1e15:
                continue
            # Rounded as people round (half up), or as Python's format rounds the binary value (the tools' tables).
            if Decimal(repr(value)).quantize(quantum, ROUND_HALF_UP) == target or \
                    Decimal(value).quantize(quantum) == target:
                if hits is not None:
                    hits.add((field, candidate))
                return places
    return None


def sections(text):
    """(heading, body) pairs; the text before the first heading is the section ""."""
    parts = re.split(r"(?m)^(#{1,6} .*)$", text)
    return [("", parts[0])] + [(parts[index].lstrip("#").strip(), parts[index + 1])
                                for index in range(1, len(parts), 2)]


def quoting_part(body):
    """What of a section quotes runs: from the paragraph, list item or table that first cites one to the section's
    end (a run's description, then its tables and the reading; what the section says before is about other things)."""
    match = CITATION.search(body)
    if not match:
        return ""
    starts = [0] + [block.end() for block in re.finditer(r"\n\s*\n|\n(?=- |\| )", body[: match.start()])]
    return body[starts[-1]:]


def figures(body):
    """(the number as written, its digits, its unit) of every number in `body` that may be a figure."""
    text = body
    for pattern in NOT_FIGURES:
        text = pattern.sub(lambda match: " " * len(match.group(0)), text)
    for match in NUMBER.finditer(text):
        whole, decimals, unit = match.groups()
        if unit is None:
            listed = LISTED_WITH.match(text, match.end())
            unit = listed.group(1) if listed else None
        yield match.group(0).strip(), whole + (f".{decimals}" if decimals else ""), unit


def check(docs, results_dir, exceptions, root, explain=None, hits=None):
    """The problems of `docs` (paths) against the summaries in `results_dir`; `explain(doc, heading, number, why,
    where)` is told about each number checked; `hits` gathers the (unit, figure) of every number a doc quotes."""
    problems = []
    cache = {}

    def numbers_in(path):
        if path not in cache:
            cache[path] = {}
            try:
                with open(path, encoding="utf-8") as handle:
                    numbers_of(json.load(handle), cache[path], os.path.basename(path))
            except ValueError as error:
                problems.append(f"{os.path.relpath(path, root)}: not JSON: {error}")
        return cache[path]

    cited, used = set(), set()
    for doc in docs:
        name = os.path.relpath(doc, root)
        with open(doc, encoding="utf-8") as handle:
            text = handle.read()
        for heading, section in sections(text):
            body = quoting_part(section)
            runs = []
            for citation in sorted(set(CITATION.findall(body))):
                matched = sorted(glob.glob(os.path.join(results_dir, citation + ".json")))
                if not matched:
                    problems.append(f"{name}: {heading}: cites results/{citation}.json, which is not there")
                runs.extend(matched)
            if not runs:
                continue
            cited.update(runs)
            candidates = {}
            for run in runs:
                for unit, numbers in numbers_in(run).items():
                    for number, places in numbers.items():
                        candidates.setdefault(unit, {}).setdefault(number, []).extend(places)
            allowed = {}
            for index, (doc_name, section_start, number, _) in enumerate(exceptions):
                if doc_name == name and heading.startswith(section_start):
                    allowed.setdefault(number, []).append(index)
            for written, digits, unit in figures(body):
                where = figure_of(digits, unit, candidates, hits)
                used.update(allowed.get(written, []))
                if explain:
                    why = [exceptions[index][3] for index in allowed.get(written, [])]
                    explain(name, heading, written, why[0] if why else None, (where or [])[:3])
                if where is None and written not in allowed:
                    problems.append(f"{name}: {heading}: {written} is in none of "
                                    + ", ".join(os.path.basename(run) for run in runs))
    for index, (doc_name, section_start, number, _) in enumerate(exceptions):
        if index not in used:
            problems.append(f"{doc_name}: {section_start}: {EXCEPTIONS_FILE} lists {number}, which the section does "
                            "not have")
    for summary in sorted(glob.glob(os.path.join(results_dir, "*.json"))):
        if summary not in cited:
            problems.append(f"{os.path.relpath(summary, root)}: no doc cites it (remove it: git keeps it)")
    for raw in sorted(glob.glob(os.path.join(results_dir, "*.jsonl"))):
        problems.append(f"{os.path.relpath(raw, root)}: raw lines belong in build/bench (bench/summarize.py makes "
                        "the summary)")
    total = sum(os.path.getsize(path) for path in glob.glob(os.path.join(results_dir, "*")))
    if total >= LIMIT_BYTES:
        problems.append(f"{os.path.relpath(results_dir, root)}: {total:,} bytes, not under {LIMIT_BYTES:,}")
    return problems


def self_test():
    """A sound doc passes; each broken one is refused with the expected problem."""
    run = "2026-12-01-abc1234-bench.json"
    summary = {"run": {"date": "2026-12-01", "cpus": 2}, "measurements": [
        {"bench": "latency-summary", "lines": 3, "p50_us": 259.04, "p99_us": {"median": 970.8, "values": [950, 970.8]},
         "ratio_p50": 1.917, "rss_kib": 17230, "list_all_s": 0.9912, "file_bytes": 5812345, "events_per_s": 24980}],
        "b_over_a": [{"bench": "latency-summary", "p50_us": 1.0845}]}
    sound = ("# Bench\n\nMethod: 2,000 events (`--events 2000`), issue 30.\n\n## A run\n\nBefore, 77 of them.\n\n"
             f"`results/{run}`, 2026-12-01 20:23 UTC, 3 repeats, B ÷ A 1.08:\n\n"
             "| p50 / p99 | 259 / 971 µs (950) | 1.92× |\n| RSS | 17,230 KiB, 16.8 MiB | list 0.99 s; 991 ms |\n"
             "history.jsonl: 5.8 MB; 24,980 events/s. The target, 1.10×, is not met.\n")
    target = [("doc.md", "A run", "1.10×", "target: the target")]

    def case(title, text, files, expected, exceptions=target):
        return title, text, files, expected, exceptions

    cases = [
        case("sound", sound, {run: summary}, None),
        case("a figure no run has", sound.replace("971 µs", "972 µs"), {run: summary}, "972 µs is in none of"),
        case("a figure in another unit than its field's", sound.replace("991 ms", "991 µs"), {run: summary},
             "991 µs is in none of"),
        case("MiB taken for MB", sound.replace("16.8 MiB", "16.8 MB"), {run: summary}, "16.8 MB is in none of"),
        case("a count taken for a figure", sound.replace("events/s.", "events/s, 3 lines."), {run: summary},
             "3 is in none of"),
        case("a target not listed", sound, {run: summary}, "1.10× is in none of", exceptions=[]),
        case("a listed number the section no longer has", sound.replace("1.10×", "1.2× relay"), {run: summary},
             "lists 1.10×, which the section does not have", exceptions=target + [("doc.md", "A run", "1.2×", "")]),
        case("a cited run that is not there", sound, {"2026-12-01-abc1235-bench.json": summary}, "which is not there"),
        case("a run no doc cites", sound, {run: summary, "2026-12-02-def5678-bench.json": summary}, "no doc cites it"),
        case("raw lines in bench/results", sound, {run: summary, "2026-12-01-abc1234-bench.jsonl": summary},
             "raw lines belong in build/bench"),
        case("more than 300 KiB", sound, {run: dict(summary, pad="x" * LIMIT_BYTES)}, "not under"),
    ]
    failures = 0
    for title, doc_text, files, expected, exceptions in cases:
        with tempfile.TemporaryDirectory() as scratch:
            results = os.path.join(scratch, "results")
            os.mkdir(results)
            for file_name, content in files.items():
                with open(os.path.join(results, file_name), "w", encoding="utf-8") as handle:
                    json.dump(content, handle)
            doc = os.path.join(scratch, "doc.md")
            with open(doc, "w", encoding="utf-8") as handle:
                handle.write(doc_text)
            problems = check([doc], results, exceptions, scratch)
        ok = (not problems) if expected is None else any(expected in problem for problem in problems)
        print(f"{'PASS' if ok else 'FAIL'}: {title}" + ("" if ok else f": got {problems}"))
        failures += not ok
    hits = set()
    with tempfile.TemporaryDirectory() as scratch:
        os.mkdir(os.path.join(scratch, "results"))
        with open(os.path.join(scratch, "results", run), "w", encoding="utf-8") as handle:
            json.dump(dict(summary, measurements=[dict(summary["measurements"][0], p95_us=612.5)]), handle)
        with open(os.path.join(scratch, "doc.md"), "w", encoding="utf-8") as handle:
            handle.write(sound)
        check([os.path.join(scratch, "doc.md")], os.path.join(scratch, "results"), target, scratch, hits=hits)
    kept = pruned(dict(summary, measurements=[dict(summary["measurements"][0], p95_us=612.5)]), hits)
    ok = kept == summary
    print(f"{'PASS' if ok else 'FAIL'}: pruning keeps the quoted figures and the run, and drops an unquoted one"
          + ("" if ok else f": got {kept}"))
    return 1 if failures or not ok else 0


def prune(summaries, docs, root):
    """Rewrites each summary with only the figures the docs quote (`pruned`), then checks that the docs still pass."""
    hits = set()
    problems = [problem for problem in check(docs, os.path.join(root, "bench", "results"), load_exceptions(root),
                                             root, hits=hits) if not problem.endswith(f"not under {LIMIT_BYTES:,}")]
    if problems:
        print("bench figures: fix these before pruning:", *problems, sep="\n  ")
        return 1
    for summary in summaries:
        with open(summary, encoding="utf-8") as handle:
            content = json.load(handle)
        before = os.path.getsize(summary)
        with open(summary, "w", encoding="utf-8") as handle:
            json.dump(pruned(content, hits) or {}, handle, ensure_ascii=False, separators=(",", ":"))
            handle.write("\n")
        print(f"{os.path.relpath(summary, root)}: {before:,} -> {os.path.getsize(summary):,} bytes")
    problems = check(docs, os.path.join(root, "bench", "results"), load_exceptions(root), root)
    for problem in problems:
        print(f"bench figures: {problem}")
    return 1 if problems else 0


def explain_line(doc, heading, written, why, where):
    print(f"{doc}: {heading[:60]}: {written}: " + (why or "; ".join(where) or "NOT FOUND"))


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    docs = sorted(glob.glob(os.path.join(root, "docs", "*.md"))) + [os.path.join(root, "bench", "README.md")]
    if sys.argv[1:2] == ["--prune"]:
        return prune(sys.argv[2:], docs, root)
    explain = explain_line if sys.argv[1:] == ["--explain"] else None
    problems = check(docs, os.path.join(root, "bench", "results"), load_exceptions(root), root, explain)
    if explain:
        return 0
    for problem in problems:
        print(f"bench figures: {problem}")
    if not problems:
        count = len(glob.glob(os.path.join(root, "bench", "results", "*.json")))
        print(f"bench figures: the figures the docs quote are in the summaries of the {count} runs in bench/results")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
