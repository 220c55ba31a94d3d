#!/usr/bin/python3
"""The fleet view at scale: `accmon list --broker` and the dashboard's reader against a synthetic fleet of N hosts with
M accessories each, published straight to a local mosquitto in the shape accmon-mqtt publishes (docs/MQTT.md §3).

One mosquitto on a free port (its default limits, or --mosquitto-setting lines added to its configuration);
tools/fleet_publish publishes every host's status, host index entry and M accessory objects (about 480 bytes each),
then keeps toggling accessories at --churn events/s (accessory topic, event line, status with its new count) for the
whole run. Each repeat measures, alternating which goes first:

- list-all: `accmon list --broker URL` (the table), wall time, peak RSS, CPU time (user + system, its own and
  mosquitto's meanwhile); next to tools/fleet_baseline, a plain subscriber that reads the same retained messages in the
  same windows and does nothing with them;
- list-one: `accmon list --broker URL --host lab-00042`, the same, next to fleet_baseline --host;
- first-load: `accmon watch --broker URL --json` until its first line (the whole fleet, what the dashboard loads)
  has arrived; its RSS then;
- reconnect: that watcher's connection taken over (mosquitto_pub with its client id, found in mosquitto's log), until
  it says on standard error that it is connected again, which it says once it has read the fleet again.
Then mosquitto's RSS (VmRSS after publishing, VmHWM at the end), and one more list-all under `strace -c` for the
mprotect calls it makes (what the heap padding of `list` saves: each step of a heap's growth is one).

Prints one JSON line per measurement and repeat, then a `scale-summary` line with the medians and the ratios to the
baseline.

Usage: scale.py BIN_DIR TOOLS_DIR [--repeats R] [--hosts N] [--accessories M] [--churn E] [--broker-queue L]
                                  [--mosquitto-setting LINE]...
"""
import argparse, json, os, re, subprocess, sys, tempfile, threading, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import free_port, emit, median, stop, wait_accepting  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("bin_dir")
parser.add_argument("tools_dir")
parser.add_argument("--repeats", type=int, default=3)
parser.add_argument("--hosts", type=int, default=500)
parser.add_argument("--accessories", type=int, default=100)
parser.add_argument("--churn", type=float, default=20, help="accessory toggles a second during the measurements")
parser.add_argument("--broker-queue", type=int, help="passed to accmon and the baseline (mosquitto's queue)")
parser.add_argument("--mosquitto-setting", action="append", default=[], help="a mosquitto.conf line, repeatable")
options = parser.parse_args()
ACCMON = os.path.join(options.bin_dir, "accmon")
ONE = "lab-00042" if options.hosts > 42 else "lab-00000"


def vm(pid, field):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return None


def cpu_seconds(pid):
    """User + system time of process `pid` so far (/proc/PID/stat, fields 14 and 15)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed(arguments, broker, stdout=subprocess.DEVNULL):
    """Runs a command; returns its figures (seconds, peak RSS KiB, its CPU seconds and mosquitto's meanwhile, exit
    status) and its stderr. The peak RSS and CPU are GNU time's (its child's wait4): a child forked from this script
    would count this script's RSS at the fork."""
    with tempfile.NamedTemporaryFile("r") as report:
        broker_cpu = cpu_seconds(broker.process.pid)
        started = time.monotonic()
        process = subprocess.run(["/usr/bin/time", "-q", "-f", "%M %U %S", "-o", report.name] + arguments,
                                 stdout=stdout, stderr=subprocess.PIPE)
        seconds = time.monotonic() - started
        broker_cpu = cpu_seconds(broker.process.pid) - broker_cpu
        rss, user, system = report.read().strip().splitlines()[-1].split()
    figures = {"seconds": round(seconds, 3), "rss_kib": int(rss), "cpu_s": round(float(user) + float(system), 2),
               "mosquitto_cpu_s": round(broker_cpu, 2), "exit": process.returncode}
    return figures, process.stderr.decode(errors="replace")


