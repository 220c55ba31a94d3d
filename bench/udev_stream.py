#!/usr/bin/python3
"""Delivery latency and burst throughput through a umockdev testbed, next to `udevadm monitor --udev`.

One testbed, one stream of libudev-format uevents from bench/tools/uevent_blast.c, sent to every listener in the
same run: accmond (whose events go to `accmon watch --json` and to the AccmonClient bench app, once through its
async sequence and once through a handler on the reader thread) and `udevadm monitor --udev`. Every receiver's output goes through bench/tools/stamp.c, which times each line as it is
read. The sender keeps the send times; receivers are matched to them by the serial number accmond forwards and by
(devpath, action, occurrence) for udevadm.

  latency: paced events (one every --interval-us); per receiver p50/p95/p99 of receive time - send time.
  burst:   N events back to back; per receiver events/s (received / (last line - first send)), events lost, and
           CPU per event (user + system time of the processes, /proc/PID/stat, during the burst). The AccmonClient
           apps leave before the bursts: they go to `accmon watch --json` (through accmond) and udevadm only.

Prints one JSON line per measurement and repeat, then a summary line per measurement with the medians over repeats
and the ratios against udevadm monitor. Re-executes itself in a private network namespace (datagram queue length
raised there only, so a 50,000-event burst fits the receivers' queues) under umockdev-wrapper.

Usage: udev_stream.py BIN_DIR TOOLS_DIR CLIENT [--repeats R] [--latency-events N] [--interval-us U]
                      [--bursts 5000,50000] [--only latency|burst] [--receivers accmon-watch,relay,...]
  BIN_DIR: accmond and accmon (release); TOOLS_DIR: uevent_blast and stamp (compiled); CLIENT: accmon-bench-client

Beside it: udev_stream_testbed.py builds the testbed's devices, udev_stream_lines.py reads the receivers' stamped
output and matches each line to the event sent, udev_stream_summary.py turns the repeats into the summary lines.
"""
import argparse, glob, json, os, shutil, subprocess, sys, tempfile, time

QUEUE_LENGTH = 65536
DEVICES = 64

if os.environ.get("ACCMON_BENCH_TESTBED") != "1":
    inner = (f"sysctl -qw net.unix.max_dgram_qlen={QUEUE_LENGTH} && "
             'exec env ACCMON_BENCH_TESTBED=1 umockdev-wrapper /usr/bin/python3 "$0" "$@"')
    os.execvp("unshare", ["unshare", "-n", "sh", "-c", inner, os.path.abspath(__file__), *sys.argv[1:]])

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import blast_uevents, emit, extra_accmond_options  # noqa: E402
from udev_stream_lines import Follower, UdevadmLines, parse_client, parse_watch  # noqa: E402
from udev_stream_summary import percentile, summary_records  # noqa: E402
from udev_stream_testbed import build_testbed  # noqa: E402  (imports gi: only inside the testbed's Python)

parser = argparse.ArgumentParser()
parser.add_argument("bin_dir")
parser.add_argument("tools_dir")
parser.add_argument("client")
parser.add_argument("--repeats", type=int, default=3)
parser.add_argument("--latency-events", type=int, default=2000)
parser.add_argument("--interval-us", type=int, default=2000)
parser.add_argument("--bursts", default="5000,50000")
parser.add_argument("--only", choices=["latency", "burst"])
parser.add_argument("--receivers", help="the latency phases' receivers, comma-separated (default: all of them)")
parser.add_argument("--keep", action="store_true", help="keep the work directory (receivers' output and logs)")
parser.add_argument("--no-descriptors", action="store_true",
                    help="devices without a `descriptors` file (the testbed of sessions before 12)")
parser.add_argument("--client-prefix", default="", help="a command to run the AccmonClient app under")
parser.add_argument("--accmond-prefix", default="", help="a command to run accmond under, such as 'perf record -g -o F --'")
parser.add_argument("--udevadm-prefix", default="", help="a command to run udevadm monitor under")
options = parser.parse_args()


