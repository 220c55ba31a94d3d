#!/usr/bin/python3
"""accmond on the bus: plug → InterfacesAdded latency and bursts to bus clients, next to the bus floor, in the stream
bench's umockdev testbed (bench/udev_stream.py's modules: the same devices, sender, stamps and matching).

One testbed and one private bus (bench/bus_rig.py: the system bus's rules, the shipped policy). Running the whole time:
accmond (`--dbus`, its socket too), `udevadm monitor --udev`, the socket relay (tools/relay.c), and the bus floor,
tools/bus_relay.c (one signal per usb_device add or remove on the same bus, unicast, nothing else), once with two
properties and once with accmond's (`--full`). Receivers (tools/bus_client.c is sd-bus, tools/bus_glib_client.c
GLib's GDBus; both print relay.c's client lines, timed by tools/stamp; the bus ones run as `nobody` in the policy's
group):

  bus-sdbus, bus-glib             accmond's object manager: GetManagedObjects, then InterfacesAdded/Removed
  bus-sdbus-subscription          a subscription of accmond (Subscribe, Events, Ack per signal), sd-bus
  floor-sdbus, floor-glib, floor-sdbus-subscription   the same clients against the bus floor
  floor-full-sdbus                the floor with accmond's properties in each signal (message size alone)
  accmon-watch, relay             accmond's socket (`accmon watch --json`) and the socket relay, for comparison

  latency: each receiver in a phase of its own beside udevadm (200 warm-up events, then --latency-events, one every
           --interval-us), the pairs accmond/floor in turn, the floor first in odd repeats; per receiver p50/p95/p99
           of line read − send, and the CPU per event of its broker (accmond or the floor), dbus-daemon and itself.
  burst:   --bursts events back to back to each of --burst-receivers (default the sd-bus subscription and object
           manager, accmond's and the floor's); events/s (received ÷ (last line − first send)), lost (coalesced pairs
           counted apart when accmond logged that it suspended the subscriber), CPU per event.

One JSON line per measurement and repeat, then the summary lines (bus_stream_summary.py): medians, ratios to udevadm
and to the bus floor with the same client, targets. Re-executes itself in a private network namespace (datagram queue
length raised there only) under umockdev-wrapper, as udev_stream.py does.

Usage: bus_stream.py BIN_DIR TOOLS_DIR [--policy FILE] [--repeats R] [--latency-events N] [--interval-us U]
                     [--bursts 5000] [--only latency|burst] [--receivers a,b] [--burst-receivers a,b] [--keep]
                     [--accmond-prefix 'perf record -g -o FILE --']
  BIN_DIR: accmond and accmon (release); TOOLS_DIR: uevent_blast, stamp, relay, bus_relay, bus_client,
  bus_glib_client; FILE: the policy (default: this checkout's packaging/dbus/org.accmon.Accmon1.conf)
"""
import argparse, glob, os, shutil, signal, subprocess, sys, tempfile, time

QUEUE_LENGTH = 65536
DEVICES = 64
HERE = os.path.dirname(os.path.abspath(__file__))

if os.environ.get("ACCMON_BENCH_TESTBED") != "1":
    inner = (f"sysctl -qw net.unix.max_dgram_qlen={QUEUE_LENGTH} && "
             'exec env ACCMON_BENCH_TESTBED=1 umockdev-wrapper /usr/bin/python3 "$0" "$@"')
    os.execvp("unshare", ["unshare", "-n", "sh", "-c", inner, os.path.abspath(__file__), *sys.argv[1:]])

sys.path.insert(0, HERE)
from bus_rig import ACCMON_NAME, FLOOR_NAME, PrivateBus, as_member, member_manifest  # noqa: E402
from bus_stream_summary import (BROKER_OF, BURST_RECEIVERS, LATENCY_ORDER, latency_record,  # noqa: E402
                                summary_records)
from common import accmond_arguments, blast_uevents, emit  # noqa: E402
from udev_stream_lines import Follower, UdevadmLines, parse_client, parse_watch  # noqa: E402
from udev_stream_testbed import build_testbed  # noqa: E402  (imports gi: only inside the testbed's Python)

