#!/usr/bin/python3
"""A healthy client's latency while another user attacks accmond (issue 21), next to its latency unattacked.

Each phase has a fresh release `accmond --simulate --no-udev --max-output-bytes 8 MiB` (the soak's budget) with a
state directory holding 16 of root's preserved sessions (restore ids of 200 bytes) and 10 connected accessories, so
that the state file is not trivial (about 200 KB: each preserved session keeps the accessories it knew). Root's
healthy subscriber (a raw socket: hello with a restore id, subscribe, `ack` every 64 events) and root's plugger
connect; after a second of warm-up events the attack starts, as `nobody` through setpriv(1)
(Tests/tools/hostile_client.py), and for --attack-seconds the plugger toggles accessories with `simulate` requests, one
every --interval-ms. Latency: from just before the request is written until the subscriber's read returns the event.

Phases (the attack, repeated until the phase ends unless it holds its connections):
  unattacked  none
  cpu-hog     a control, not an attack on accmond: two busy loops as nobody, what any local user can do to the
              healthy client's latency on this machine without touching accmond
  status      `status 3000`: connections up to the user's limit and past it, each asking status
  pipeline    `pipeline 60 20000 status --hold`: 60 connections that write status requests and never read
  fairness    `fairness 50000`: one connection floods list requests and reads the replies
  restore     `restore` with 100 new restore ids of 250 bytes per run: sessions preserved and evicted
  churn       `churn`: connections opened and closed as fast as it can
  fd-limit    accmond under `prlimit --nofile=FD` and `--max-connections-per-user 1024`, so that one user can reach
              the descriptor limit: `open 400 --hold` (more connections than descriptors), then `churn` beside it
  all         as fd-limit: `all` (every misbehaviour at once) by nobody, and `open 300 --hold` by the user daemon
Per phase and round, one JSON line: the healthy client's p50/p95/p99/max, the ratios of p50 and p99 to the
unattacked phase's and of p99 to the cpu-hog control's of the same round (target: at most 2x the control, 4x for
"all"), events lost (not received within 10 s) and out of order; accmond's peak RSS (VmHWM),
its CPU per second, the bytes per minute it logged (stderr, info level), the state directory's bytes written per
event (/proc/PID/io write_bytes; all of the daemon's writes to storage are its state files), the state file's size
and the rewrites seen (its inode sampled every 10 ms); and what the attackers reported.

Attackers that run for a time are given the phase's length less a second, so that they report before it ends.
A build whose accmond lacks the limits of issue 21 runs only the unattacked and cpu-hog phases. Each round runs
every phase once, in order; then one `hostile-summary` line per phase gives the medians over the rounds.

Usage: hostile.py BIN_DIR [--attack-seconds 20] [--interval-ms 5] [--phases unattacked,status,...] [--fd-limit 256]
                  [--rounds 3]
"""
import argparse, json, os, shutil, signal, socket, subprocess, sys, tempfile, threading, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import accmond_arguments, accmond_help, emit, median, percentile, stop, wait_for_socket  # noqa: E402

PHASES = ["unattacked", "cpu-hog", "status", "pipeline", "fairness", "restore", "churn", "fd-limit", "all"]
# Phases that need the limits of issue 21 (an older accmond has no answer to them, and lacks the flags).
NEEDS_LIMITS = {"status", "pipeline", "fairness", "restore", "churn", "fd-limit", "all"}
NOBODY = ["--reuid=65534", "--regid=65534", "--clear-groups"]
DAEMON_USER = ["--reuid=1", "--regid=1", "--clear-groups"]

parser = argparse.ArgumentParser()
parser.add_argument("bin_dir")
parser.add_argument("--attack-seconds", type=float, default=20)
parser.add_argument("--interval-ms", type=float, default=5)
parser.add_argument("--phases", default=",".join(PHASES))
parser.add_argument("--fd-limit", type=int, default=256)
parser.add_argument("--output-budget", type=int, default=8 << 20)
parser.add_argument("--preserved", type=int, default=16, help="root's preserved sessions made before each phase")
parser.add_argument("--present", type=int, default=10, help="accessories connected before each phase")
parser.add_argument("--client-script", default=os.path.join(os.path.dirname(HERE), "Tests", "tools",
                                                            "hostile_client.py"))
parser.add_argument("--rounds", type=int, default=3, help="every phase once per round; summaries are medians")
parser.add_argument("--keep", action="store_true", help="keep each phase's work directory (accmond's log)")
options = parser.parse_args()


