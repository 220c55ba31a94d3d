#!/usr/bin/python3
"""accmon-dashboard: plug to row visible in the browser, page load with 5,000 rows, the server's CPU and RSS under a
fleet's load.

Each repeat starts a fresh mosquitto on a free port and a fleet of --hosts hosts (default 50), each a release
`accmond --simulate --no-udev` and `accmon-mqtt` publishing it as bench-NN, with --accessories accessories plugged
on each (default 100: 5,000 rows); then the dashboard (the tree's clients/dashboard on Debian's python3 and aiohttp)
reading the fleet through the release `accmon`, and headless Chromium (chromedriver, python3-selenium).

- page-load: --loads fresh loads of the page: the time from navigation start to the page's `accmon:state-rendered`
  mark (every row in the table). Baseline: the same rows as one static HTML page with the same stylesheet, served by
  Python's http.server, to DOMContentLoaded (every row parsed).
- latency: --latency-events plugs, one every 100 ms on the hosts in turn, each unplugged 50 ms later: the time from
  sending the `simulate` request until the row is in the page's table (a MutationObserver in the page, on the
  browser's clock, performance.timeOrigin + now(), against the bench's time.time(): one machine, one clock).
  Baseline: the same plugs read by `accmon watch --broker URL --json` (the dashboard's reader alone).
- load: --seconds of --rate events/s (plugs and unplugs in pairs on random hosts) with the page open and following;
  the CPU (utime + stime, /proc) per second of the dashboard's Python process and of its reader (`accmon watch`), and
  their RSS every 5 s. Baseline, in the same repeat and under the same load: `accmon watch --broker URL --json` alone,
  its output to /dev/null.

Prints one JSON line per measurement and repeat, then a summary per measurement (medians).

Usage: dashboard.py BIN_DIR --source DASHBOARD_SRC [--repeats R] [--hosts H] [--accessories A] [--loads L]
                    [--latency-events N] [--seconds S] [--rate E]
"""
import argparse, json, os, random, subprocess, sys, tempfile, threading, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import accmond_arguments, emit, median, rss_kib, stop  # noqa: E402
from dashboard_rig import Browser, Fleet, cpu_seconds, percentiles  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("bin_dir")
parser.add_argument("--source", required=True, help="clients/dashboard/src of the tree to measure")
parser.add_argument("--repeats", type=int, default=3)
parser.add_argument("--hosts", type=int, default=50)
parser.add_argument("--accessories", type=int, default=100)
parser.add_argument("--loads", type=int, default=5)
parser.add_argument("--latency-events", type=int, default=200)
parser.add_argument("--seconds", type=float, default=60)
parser.add_argument("--rate", type=float, default=100)
options = parser.parse_args()
ACCMON = os.path.join(options.bin_dir, "accmon")


def start_dashboard(work, broker_url):
    config = os.path.join(work, "dashboard.json")
    with open(config, "w") as out:
        out.write("{}")
    log = open(os.path.join(work, "dashboard.log"), "w")
    environment = dict(os.environ, PYTHONPATH=options.source, PYTHONDONTWRITEBYTECODE="1")
    process = subprocess.Popen(["/usr/bin/python3", "-m", "accmon_dashboard", "--config", config, "--listen",
                                "127.0.0.1:0", "--broker", broker_url, "--accmon", ACCMON, "--log-level", "info",
                                "--events", "200"], stdout=log, stderr=log, env=environment)
    deadline = time.time() + 30
    while time.time() < deadline:
        with open(log.name) as text:
            for line in text:
                if " on http://" in line:
                    return process, "http://" + line.split(" on http://", 1)[1].split("/", 1)[0]
        if process.poll() is not None:
            break
        time.sleep(0.05)
    raise SystemExit(f"bench: the dashboard did not start: {open(log.name).read()}")


def dashboard_rows(url):
    import urllib.request
    with urllib.request.urlopen(url + "/api/state", timeout=30) as response:
        return json.loads(response.read())["rows"]


def wait_rows(url, count, timeout=300):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if len(dashboard_rows(url)) == count:
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"bench: the dashboard never showed {count} rows")