parser = argparse.ArgumentParser()
parser.add_argument("bin_dir")
parser.add_argument("tools_dir")
parser.add_argument("--policy", default=os.path.join(HERE, "..", "packaging", "dbus", "org.accmon.Accmon1.conf"))
parser.add_argument("--repeats", type=int, default=3)
parser.add_argument("--latency-events", type=int, default=2000)
parser.add_argument("--interval-us", type=int, default=2000)
parser.add_argument("--bursts", default="5000")
parser.add_argument("--only", choices=["latency", "burst"])
parser.add_argument("--receivers", default=",".join(LATENCY_ORDER), help="the latency phases' receivers")
parser.add_argument("--burst-receivers", default=",".join(BURST_RECEIVERS))
parser.add_argument("--keep", action="store_true", help="keep the work directory (receivers' output and logs)")
parser.add_argument("--accmond-prefix", default="",
                    help="a command to run accmond under, such as 'perf record -g -o F --' (the CPU figures are then "
                         "the command's)")
options = parser.parse_args()
signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # a run stopped from outside still stops its processes


def schedstat(pid):
    """(CPU time in ns, times scheduled in) of `pid`, the sums over its threads of /proc/PID/task/TID/schedstat (as
    tools/fanout.c reads it: nanoseconds, where /proc/PID/stat counts 10 ms ticks); zeros when it is gone."""
    total = runs = 0
    for path in glob.glob(f"/proc/{pid}/task/*/schedstat"):
        try:
            with open(path) as stat:
                fields = stat.read().split()
            total, runs = total + int(fields[0]), runs + int(fields[2])
        except (OSError, ValueError, IndexError):
            pass
    return total, runs


work = tempfile.mkdtemp(prefix="accmon-bench-bus-")
os.chmod(work, 0o755)
testbed, root, devices_file, devpath_index = build_testbed(work, DEVICES)
parse_udevadm = UdevadmLines(devpath_index, DEVICES).parse
plain_env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
processes = []
bus = None


def event_sockets():
    return set(glob.glob(os.path.join(root, "event[0-9]*")))