def mprotect_calls(arguments):
    """The mprotect calls of a command and its threads, counted by strace."""
    with tempfile.NamedTemporaryFile("r") as report:
        subprocess.run(["strace", "-f", "-c", "-e", "trace=mprotect", "-o", report.name] + arguments,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for line in report.read().splitlines():
            if line.split()[-1:] == ["mprotect"]:
                return int(line.split()[3])
    return 0


class Broker:
    def __init__(self, work):
        self.port = free_port()
        self.log = os.path.join(work, "mosquitto.log")
        config = os.path.join(work, "mosquitto.conf")
        with open(config, "w") as out:
            out.write(f"listener {self.port} 127.0.0.1\nallow_anonymous true\npersistence false\nuser root\n"
                      f"log_dest file {self.log}\nlog_type error\nlog_type warning\nlog_type notice\n"
                      "log_type information\n" + "".join(line + "\n" for line in options.mosquitto_setting))
        self.process = subprocess.Popen(["/usr/sbin/mosquitto", "-c", config], stderr=subprocess.DEVNULL)
        wait_accepting(self.port, "mosquitto")

    @property
    def url(self):
        return f"mqtt://127.0.0.1:{self.port}"

    def client_id(self, pid):
        """The client id of accmon process `pid`, from mosquitto's log of new connections (the last one)."""
        with open(self.log, errors="replace") as log:
            found = re.findall(rf" as (accmon-cli-{pid}-[0-9a-f]+) ", log.read())
        return found[-1] if found else None


def queue_options():
    return ["--broker-queue", str(options.broker_queue)] if options.broker_queue else []


def baseline(broker, host=None):
    arguments = [os.path.join(options.tools_dir, "fleet_baseline"), str(broker.port)] + queue_options()
    if host:
        arguments += ["--host", host]
    figures, errors = timed(arguments, broker)
    return figures


def list_arguments(broker, host=None):
    return [ACCMON, "list", "--broker", broker.url] + queue_options() + (["--host", host] if host else [])


def listing(broker, work, host=None):
    output = os.path.join(work, "list.out")
    with open(output, "w") as out:
        figures, errors = timed(list_arguments(broker, host), broker, stdout=out)
    with open(output) as result:
        rows = sum(1 for line in result) - 1
    return {**figures, "rows": rows, "warnings": errors.strip()[:300] or None}


def watcher(broker):
    """The dashboard's reader: time to its first line, its RSS then; then the time it takes to read the fleet again
    after its connection is taken over."""
    started = time.monotonic()
    process = subprocess.Popen([ACCMON, "watch", "--broker", broker.url, "--json"] + queue_options(),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lines = []
    stderr_reader = threading.Thread(
        target=lambda: [lines.append((time.monotonic(), line.decode(errors="replace"))) for line in process.stderr])
    stderr_reader.start()
    first_line_bytes = len(process.stdout.readline())
    first_load = time.monotonic() - started
    result = {"first_load_s": round(first_load, 3), "rss_kib": vm(process.pid, "VmRSS"),
              "first_line_bytes": first_line_bytes}
    threading.Thread(target=lambda: [None for _ in process.stdout], daemon=True).start()  # keep draining
    client = broker.client_id(process.pid)
    if client:
        taken = time.monotonic()
        subprocess.run(["/usr/bin/mosquitto_pub", "-p", str(broker.port), "-i", client, "-t", "bench/takeover",
                        "-m", "x"], capture_output=True, timeout=30)
        deadline = taken + 600
        while time.monotonic() < deadline:
            done = [when for when, line in lines if when >= taken and "connected to" in line]
            if done:
                result["reconnect_s"] = round(done[0] - taken, 3)
                break
            time.sleep(0.005)
    result["rss_after_reconnect_kib"] = vm(process.pid, "VmHWM")
    stop(process)
    stderr_reader.join(timeout=5)
    return result


def main():
    work = tempfile.mkdtemp(prefix="accmon-bench-scale-")
    broker = Broker(work)
    publisher = subprocess.Popen(
        [os.path.join(options.tools_dir, "fleet_publish"), str(broker.port), str(options.hosts),
         str(options.accessories), "--churn", str(options.churn)], stdout=subprocess.PIPE, text=True)
    published = json.loads(publisher.stdout.readline())
    mosquitto_rss = vm(broker.process.pid, "VmRSS")
    fleet = {"hosts": options.hosts, "accessories_per_host": options.accessories, "churn_per_s": options.churn,
             "broker_queue": options.broker_queue, "mosquitto_settings": options.mosquitto_setting or None}
    emit({"bench": "scale-publish", "tool": "fleet_publish", **fleet, **published, "mosquitto_rss_kib": mosquitto_rss})
    figures = {key: [] for key in ("list_all", "base_all", "list_one", "base_one", "first_load", "reconnect",
                                   "rss_all", "rss_one", "rss_watch", "cpu_all", "cpu_base_all", "broker_cpu_all",
                                   "broker_cpu_base_all")}
    try:
        for repeat in range(options.repeats):
            pairs = [("list-all", lambda: listing(broker, work), "baseline-all", lambda: baseline(broker)),
                     ("list-one", lambda: listing(broker, work, ONE), "baseline-one", lambda: baseline(broker, ONE))]
            for name, measure, base_name, base in pairs:
                order = [(name, measure), (base_name, base)]
                if repeat % 2:
                    order.reverse()
                for label, run in order:
                    result = run()
                    emit({"bench": "scale", "tool": label, "repeat": repeat, **fleet, **result})
                    key = {"list-all": "list_all", "baseline-all": "base_all", "list-one": "list_one",
                           "baseline-one": "base_one"}[label]
                    figures[key].append(result["seconds"])
                    if label == "list-all":
                        figures["rss_all"].append(result["rss_kib"])
                        figures["cpu_all"].append(result["cpu_s"])
                        figures["broker_cpu_all"].append(result["mosquitto_cpu_s"])
                    if label == "baseline-all":
                        figures["cpu_base_all"].append(result["cpu_s"])
                        figures["broker_cpu_base_all"].append(result["mosquitto_cpu_s"])
                    if label == "list-one":
                        figures["rss_one"].append(result["rss_kib"])
            watched = watcher(broker)
            emit({"bench": "scale", "tool": "watch-json", "repeat": repeat, **fleet, **watched})
            figures["first_load"].append(watched["first_load_s"])
            figures["reconnect"].append(watched.get("reconnect_s"))
            figures["rss_watch"].append(watched["rss_kib"])
        mprotects = mprotect_calls(list_arguments(broker))
    finally:
        stop(publisher)
        mosquitto_peak = vm(broker.process.pid, "VmHWM")
        stop(broker.process)
    m = {key: median(values) for key, values in figures.items()}
    ratio = lambda a, b: round(a / b, 2) if a and b else None
    shown = options.hosts * options.accessories
    emit({"bench": "scale-summary", "tool": "accmon", "baseline": "fleet_baseline", **fleet,
          "list_all_s": m["list_all"], "baseline_all_s": m["base_all"], "ratio_all": ratio(m["list_all"], m["base_all"]),
          "list_one_s": m["list_one"], "baseline_one_s": m["base_one"], "ratio_one": ratio(m["list_one"], m["base_one"]),
          "first_load_s": m["first_load"], "reconnect_s": m["reconnect"],
          "list_all_cpu_s": m["cpu_all"], "baseline_all_cpu_s": m["cpu_base_all"],
          "mosquitto_cpu_list_all_s": m["broker_cpu_all"], "mosquitto_cpu_baseline_all_s": m["broker_cpu_base_all"],
          "list_all_mprotect_calls": mprotects,
          "list_all_rss_kib": m["rss_all"], "list_one_rss_kib": m["rss_one"], "watch_rss_kib": m["rss_watch"],
          "rss_bytes_per_shown_accessory": round((m["rss_all"] - m["rss_one"]) * 1024 / shown) if shown else None,
          "mosquitto_rss_kib": mosquitto_rss, "mosquitto_peak_kib": mosquitto_peak,
          "meets_target": (m["list_one"] is not None and m["list_one"] <= 0.3 and m["list_all"] is not None
                           and m["list_all"] <= 3 and (ratio(m["list_all"], m["base_all"]) or 99) <= 2)
          if (options.hosts, options.accessories) == (500, 100) else None})


main()