def cpu_ns(pid):
    """CPU time (user + system) of `pid`, every thread counted, those that exited too (/proc/PID/stat), in ns."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * 1_000_000_000 // os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0


# --- the testbed: DEVICES USB devices (udev_stream_testbed.py), and the list of them uevent_blast reads
work = tempfile.mkdtemp(prefix="accmon-bench-stream-")
testbed, root, devices_file, devpath_index = build_testbed(work, DEVICES, descriptors=not options.no_descriptors)
parse_udevadm = UdevadmLines(devpath_index, DEVICES).parse  # one for the whole run: it counts occurrences

plain_env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD",)}
processes = []


def event_sockets():
    return set(glob.glob(os.path.join(root, "event[0-9]*")))


def wait_for(predicate, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise SystemExit(f"udev_stream: timed out waiting for {what}")


def stamped(command, name, env, pass_fds=()):
    """Starts `command` with its standard output timed by stamp into WORK/NAME.txt; returns (process, file)."""
    path = os.path.join(work, f"{name}.txt")
    stamp = subprocess.Popen([os.path.join(options.tools_dir, "stamp")], stdin=subprocess.PIPE,
                             stdout=open(path, "w"), env=plain_env)
    process = subprocess.Popen(command, stdout=stamp.stdin, stderr=open(os.path.join(work, f"{name}.err"), "w"),
                               env=env, pass_fds=pass_fds)
    stamp.stdin.close()
    processes.extend([process, stamp])
    return process, path



def cleanup():
    for process in reversed(processes):
        if process.poll() is None:
            process.terminate()
    for process in processes:
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
    if options.keep:
        print(f"udev_stream: kept {work}", file=sys.stderr)
    else:
        shutil.rmtree(work, ignore_errors=True)  # the testbed removes its own directory at exit


try:
    socket_path = os.path.join(work, "accmon.sock")
    manifest_args = []
    if "--manifest" in subprocess.run([os.path.join(options.bin_dir, "accmond"), "--help"], capture_output=True,
                                      text=True).stdout:
        # accmond announces only accessories its manifest allows: allow the bench's vendor (pid.codes test id 1209).
        manifest = os.path.join(work, "manifest.json")
        with open(manifest, "w") as out:
            json.dump({"version": 1, "accessories": [{"name": "bench", "match": {"id": "1209:*"}}]}, out)
        os.mkdir(os.path.join(work, "manifest.d"))
        manifest_args = ["--manifest", manifest, "--manifest-dir", os.path.join(work, "manifest.d")]
    before = event_sockets()
    accmond = subprocess.Popen(
        options.accmond_prefix.split() + [os.path.join(options.bin_dir, "accmond"), "--socket", socket_path, "--state-dir", os.path.join(work, "state")] + manifest_args
        + extra_accmond_options(options.bin_dir),
        stderr=open(os.path.join(work, "accmond.err"), "w"), env=dict(os.environ))
    processes.append(accmond)
    wait_for(lambda: os.path.exists(socket_path), 15, "accmond's socket")
    accmond_log = Follower(os.path.join(work, "accmond.err"))
    accmond_socket = wait_for(lambda: event_sockets() - before, 10, "accmond's monitor socket").pop()
    # udevadm with a few extra descriptors open, so that its monitor socket does not get accmond's fd number
    # (umockdev names the emulated socket after the fd; same number, same path: the last bind wins).
    before = event_sockets()
    spare = [os.open("/dev/null", os.O_RDONLY) for _ in range(6)]
    udevadm, udevadm_path = stamped(options.udevadm_prefix.split() + ["udevadm", "monitor", "--udev"], "udevadm", dict(os.environ), pass_fds=spare)
    for fd in spare:
        os.close(fd)
    udevadm_socket = wait_for(lambda: event_sockets() - before, 10, "udevadm's monitor socket").pop()
    if udevadm_socket == accmond_socket:
        raise SystemExit("udev_stream: udevadm and accmond share a monitor socket path")
    # Each accmon receiver is measured in a phase of its own, beside udevadm: on 2 vCPUs, several receivers (each
    # with its stamper) woken by the same event would queue for a CPU, and the last one would pay for the others.
    # The relay baseline (tools/relay.c): the same hops as accmond + accmon watch, with nothing done in between.
    before = event_sockets()
    spare = [os.open("/dev/null", os.O_RDONLY) for _ in range(12)]
    relay_path = os.path.join(work, "relay.sock")
    relay = subprocess.Popen([os.path.join(options.tools_dir, "relay"), "serve", relay_path],
                             stderr=open(os.path.join(work, "relay.err"), "w"), env=dict(os.environ), pass_fds=spare)
    processes.append(relay)
    for fd in spare:
        os.close(fd)
    relay_socket = wait_for(lambda: event_sockets() - before, 10, "the relay's monitor socket").pop()
    wait_for(lambda: os.path.exists(relay_path), 10, "the relay's socket")
    if relay_socket in (accmond_socket, udevadm_socket):
        raise SystemExit("udev_stream: the relay shares a monitor socket path")
    # The relay again, reading and hashing each added device's `descriptors` as accmond must: the add path's floor.
    # Its descriptors 3 to 9 held open by the shell, so that its monitor socket gets a number of its own.
    before = event_sockets()
    hashing_relay_path = os.path.join(work, "relay-descriptors.sock")
    hashing_relay = subprocess.Popen(
        ["sh", "-c", " ".join(f"exec {fd}</dev/null;" for fd in range(3, 10)) + ' exec "$0" "$@"',
         os.path.join(options.tools_dir, "relay"), "serve", hashing_relay_path, "--descriptors"],
        stderr=open(os.path.join(work, "relay-descriptors.err"), "w"), env=dict(os.environ))
    processes.append(hashing_relay)
    hashing_relay_socket = wait_for(lambda: event_sockets() - before, 10, "the hashing relay's monitor socket").pop()
    wait_for(lambda: os.path.exists(hashing_relay_path), 10, "the hashing relay's socket")
    if hashing_relay_socket in (accmond_socket, udevadm_socket, relay_socket):
        raise SystemExit("udev_stream: the hashing relay shares a monitor socket path")
    listener_of = {"relay": relay_socket, "relay-descriptors": hashing_relay_socket}
    receiver_commands = {
        "accmon-watch": ([os.path.join(options.bin_dir, "accmon"), "--socket", socket_path, "watch", "--json"],
                         parse_watch),
        # The AccmonClient app three times: events through the async sequence (`for try await`), through a handler on
        # the connection's reader thread (`--handler`), and through the async sequence in a task that prefers the
        # connection's reader executor (`--reader-executor`).
        "accmon-client": (options.client_prefix.split() + [options.client, socket_path], parse_client),
        "accmon-client-executor": (options.client_prefix.split() + [options.client, socket_path, "--reader-executor"],
                                   parse_client),
        "accmon-client-handler": (options.client_prefix.split() + [options.client, socket_path, "--handler"],
                                  parse_client),
        "relay": ([os.path.join(options.tools_dir, "relay"), "watch", relay_path], parse_client),
        "relay-descriptors": ([os.path.join(options.tools_dir, "relay"), "watch", hashing_relay_path], parse_client),
    }
    latency_receivers = options.receivers.split(",") if options.receivers else list(receiver_commands)
    unknown = set(latency_receivers) - set(receiver_commands)
    if unknown:
        raise SystemExit(f"udev_stream: unknown receivers {sorted(unknown)}; known: {sorted(receiver_commands)}")
    next_index = 0
    phases = 0
    udevadm_follower = Follower(udevadm_path)  # one for the whole run: udevadm's lines are matched by occurrence

    def start_receiver(name):
        """Starts the accmon receiver `name` and waits for its subscription; returns (process, receivers)."""
        global phases
        phases += 1
        command, parse = receiver_commands[name]
        process, path = stamped(command, f"{name}-{phases}", plain_env)
        wait_for(lambda: os.path.getsize(path) > 0, 15, f"{name}'s subscription")
        receivers = {name: (Follower(path), parse, listener_of.get(name, accmond_socket)),
                     "udevadm-monitor": (udevadm_follower, parse_udevadm, udevadm_socket)}
        return process, receivers

    def stop_receiver(process):
        process.terminate()
        process.wait()
        time.sleep(0.2)

    def run_stream(count, interval_us, receivers, watch_pid=None, quiet_seconds=3.0):
        """Sends `count` events; returns send times by listener and, per receiver, {index: receive time}."""
        global next_index
        first = next_index
        next_index += count
        times_file = os.path.join(work, "times")
        pids = {"accmond": accmond.pid, "udevadm": udevadm.pid}
        if watch_pid:
            pids["watch"] = watch_pid
        cpu_before = {key: cpu_ns(pid) for key, pid in pids.items()}
        sent, received, sender = blast_uevents(os.path.join(options.tools_dir, "uevent_blast"), devices_file,
                                               times_file, first, count, interval_us, receivers, quiet_seconds,
                                               plain_env)
        cpu = {key: cpu_ns(pid) - cpu_before[key] for key, pid in pids.items()}
        return first, sent, received, cpu, sender

    summary = {}
    if options.only in (None, "latency"):
        for repeat in range(options.repeats):
            for receiver in latency_receivers:
                process, receivers = start_receiver(receiver)
                run_stream(200, 500, receivers)  # warm-up: caches, allocators, the receiver's first events
                first, sent, received, cpu, _ = run_stream(options.latency_events, options.interval_us, receivers)
                stop_receiver(process)
                for name, (_, _, listener) in receivers.items():
                    latencies = [(t - sent[i][listener]) / 1000 for i, t in received[name].items()]
                    # Even events are adds (accmond reads the device's attribute files), odd ones removes.
                    by_action = {action: [(t - sent[i][listener]) / 1000 for i, t in received[name].items()
                                          if i % 2 == parity] for action, parity in (("add", 0), ("remove", 1))}
                    record = {"bench": "latency", "tool": name, "repeat": repeat, "events": options.latency_events,
                              "interval_us": options.interval_us, "received": len(latencies),
                              "lost": options.latency_events - len(latencies),
                              "p50_us": round(percentile(latencies, 0.50), 1),
                              "p95_us": round(percentile(latencies, 0.95), 1),
                              "p99_us": round(percentile(latencies, 0.99), 1), "max_us": round(max(latencies), 1),
                              "p50_add_us": round(percentile(by_action["add"], 0.50), 1),
                              "p50_remove_us": round(percentile(by_action["remove"], 0.50), 1)}
                    if name == "udevadm-monitor":
                        record["alongside"] = receiver
                        record["cpu_us_per_event"] = round(cpu["udevadm"] / 1000 / options.latency_events, 1)
                    elif not name.startswith("relay"):
                        record["cpu_us_per_event_accmond"] = round(cpu["accmond"] / 1000 / options.latency_events, 1)
                    emit(record)
                    summary.setdefault(("latency", options.latency_events, receiver, name), []).append(record)
    # Bursts go to `accmon watch` alone (and udevadm).
    if options.only in (None, "burst"):
        watch, receivers = start_receiver("accmon-watch")
        run_stream(200, 500, receivers)  # warm-up
        for repeat in range(options.repeats):
            for burst in [int(value) for value in options.bursts.split(",") if value]:
                accmond_log.new_lines()  # what accmond logged before this burst
                first, sent, received, cpu, sender = run_stream(burst, 0, receivers, watch.pid, quiet_seconds=5.0)
                logged = accmond_log.new_lines()
                suspended = sum("suspending" in line for line in logged)  # over its budget, or not reading
                monitor_lost = sum("udev monitor lost" in line for line in logged)
                start = min(min(times.values()) for times in sent.values())
                for name in receivers:
                    got = received[name]
                    elapsed = (max(got.values()) - start) / 1e9 if got else float("nan")
                    record = {"bench": "burst", "tool": name, "repeat": repeat, "events": burst,
                              "received": len(got), "lost": burst - len(got),
                              "events_per_s": round(len(got) / elapsed) if got else 0,
                              "seconds": round(elapsed, 4), "sender_seconds": sender["seconds"],
                              "send_errors": sender["send_errors"]}
                    if name == "accmon-watch":
                        # A watcher accmond suspended (it fell behind its output budget) has a connect and the
                        # disconnect after it removed from its queue together, as docs/PROTOCOL.md §6 promises: such
                        # pairs are counted apart, and only when accmond says it suspended the watcher and its
                        # monitor lost nothing. Any other missing event is lost.
                        if suspended and not monitor_lost:
                            pairs = sum(1 for index in range(first - first % 2, first + burst, 2)
                                        if index not in got and index + 1 not in got
                                        and first <= index and index + 1 < first + burst)
                            record["coalesced_pairs"] = pairs
                            record["lost"] -= 2 * pairs
                        record["watch_suspended"] = suspended
                        record["monitor_lost"] = monitor_lost
                        record["cpu_us_per_event"] = round((cpu["accmond"] + cpu["watch"]) / 1000 / burst, 2)
                        record["cpu_us_per_event_accmond"] = round(cpu["accmond"] / 1000 / burst, 2)
                        record["cpu_us_per_event_watch"] = round(cpu["watch"] / 1000 / burst, 2)
                    else:
                        record["cpu_us_per_event"] = round(cpu["udevadm"] / 1000 / burst, 2)
                    emit(record)
                    summary.setdefault(("burst", burst, "accmon-watch", name), []).append(record)
                time.sleep(1.0)

    for record in summary_records(summary):
        emit(record)
finally:
    cleanup()