def wait_for(predicate, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise SystemExit(f"bus_stream: timed out waiting for {what}")


def stamped(command, name, env):
    """Starts `command` with its standard output timed by stamp into WORK/NAME.txt; returns (process, file)."""
    path = os.path.join(work, f"{name}.txt")
    stamp = subprocess.Popen([os.path.join(options.tools_dir, "stamp")], stdin=subprocess.PIPE,
                             stdout=open(path, "w"), env=plain_env)
    process = subprocess.Popen(command, stdout=stamp.stdin, stderr=open(os.path.join(work, f"{name}.err"), "w"),
                               env=env)
    stamp.stdin.close()
    processes.extend([process, stamp])
    return process, path


monitors = set()


def with_monitor(command, name, env, spare, stamp_output=False):
    """Starts a process that opens a udev monitor, with descriptors 3 to at least 2 + `spare` open first, and to
    every other monitor's number, so that its emulated monitor socket gets a number (and a path: umockdev names it
    event<fd>) no other monitor has; returns (process, socket, stamped file or None)."""
    before = event_sockets()
    taken = [int(os.path.basename(path)[len("event"):]) for path in before]
    spare = max([spare] + [number - 2 for number in taken])
    wrapped = ["bash", "-c", " ".join(f"exec {fd}</dev/null;" for fd in range(3, 3 + spare)) + ' exec "$0" "$@"',
               *command]
    if stamp_output:
        process, path = stamped(wrapped, name, env)
    else:
        process, path = subprocess.Popen(wrapped, stderr=open(os.path.join(work, f"{name}.err"), "w"), env=env), None
        processes.append(process)
    found = wait_for(lambda: event_sockets() - before, 15, f"{name}'s monitor socket").pop()
    if found in monitors:
        raise SystemExit(f"bus_stream: {name}'s monitor socket {found} is another's")
    monitors.add(found)
    return process, found, path


def cleanup():
    for process in reversed(processes):
        if process.poll() is None:
            process.terminate()
    for process in processes:
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
    if bus:
        bus.close()
    if options.keep:
        print(f"bus_stream: kept {work}", file=sys.stderr)
    else:
        shutil.rmtree(work, ignore_errors=True)


try:
    bus = PrivateBus(options.policy, env=plain_env)
    bus_env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=bus.address)  # with umockdev's preload: the brokers
    client_env = dict(plain_env, DBUS_SYSTEM_BUS_ADDRESS=bus.address)
    tool = lambda name: os.path.join(options.tools_dir, name)  # noqa: E731
    socket_path = os.path.join(work, "accmon.sock")
    arguments = accmond_arguments(options.bin_dir, work)
    member_manifest(work)  # the bus clients are `nobody` in the group `users`: they see the bench's accessories
    accmond, accmond_socket, _ = with_monitor(
        options.accmond_prefix.split() + [os.path.join(options.bin_dir, "accmond"), "--socket", socket_path, "--dbus"]
        + arguments, "accmond", bus_env, 0)
    wait_for(lambda: os.path.exists(socket_path), 15, "accmond's socket")
    bus.wait_for_name(ACCMON_NAME, client_env)
    accmond_log = Follower(os.path.join(work, "accmond.err"))
    udevadm, udevadm_socket, udevadm_path = with_monitor(["udevadm", "monitor", "--udev"], "udevadm", bus_env, 6,
                                                         stamp_output=True)
    relay_path = os.path.join(work, "relay.sock")
    relay, relay_socket, _ = with_monitor([tool("relay"), "serve", relay_path], "relay", bus_env, 12)
    wait_for(lambda: os.path.exists(relay_path), 10, "the relay's socket")
    floor, floor_socket, _ = with_monitor([tool("bus_relay"), FLOOR_NAME], "floor", bus_env, 18)
    bus.wait_for_name(FLOOR_NAME, client_env)
    full_floor, full_floor_socket, _ = with_monitor([tool("bus_relay"), FLOOR_NAME + ".Full", "--full"],
                                                    "floor-full", bus_env, 24)
    bus.wait_for_name(FLOOR_NAME + ".Full", client_env)
    brokers = {"accmond": (accmond.pid, accmond_socket), "relay": (relay.pid, relay_socket),
               "floor": (floor.pid, floor_socket), "floor-full": (full_floor.pid, full_floor_socket)}
    member = as_member()
    commands = {
        "accmon-watch": ([os.path.join(options.bin_dir, "accmon"), "--socket", socket_path, "watch", "--json"],
                         parse_watch),
        "relay": ([tool("relay"), "watch", relay_path], parse_client),
        "bus-sdbus": (member + [tool("bus_client"), "watch", ACCMON_NAME], parse_client),
        "bus-glib": (member + [tool("bus_glib_client"), ACCMON_NAME], parse_client),
        "bus-sdbus-subscription": (member + [tool("bus_client"), "subscribe", ACCMON_NAME], parse_client),
        "floor-sdbus": (member + [tool("bus_client"), "watch", FLOOR_NAME], parse_client),
        "floor-glib": (member + [tool("bus_glib_client"), FLOOR_NAME], parse_client),
        "floor-sdbus-subscription": (member + [tool("bus_client"), "subscribe", FLOOR_NAME], parse_client),
        "floor-full-sdbus": (member + [tool("bus_client"), "watch", FLOOR_NAME + ".Full"], parse_client),
    }
    for names in (options.receivers, options.burst_receivers):
        unknown = set(names.split(",")) - set(commands)
        if unknown:
            raise SystemExit(f"bus_stream: unknown receivers {sorted(unknown)}; known: {sorted(commands)}")
    udevadm_follower = Follower(udevadm_path)
    next_index = 0
    phases = 0

    def start_receiver(name):
        """Starts receiver `name` and waits for its first line (subscribed); returns (process, receivers)."""
        global phases
        phases += 1
        command, parse = commands[name]
        process, path = stamped(command, f"{name}-{phases}", client_env)
        wait_for(lambda: os.path.getsize(path) > 0 or process.poll() is not None, 15, f"{name}'s subscription")
        if process.poll() is not None:
            with open(os.path.join(work, f"{name}-{phases}.err")) as errors:
                raise SystemExit(f"bus_stream: {name} exited: {errors.read()[-2000:]}")
        listener = brokers[BROKER_OF[name]][1]
        return process, {name: (Follower(path), parse, listener),
                         "udevadm-monitor": (udevadm_follower, parse_udevadm, udevadm_socket)}

    def stop_receiver(process):
        process.terminate()
        process.wait()
        time.sleep(0.2)

    def run_stream(count, interval_us, receivers, pids, quiet_seconds=3.0):
        """Sends `count` events; returns (first index, send times by listener, {receiver: {index: receive time}},
        CPU ns by process during the stream (and KEY_runs: how often its threads were scheduled in), the sender's
        report)."""
        global next_index
        first = next_index
        next_index += count
        times_file = os.path.join(work, "times")
        before = {key: schedstat(pid) for key, pid in pids.items()}
        sent, received, sender = blast_uevents(tool("uevent_blast"), devices_file, times_file, first, count,
                                               interval_us, receivers, quiet_seconds, plain_env)
        after = {key: schedstat(pid) for key, pid in pids.items()}
        cpu = {key: after[key][0] - before[key][0] for key in pids}
        cpu.update({f"{key}_runs": after[key][1] - before[key][1] for key in pids})
        return first, sent, received, cpu, sender

    def pids_of(name, process):
        return {"broker": brokers[BROKER_OF[name]][0], "dbus_daemon": bus.pid, "client": process.pid}

    def ordered(names, repeat):
        """The receivers in order, each accmond/floor pair with the floor first in odd repeats."""
        names = list(names)
        if repeat % 2:
            for index in range(len(names) - 1):
                if names[index + 1] == names[index].replace("bus-", "floor-", 1) != names[index]:
                    names[index], names[index + 1] = names[index + 1], names[index]
        return names

    summary = {}
    if options.only in (None, "latency"):
        for repeat in range(options.repeats):
            for name in ordered(options.receivers.split(","), repeat):
                process, receivers = start_receiver(name)
                run_stream(200, 500, receivers, {})  # warm-up: caches, allocators, the receiver's first events
                _, sent, received, cpu, _ = run_stream(options.latency_events, options.interval_us, receivers,
                                                       pids_of(name, process))
                stop_receiver(process)
                for tool_name, (_, _, listener) in receivers.items():
                    record = latency_record(tool_name, name, repeat, options.latency_events, options.interval_us,
                                            sent, received[tool_name], listener, cpu)
                    emit(record)
                    summary.setdefault(("latency", options.latency_events, name, tool_name), []).append(record)
    if options.only in (None, "burst"):
        for repeat in range(options.repeats):
            for name in ordered(options.burst_receivers.split(","), repeat):
                for burst in [int(value) for value in options.bursts.split(",") if value]:
                    process, receivers = start_receiver(name)
                    run_stream(200, 500, receivers, {})  # warm-up
                    accmond_log.new_lines()  # what accmond logged before this burst
                    first, sent, received, cpu, sender = run_stream(burst, 0, receivers, pids_of(name, process),
                                                                    quiet_seconds=5.0)
                    logged = accmond_log.new_lines() if BROKER_OF[name] == "accmond" else []
                    stop_receiver(process)
                    suspended = sum("suspending" in line for line in logged)  # not acknowledging, or not reading
                    monitor_lost = sum("udev monitor lost" in line for line in logged)
                    start = min(min(times.values()) for times in sent.values())
                    for tool_name in receivers:
                        got = received[tool_name]
                        elapsed = (max(got.values()) - start) / 1e9 if got else float("nan")
                        record = {"bench": "bus-burst", "tool": tool_name, "repeat": repeat, "events": burst,
                                  "lost": burst - len(got), "events_per_s": round(len(got) / elapsed) if got else 0}
                        if sender["send_errors"]:
                            record["send_errors"] = sender["send_errors"]
                        if tool_name == "udevadm-monitor":
                            record["alongside"] = name
                        else:
                            # As the socket burst: a subscriber accmond suspended (it fell --max-client-buffer behind
                            # in unacknowledged events) has each connect and the disconnect after it cancelled out
                            # in its queue; such pairs count apart, only when accmond says it suspended it and its
                            # monitor lost nothing. Any other missing event is lost.
                            if suspended and not monitor_lost:
                                pairs = sum(1 for index in range(first - first % 2, first + burst, 2)
                                            if index not in got and index + 1 not in got
                                            and first <= index and index + 1 < first + burst)
                                record["coalesced_pairs"] = pairs
                                record["lost"] -= 2 * pairs
                            if BROKER_OF[tool_name] == "accmond":
                                record["subscriber_suspended"] = suspended
                                if monitor_lost:
                                    record["monitor_lost"] = monitor_lost
                            for key in ("broker", "dbus_daemon", "client"):
                                record[f"cpu_us_per_event_{key}"] = round(cpu[key] / 1000 / burst, 1)
                        emit(record)
                        summary.setdefault(("burst", burst, name, tool_name), []).append(record)
                    time.sleep(1.0)
    for record in summary_records(summary):
        emit(record)
finally:
    cleanup()