class Connection:
    """A raw client socket with a line reader."""

    def __init__(self, path):
        self.socket = socket.socket(socket.AF_UNIX)
        self.socket.connect(path)
        self.buffer = b""

    def send(self, request):
        self.socket.sendall((json.dumps(request) + "\n").encode())

    def read(self, timeout=10.0):
        self.socket.settimeout(timeout)
        while b"\n" not in self.buffer:
            try:
                chunk = self.socket.recv(65536)
            except (socket.timeout, OSError):
                return None
            if not chunk:
                return None
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return json.loads(line)

    def ask(self, request):
        self.send(request)
        while (reply := self.read()) is not None and reply.get("id") != request.get("id"):
            pass
        return reply

    def close(self):
        self.socket.close()


def proc_fields(pid, name):
    try:
        with open(f"/proc/{pid}/{name}") as source:
            return source.read()
    except OSError:
        return ""


class Daemon:
    def __init__(self, work, fd_limit=None):
        self.work, self.path = work, os.path.join(work, "accmon.sock")
        self.state = os.path.join(work, "state", "state.json")
        self.log_path = os.path.join(work, "accmond.log")
        extra, prefix = (["--max-output-bytes", str(options.output_budget)] if LIMITS else []), []
        if fd_limit:
            extra += ["--max-connections-per-user", "1024"]
            prefix = ["prlimit", f"--nofile={fd_limit}:{fd_limit}"]
        os.chmod(work, 0o755)
        self.process = subprocess.Popen(
            prefix + [os.path.join(options.bin_dir, "accmond"), "--socket", self.path, "--simulate", "--no-udev"]
            + extra + accmond_arguments(options.bin_dir, work), stderr=open(self.log_path, "wb"))
        wait_for_socket(self.path)
        os.chmod(self.path, 0o666)

    def cpu_seconds(self):
        fields = proc_fields(self.process.pid, "stat").rsplit(")", 1)[-1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK") if len(fields) > 12 else 0.0

    def status_kib(self, key):
        for line in proc_fields(self.process.pid, "status").splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
        return 0

    def write_bytes(self):
        for line in proc_fields(self.process.pid, "io").splitlines():
            if line.startswith("write_bytes:"):
                return int(line.split()[1])
        return 0

    def log_bytes(self):
        return os.path.getsize(self.log_path)


class StateWatcher(threading.Thread):
    """Counts the state file's rewrites (it is replaced atomically: a new inode each time) and their bytes."""

    def __init__(self, path):
        super().__init__(daemon=True)
        self.path, self.rewrites, self.bytes, self.size, self.done = path, 0, 0, 0, threading.Event()

    def run(self):
        last = None
        while not self.done.wait(0.01):
            try:
                info = os.stat(self.path)
            except OSError:
                continue
            if last is not None and info.st_ino != last:
                self.rewrites += 1
                self.bytes += info.st_size
            last, self.size = info.st_ino, info.st_size


class Attack:
    """Attackers (hostile_client.py as another user), each run again until the phase ends, or held to its end."""

    def __init__(self, attackers):
        self.attackers = attackers
        self.stopping, self.processes, self.results, self.threads = threading.Event(), [], [], []
        self.lock = threading.Lock()

    def spawn(self, user, arguments):
        with self.lock:
            if self.stopping.is_set():
                return None
            process = subprocess.Popen(
                ["setpriv", *user, "/usr/bin/python3", *arguments],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True)
            self.processes.append(process)
            return process

    def run_attacker(self, user, make_arguments, hold):
        run = 0
        while not self.stopping.is_set():
            run += 1
            process = self.spawn(user, make_arguments(run))
            if process is None:
                return
            line = process.stdout.readline()  # its result: printed when done, or once its connections are held
            if line.startswith("{"):
                self.results.append(json.loads(line))
            if hold:
                self.stopping.wait()
                return
            process.wait()

    def start(self):
        for user, make_arguments, hold in self.attackers:
            thread = threading.Thread(target=self.run_attacker, args=(user, make_arguments, hold), daemon=True)
            thread.start()
            self.threads.append(thread)

    def stop(self):
        with self.lock:
            self.stopping.set()
        for process in self.processes:
            if process.poll() is None:
                try:
                    os.killpg(process.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for process in self.processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        for thread in self.threads:
            thread.join(10)


def attackers_of(phase, seconds, script, socket_path):
    """[(setpriv's user options, run number -> python3's arguments, holds its connections)] of a phase."""
    once = lambda *arguments: (lambda run: [script, socket_path, *arguments])  # noqa: E731
    seconds = max(1.0, seconds - 1)
    hog = (NOBODY, lambda run: ["-c", "while True: pass"], True)
    restore_ids = lambda run: [script, socket_path, "restore"] + [  # noqa: E731
        f"r{run}-{i}-".ljust(250, "x") for i in range(100)]
    return {
        "unattacked": [],
        "cpu-hog": [hog, hog],
        "status": [(NOBODY, once("status", "3000"), False)],
        "pipeline": [(NOBODY, once("pipeline", "60", "20000", "status", "--hold"), True)],
        "fairness": [(NOBODY, once("fairness", "50000"), False)],
        "restore": [(NOBODY, restore_ids, False)],
        "churn": [(NOBODY, once("churn", str(seconds)), False)],
        "fd-limit": [(NOBODY, once("open", "400", "--hold"), True), (NOBODY, once("churn", str(seconds)), False)],
        "all": [(NOBODY, once("all", str(seconds)), False), (DAEMON_USER, once("open", "300", "--hold"), True)],
    }[phase]


def prepare(daemon):
    """Root's preserved sessions and connected accessories (a state file that is not trivial), then the healthy
    subscriber and the plugger."""
    for index in range(options.preserved):
        client = Connection(daemon.path)
        client.ask({"type": "hello", "id": 1, "versions": [1], "restoreID": f"bench-{index}-".ljust(200, "p")})
        client.ask({"type": "subscribe", "id": 2})
        client.close()
    plugger = Connection(daemon.path)
    plugger.ask({"type": "hello", "id": "h", "versions": [1], "client": "bench-plugger"})
    for index in range(options.present):
        plugger.ask(simulate_connect(f"present-{index}", "p"))
    healthy = Connection(daemon.path)
    healthy.ask({"type": "hello", "id": 1, "versions": [1], "client": "bench-healthy", "restoreID": "bench-healthy"})
    healthy.ask({"type": "subscribe", "id": 2})
    return healthy, plugger


def simulate_connect(serial, request_id):
    return {"type": "simulate", "id": request_id, "action": "connect",
            "accessory": {"kind": "serial", "vendorID": "1209", "productID": "0001", "name": "Hostile Bench",
                          "manufacturer": "accmon bench", "serialNumber": serial, "deviceNodes": ["/dev/ttyUSB0"]}}


def drive(healthy, plugger, seconds, interval_ns, label):
    """Toggles accessories for `seconds`; returns the latencies (µs) and the events lost and out of order."""
    latencies, lost, disorder, connected, last_seq, index = [], 0, 0, [], 0, 0
    start = time.monotonic_ns()
    deadline = start + int(seconds * 1e9)
    while time.monotonic_ns() < deadline:
        index += 1
        if len(connected) < 8 or index % 2 == 0:
            request = simulate_connect(f"{label}-{index}", index)
            wanted = ("connect", "serialNumber", f"{label}-{index}")
        else:
            gone = connected.pop(0)
            request = {"type": "simulate", "id": index, "action": "disconnect", "connectionID": gone}
            wanted = ("disconnect", "connectionID", gone)
        sent = time.monotonic_ns()
        plugger.send(request)
        while (event := healthy.read()) is not None and not (
                event.get("type") == wanted[0] and event["accessory"].get(wanted[1]) == wanted[2]):
            pass
        received = time.monotonic_ns()
        if event is None:
            lost += 1
        else:
            latencies.append((received - sent) / 1000)
            disorder += event["seq"] <= last_seq
            last_seq = event["seq"]
            if index % 64 == 0:
                healthy.send({"type": "ack", "seq": last_seq})
        reply = plugger.read()
        while reply is not None and reply.get("id") != index:
            reply = plugger.read()
        if reply and request["action"] == "connect" and "connectionID" in reply:
            connected.append(reply["connectionID"])
        pause = start + index * interval_ns - time.monotonic_ns()
        if pause > 0:
            time.sleep(pause / 1e9)
    return latencies, lost, disorder


def tenth(value):
    return None if value is None else round(value, 1)


def run_phase(phase, script):
    work = tempfile.mkdtemp(prefix=f"accmon-bench-hostile-{phase}-")
    try:
        shutil.copy(script, os.path.join(work, "hostile_client.py"))  # readable by nobody wherever the tree is
        os.chmod(os.path.join(work, "hostile_client.py"), 0o755)
        daemon = Daemon(work, options.fd_limit if phase in ("fd-limit", "all") else None)
        try:
            healthy, plugger = prepare(daemon)
            drive(healthy, plugger, 1.0, int(options.interval_ms * 1e6), "warm")  # caches, allocators
            attack = Attack(attackers_of(phase, options.attack_seconds, os.path.join(work, "hostile_client.py"),
                                         daemon.path))
            watcher = StateWatcher(daemon.state)
            watcher.start()
            cpu, written, logged = daemon.cpu_seconds(), daemon.write_bytes(), daemon.log_bytes()
            started = time.monotonic()
            attack.start()
            latencies, lost, disorder = drive(healthy, plugger, options.attack_seconds,
                                              int(options.interval_ms * 1e6), phase)
            elapsed = time.monotonic() - started
            cpu, written = daemon.cpu_seconds() - cpu, daemon.write_bytes() - written
            logged = daemon.log_bytes() - logged
            rss_peak, rss_end = daemon.status_kib("VmHWM"), daemon.status_kib("VmRSS")
            attack.stop()
            watcher.done.set()
            alive = daemon.process.poll() is None
        finally:
            stop(daemon.process)
        events = len(latencies) + lost
        return {"bench": "hostile", "tool": "accmond", "phase": phase, "seconds": round(elapsed, 2),
                "interval_ms": options.interval_ms, "events": events, "lost": lost, "out_of_order": disorder,
                "p50_us": tenth(percentile(latencies, 0.50)), "p95_us": tenth(percentile(latencies, 0.95)),
                "p99_us": tenth(percentile(latencies, 0.99)), "max_us": round(max(latencies), 1) if latencies else None,
                "rss_peak_kib": rss_peak, "rss_end_kib": rss_end, "cpu_per_second": round(cpu / elapsed, 3),
                "log_bytes_per_minute": round(logged * 60 / elapsed),
                "state_bytes_written": written, "state_bytes_per_event": round(written / events) if events else None,
                "state_file_bytes": watcher.size, "state_rewrites_seen": watcher.rewrites,
                "state_bytes_per_event_seen": round(watcher.bytes / events) if events else None,
                "daemon_alive": alive, "fd_limit": options.fd_limit if phase in ("fd-limit", "all") else None,
                "attackers": attack.results}
    finally:
        if options.keep:
            print(f"hostile: kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


def target_of(phase):
    """The healthy p99's target, a multiple of the cpu-hog control's p99 in the same round (issue 30)."""
    return None if phase in ("unattacked", "cpu-hog") else (4.0 if phase == "all" else 2.0)


LIMITS = "--max-connections-per-user" in accmond_help(options.bin_dir)
phases = [phase for phase in options.phases.split(",") if LIMITS or phase not in NEEDS_LIMITS]
for reference in ("cpu-hog", "unattacked"):  # the references first, in every round
    if reference in phases:
        phases.remove(reference)
    phases.insert(0, reference)
records = []
for round_number in range(1, options.rounds + 1):
    unattacked = control = None
    for phase in phases:
        print(f"hostile: round {round_number}: {phase}", file=sys.stderr)
        record = run_phase(phase, options.client_script)
        record["round"] = round_number
        if phase == "unattacked":
            unattacked = record
        if phase == "cpu-hog":
            control = record
        for key in ("p50_us", "p99_us"):
            if record[key] and unattacked and unattacked[key]:
                record[f"ratio_{key[:3]}"] = round(record[key] / unattacked[key], 3)
        if record["p99_us"] and control and control["p99_us"]:
            record["ratio_p99_control"] = round(record["p99_us"] / control["p99_us"], 3)
        record["target_ratio_p99_control"] = target_of(phase)
        record["meets_target"] = None if target_of(phase) is None else bool(
            record.get("ratio_p99_control") is not None and record["ratio_p99_control"] <= target_of(phase)
            and record["lost"] == 0 and record["out_of_order"] == 0)
        emit(record)
        records.append(record)
for phase in phases:
    rounds = [r for r in records if r["phase"] == phase]
    summary = {"bench": "hostile-summary", "tool": "accmond", "phase": phase, "rounds": len(rounds),
               "lost": sum(r["lost"] for r in rounds), "out_of_order": sum(r["out_of_order"] for r in rounds),
               "rss_peak_kib": max(r["rss_peak_kib"] for r in rounds),
               "target_ratio_p99_control": target_of(phase)}
    for key in ("p50_us", "p99_us", "ratio_p50", "ratio_p99", "ratio_p99_control", "cpu_per_second",
                "log_bytes_per_minute", "state_bytes_per_event"):
        summary[key] = median(r.get(key) for r in rounds)
    summary["meets_target"] = None if target_of(phase) is None else bool(
        summary["ratio_p99_control"] is not None and summary["ratio_p99_control"] <= target_of(phase)
        and summary["lost"] == 0 and summary["out_of_order"] == 0)
    emit(summary)