def reader_child(pid):
    """The dashboard's reader process (`accmon watch`)."""
    with open(f"/proc/{pid}/task/{pid}/children") as children:
        for child in children.read().split():
            with open(f"/proc/{child}/cmdline", "rb") as command:
                if b"watch" in command.read():
                    return int(child)
    return None


def page_load(browser, url, work, repeat):
    rows = dashboard_rows(url)
    static = browser.static_page(work, rows, url)
    timings, baseline = [], []
    for _ in range(options.loads):
        timings.append(browser.load_dashboard(url + "/", len(rows)))
        baseline.append(browser.load_static(static))
    record = {"bench": "dashboard-page-load", "tool": "chromium", "repeat": repeat, "rows": len(rows),
              "state_rendered_ms": median(timings), "samples_ms": timings,
              "baseline_static_ms": median(baseline), "baseline_samples_ms": baseline}
    record["ratio"] = round(record["state_rendered_ms"] / record["baseline_static_ms"], 2)
    emit(record)
    return record


def latency(fleet, browser, url, repeat):
    watch_out = []
    watcher = subprocess.Popen([ACCMON, "watch", "--broker", fleet.url, "--json"], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL)

    synced = threading.Event()

    def read():
        for line in watcher.stdout:
            arrived = time.time()
            if b'"type":"fleet"' in line:
                synced.set()
            if line.startswith(b'{"accessory"') and b'"type":"connect"' in line:
                message = json.loads(line)
                watch_out.append((message["host"], message["accessory"]["connectionID"], arrived))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    browser.get(url + "/")
    browser.wait_rows(fleet.count())
    # A plug made while the baseline reader still reads the fleet is in its first state, not a change it prints.
    if not synced.wait(120):
        raise SystemExit("bench: accmon watch --broker never printed the fleet")
    time.sleep(1)
    browser.observe_rows()
    sent = {}
    for index in range(options.latency_events):
        host = fleet.hosts[index % len(fleet.hosts)]
        started = time.time()
        connection = host.plug(f"L{repeat}-{index}")
        sent[(host.name, connection)] = started
        time.sleep(0.05)
        host.unplug(connection)
        time.sleep(0.05)
    time.sleep(2)
    seen = browser.observed_rows()
    stop(watcher)
    page = [seen[key] - started for key, started in sent.items() if key in seen]
    baseline = [arrived - sent[(host, connection)] for host, connection, arrived in watch_out
                if (host, connection) in sent]
    record = {"bench": "dashboard-latency", "tool": "chromium", "repeat": repeat, "events": len(sent),
              "seen": len(page), "baseline_seen": len(baseline), **percentiles(page, "ms"),
              **{f"baseline_{k}": v for k, v in percentiles(baseline, "ms").items()}}
    if record["p50_ms"] and record["baseline_p50_ms"]:
        record["ratio_p50"] = round(record["p50_ms"] / record["baseline_p50_ms"], 2)
        record["ratio_p99"] = round(record["p99_ms"] / record["baseline_p99_ms"], 2)
    emit(record)
    return record


def drive(fleet, seconds):
    """Plugs and unplugs in pairs on random hosts at --rate events/s for `seconds`; returns the events sent."""
    interval = 2 / options.rate
    sent = 0
    deadline = time.monotonic() + seconds
    next_at = time.monotonic()
    counter = 0
    while time.monotonic() < deadline:
        host = random.choice(fleet.hosts)
        counter += 1
        host.unplug(host.live.pop(random.randrange(len(host.live))))
        host.live.append(host.plug(f"D{counter}"))
        sent += 2
        next_at += interval
        delay = next_at - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    return sent


def sample(pids, samples, stop_event):
    while not stop_event.wait(5):
        samples.append({name: rss_kib(pid) for name, pid in pids.items()})


