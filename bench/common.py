"""Helpers shared by the bench scripts: JSON lines, percentiles, accmond's manifest, sockets, RSS."""
import json, os, platform, resource, shlex, socket, statistics, subprocess, sys, time

MACHINE = {"machine": platform.node(), "cpus": os.cpu_count(), "kernel": platform.release()}


def emit(record):
    """Prints one JSON line: the measurement, then the machine and the date."""
    record.update(MACHINE)
    record["date"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    print(json.dumps(record), flush=True)


def reexec_under_umockdev(script, environment=None):
    """Runs `script` again under `umockdev-wrapper` (with `environment` added), unless this already is that run:
    the testbed's Python then has umockdev's preload and `gi`."""
    if os.environ.get("ACCMON_BENCH_TESTBED") == "1":
        return
    settings = [f"{key}={value}" for key, value in (environment or {}).items()]
    os.execvp("env", ["env", "ACCMON_BENCH_TESTBED=1", *settings, "umockdev-wrapper", "/usr/bin/python3",
                      os.path.abspath(script), *sys.argv[1:]])


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def percentile(values, fraction):
    """The nearest-rank percentile of `values` (`fraction` 0.5 for the median, 0.99 for p99); None when empty."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else None


def raise_fd_limit():
    """Soft descriptor limit up to the hard one, for this process and the daemons it starts (1,000 clients)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def accmond_help(bin_dir):
    """accmond's --help text: what this build's accmond accepts (older builds lack newer options)."""
    return subprocess.run([os.path.join(bin_dir, "accmond"), "--help"], capture_output=True, text=True).stdout


def accmond_arguments(bin_dir, work):
    """The options every bench gives accmond besides the socket: a state directory in `work` (without one accmond
    uses /var/lib/accmon), and (when this accmond has a manifest) a manifest that allows the bench's accessories
    (vendor 1209) and an empty drop-in directory."""
    arguments = ["--state-dir", os.path.join(work, "state")]
    if "--manifest" in accmond_help(bin_dir):
        manifest = os.path.join(work, "manifest.json")
        with open(manifest, "w") as out:
            json.dump({"version": 1, "accessories": [{"name": "bench", "match": {"id": "1209:*"}}]}, out)
        os.makedirs(os.path.join(work, "manifest.d"), exist_ok=True)
        arguments += ["--manifest", manifest, "--manifest-dir", os.path.join(work, "manifest.d")]
    return arguments + extra_accmond_options(bin_dir)


def extra_accmond_options(bin_dir):
    """`BENCH_ACCMOND_OPTIONS` (pairs `--option VALUE`), each pair passed only to an accmond whose --help lists the
    option: for measuring two builds under the same limits when their defaults differ."""
    words = shlex.split(os.environ.get("BENCH_ACCMOND_OPTIONS", ""))
    if len(words) % 2:
        raise SystemExit("BENCH_ACCMOND_OPTIONS: pairs of --option VALUE")
    known = accmond_help(bin_dir)
    return [word for name, value in zip(words[::2], words[1::2]) if f"{name} " in known for word in (name, value)]


def wait_for_socket(path, timeout=15):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            probe = socket.socket(socket.AF_UNIX)
            probe.connect(path)
            probe.close()
            return
        except OSError:
            time.sleep(0.01)
    raise SystemExit(f"bench: nothing listens on {path}")


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def stop(process, timeout=10):
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def free_port():
    """A TCP port free on the loopback now (the bench's brokers and dashboards each take one)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_accepting(port, what, timeout=10):
    """Waits until something accepts connections on the loopback port; ends the bench naming `what` if nothing does."""
    deadline = time.monotonic() + timeout
    while not accepts(port):
        if time.monotonic() > deadline:
            raise SystemExit(f"bench: {what} did not start")
        time.sleep(0.01)


def accepts(port):
    """Whether something accepts connections on the loopback port."""
    try:
        socket.create_connection(("127.0.0.1", port), 0.2).close()
        return True
    except OSError:
        return False


class LoopbackBroker:
    """An MQTT broker process a bench started on a loopback port (`port`, `process`): its URL, and SIGKILL."""

    @property
    def url(self):
        return f"mqtt://127.0.0.1:{self.port}"

    def kill(self):
        self.process.kill()
        self.process.wait()


def blast_uevents(uevent_blast, devices_file, times_file, first, count, interval_us, receivers, quiet_seconds, env):
    """One phase of the stream benches (udev_stream.py, bus_stream.py): tools/uevent_blast sends `count` uevents
    (numbered from `first`, `interval_us` apart; 0: a burst) to the listener socket of every receiver, then each
    receiver's lines are read until all came or none for `quiet_seconds`. `receivers` maps a name to (its follower,
    which has `new_lines()`; a parser of a line to (index, value) or None; its listener socket). Returns the sending
    times ({index: {listener: ns}}), what each receiver got ({name: {index: value}}) and the sender's JSON report."""
    command = [uevent_blast, "--devices", devices_file, "--count", str(count), "--first", str(first),
               "--interval-us", str(interval_us), "--times", times_file]
    listeners = list(dict.fromkeys(listener for _, _, listener in receivers.values()))
    for path in listeners:
        command += ["--socket", path]
    sender = json.loads(subprocess.run(command, check=True, capture_output=True, text=True, env=env).stdout)
    sent = {}
    with open(times_file) as source:
        for line in source:
            fields = line.split()
            sent[int(fields[0])] = dict(zip(listeners, (int(value) for value in fields[1:])))
    received = {name: {} for name in receivers}
    wanted = set(range(first, first + count))
    last_growth = time.time()
    while True:
        grew = False
        for name, (follower, parse, _) in receivers.items():
            for line in follower.new_lines():
                parsed = parse(line)
                if parsed and parsed[0] in wanted:
                    received[name].setdefault(parsed[0], parsed[1])
                    grew = True
        if all(len(received[name]) == count for name in receivers):
            break
        if grew:
            last_growth = time.time()
        elif time.time() - last_growth > quiet_seconds:
            break
        time.sleep(0.01)
    return sent, received, sender


class Driver:
    """A plain client of accmond's socket (docs/PROTOCOL.md) that a bench drives accmond with: `hello` once
    connected, then requests, each with its reply (the events between are skipped; an error ends the bench). `send`
    and `reply` apart, for requests sent ahead of their replies."""

    REPLIES = ("ok", "hello", "error", "list", "status")

    def __init__(self, path, client):
        self.socket = socket.socket(socket.AF_UNIX)
        self.socket.connect(path)
        self.buffer = b""
        self.next_id = 1
        self.request({"type": "hello", "versions": [1], "client": client})

    def send(self, message):
        self.socket.sendall((json.dumps(dict(message, id=self.next_id)) + "\n").encode())
        self.next_id += 1

    def reply(self):
        while True:
            while b"\n" not in self.buffer:
                self.buffer += self.socket.recv(65536)
            line, _, self.buffer = self.buffer.partition(b"\n")
            message = json.loads(line)
            if message.get("type") == "error":
                raise SystemExit(f"bench: accmond: {message}")
            if message.get("type") in self.REPLIES:
                return message

    def request(self, message):
        self.send(message)
        return self.reply()

    def close(self):
        self.socket.close()