def load(fleet, browser, dashboard, url, repeat):
    reader = reader_child(dashboard.pid)
    browser.get(url + "/")
    browser.wait_rows(fleet.count())
    pids = {"dashboard": dashboard.pid, "reader": reader}
    before = {name: cpu_seconds(pid) for name, pid in pids.items()}
    rss_start = {name: rss_kib(pid) for name, pid in pids.items()}
    samples, done = [], threading.Event()
    sampler = threading.Thread(target=sample, args=(pids, samples, done), daemon=True)
    sampler.start()
    started = time.monotonic()
    sent = drive(fleet, options.seconds)
    elapsed = time.monotonic() - started
    done.set()
    after = {name: cpu_seconds(pid) for name, pid in pids.items()}
    rss_end = {name: rss_kib(pid) for name, pid in pids.items()}
    # The baseline: the reader alone under the same load.
    watcher = subprocess.Popen([ACCMON, "watch", "--broker", fleet.url, "--json"], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    time.sleep(3)
    base_before = cpu_seconds(watcher.pid)
    base_started = time.monotonic()
    base_sent = drive(fleet, options.seconds)
    base_elapsed = time.monotonic() - base_started
    base_cpu = (cpu_seconds(watcher.pid) - base_before) / base_elapsed
    base_rss = rss_kib(watcher.pid)
    stop(watcher)
    record = {"bench": "dashboard-load", "tool": "dashboard", "repeat": repeat, "hosts": len(fleet.hosts),
              "rows": fleet.count(), "events": sent, "events_per_s": round(sent / elapsed, 1),
              "dashboard_cpu_per_s": round((after["dashboard"] - before["dashboard"]) / elapsed, 4),
              "reader_cpu_per_s": round((after["reader"] - before["reader"]) / elapsed, 4),
              "dashboard_rss_kib_start": rss_start["dashboard"], "dashboard_rss_kib_end": rss_end["dashboard"],
              "dashboard_rss_kib_max": max([s["dashboard"] for s in samples] + [rss_end["dashboard"]]),
              "reader_rss_kib_end": rss_end["reader"],
              "baseline_events_per_s": round(base_sent / base_elapsed, 1),
              "baseline_reader_cpu_per_s": round(base_cpu, 4), "baseline_reader_rss_kib": base_rss}
    record["cpu_ratio"] = round((record["dashboard_cpu_per_s"] + record["reader_cpu_per_s"]) /
                                max(record["baseline_reader_cpu_per_s"], 1e-6), 2)
    emit(record)
    return record


def summary(name, records, keys):
    out = {"bench": f"{name}-summary", "repeats": len(records)}
    for key in keys:
        out[key] = median([r.get(key) for r in records])
    emit(out)


def main():
    page_records, latency_records, load_records = [], [], []
    for repeat in range(1, options.repeats + 1):
        with tempfile.TemporaryDirectory(prefix="accmon-bench-dashboard-") as work:
            fleet = Fleet(options.bin_dir, work, options.hosts, accmond_arguments)
            browser = None
            dashboard = None
            try:
                print(f"bench: dashboard repeat {repeat}: plugging {options.hosts} x {options.accessories}",
                      file=sys.stderr)
                fleet.populate(options.accessories)
                dashboard, url = start_dashboard(work, fleet.url)
                wait_rows(url, fleet.count())
                browser = Browser()
                page_records.append(page_load(browser, url, work, repeat))
                latency_records.append(latency(fleet, browser, url, repeat))
                load_records.append(load(fleet, browser, dashboard, url, repeat))
            finally:
                if browser is not None:
                    browser.quit()
                if dashboard is not None:
                    stop(dashboard)
                fleet.close()
    summary("dashboard-page-load", page_records, ["rows", "state_rendered_ms", "baseline_static_ms", "ratio"])
    summary("dashboard-latency", latency_records, ["events", "seen", "p50_ms", "p99_ms", "baseline_p50_ms",
                                                   "baseline_p99_ms", "ratio_p50", "ratio_p99"])
    summary("dashboard-load", load_records, ["hosts", "rows", "events_per_s", "dashboard_cpu_per_s",
                                             "reader_cpu_per_s", "dashboard_rss_kib_start", "dashboard_rss_kib_end",
                                             "dashboard_rss_kib_max", "reader_rss_kib_end",
                                             "baseline_reader_cpu_per_s", "baseline_reader_rss_kib", "cpu_ratio"])


main()
