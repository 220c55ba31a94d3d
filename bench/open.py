"""The open suite (issue 40): an accessory's node handed to an app over the bus, beside the claim it makes.

In the same rounds, on one accmond (`--simulate --dbus --simulated-nodes`, a regular file as the accessory's node,
so that no device's driver is timed) on a private bus with the system bus's rules (bus_rig.py), as root (who may open
the node itself, so polkit is not asked, as on the tests' bus):
- `open_fd_us`: `Accessory.Open` → the reply with the descriptor in hand, in this process (GDBus, synchronous);
  then the descriptor closed and the claim released, untimed;
- `bus_call_us`, its floor: a call that takes the same hops with no work (client → dbus-daemon → accmond's bus thread
  → its loop → back), `Properties.Get` of the manager's `Version`;
- `socket_claim_us`: the socket's `claim` request → its reply, in this process (the claim `Open` makes, without the
  bus, the permission check and the node's descriptor); the release untimed;
- `open_to_command_us` (`accmon open --connection ID -- CMD`) and `claim_to_command_us` (`accmon claim --connection ID
  -- CMD`): from the command line's start to CMD running (tools/clockstamp), beside `direct_us`, CMD started directly;
- `opens_per_second` (Open, close, Release, back to back, one GDBus client) beside `claims_per_second` (claim and
  release over the socket, one client).
What the bus adds to a claim is `open_fd_us` − `socket_claim_us` (p50), of which `bus_call_us` is the bus's own round
trip. One JSON line per figure."""
import argparse, os, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(__file__))
import bus_rig  # noqa: E402
from claims import Line, percentile, stamp_of  # noqa: E402
from common import accmond_arguments, emit, stop, wait_for_socket  # noqa: E402

ACCESSORY = "org.accmon.Accmon1.Accessory"
CLAIM = "org.accmon.Accmon1.Claim"


def timed(function):
    start = time.monotonic_ns()
    result = function()
    return time.monotonic_ns() - start, result


class BusClient:
    """One GDBus connection to the private bus, calling accmond synchronously."""

    def __init__(self, address):
        from gi.repository import Gio, GLib
        self.Gio, self.GLib = Gio, GLib
        flags = Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION
        self.connection = Gio.DBusConnection.new_for_address_sync(address, flags, None, None)

    def call(self, path, interface, member, arguments):
        return self.connection.call_sync(bus_rig.ACCMON_NAME, path, interface, member, arguments, None,
                                         self.Gio.DBusCallFlags.NONE, 10000, None)

    def version(self):
        return self.call("/org/accmon/Accmon1", "org.freedesktop.DBus.Properties", "Get",
                         self.GLib.Variant("(ss)", ("org.accmon.Accmon1.Manager", "Version")))

    def open(self, path):
        """Open: (the descriptor, the claim's path)."""
        reply, fds = self.connection.call_with_unix_fd_list_sync(
            bus_rig.ACCMON_NAME, path, ACCESSORY, "Open", self.GLib.Variant("(sa{sv})", ("", {})), None,
            self.Gio.DBusCallFlags.NONE, 10000, None, None)
        return fds.steal_fds()[0], reply.unpack()[1]

    def release(self, claim):
        self.call(claim, CLAIM, "Release", None)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("bin")
    parser.add_argument("tools")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--samples", type=int, default=60)
    parser.add_argument("--calls", type=int, default=500, help="in-process calls per figure and round")
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--source", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    args = parser.parse_args()
    accmon = os.path.join(args.bin, "accmon")
    clockstamp = os.path.join(args.tools, "clockstamp")
    bus = bus_rig.PrivateBus(os.path.join(args.source, "packaging", "dbus", "org.accmon.Accmon1.conf"))
    env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=bus.address)
    with tempfile.TemporaryDirectory(prefix="accmon-bench-open-") as work:
        os.chmod(work, 0o700)
        path = os.path.join(work, "s")
        nodes = os.path.join(work, "nodes")
        os.mkdir(nodes)
        node = os.path.join(nodes, "ttyBENCH1")
        with open(node, "w"):
            pass
        daemon = subprocess.Popen(
            [os.path.join(args.bin, "accmond"), "--socket", path, "--simulate", "--no-udev", "--dbus",
             "--simulated-nodes", nodes, "--log-level", "warning", *accmond_arguments(args.bin, work)],
            stderr=subprocess.DEVNULL, env=env)
        try:
            wait_for_socket(path)
            bus.wait_for_name(bus_rig.ACCMON_NAME, env)
            admin = Line(path)
            connection = admin.request({"type": "simulate", "action": "connect", "accessory": {
                "kind": "serial", "vendorID": "1209", "productID": "0001", "serialNumber": "BENCH1",
                "deviceNodes": [node]}})["connectionID"]
            accessory = f"/org/accmon/Accmon1/accessories/{connection}"
            client = BusClient(bus.address)
            line = Line(path)
            open_command = [accmon, "open", "--connection", str(connection), "--", clockstamp]
            claim_command = [accmon, "--socket", path, "claim", "--connection", str(connection), "--", clockstamp]
            for round_ in range(args.repeats):
                figures = {name: [] for name in ("bus_call", "open_fd", "socket_claim", "direct", "claim_to_command",
                                                  "open_to_command")}
                for _ in range(args.calls):
                    figures["bus_call"].append(timed(client.version)[0])
                    elapsed, (descriptor, claim) = timed(lambda: client.open(accessory))
                    figures["open_fd"].append(elapsed)
                    os.close(descriptor)
                    client.release(claim)
                    elapsed, reply = timed(lambda: line.request({"type": "claim", "connections": [connection]}))
                    figures["socket_claim"].append(elapsed)
                    line.request({"type": "release", "claimID": reply["claim"]["claimID"]})
                for _ in range(args.samples):
                    start = time.monotonic_ns()
                    figures["direct"].append(stamp_of(subprocess.run([clockstamp], capture_output=True,
                                                                     text=True).stdout) - start)
                    for name, command in (("claim_to_command", claim_command), ("open_to_command", open_command)):
                        start = time.monotonic_ns()
                        run = subprocess.run(command, capture_output=True, text=True, env=env)
                        if run.returncode != 0:
                            raise SystemExit(f"bench: {' '.join(command[:3])}: {run.stderr}")
                        figures[name].append(stamp_of(run.stdout) - start)
                for name, values in figures.items():
                    emit({"suite": "open", "figure": f"{name}_us", "round": round_,
                          "p50": percentile(values, 0.5) / 1000, "p99": percentile(values, 0.99) / 1000,
                          "samples": len(values)})
                count, deadline = 0, time.monotonic() + args.seconds
                while time.monotonic() < deadline:
                    descriptor, claim = client.open(accessory)
                    os.close(descriptor)
                    client.release(claim)
                    count += 1
                emit({"suite": "open", "figure": "opens_per_second", "round": round_, "value": count / args.seconds})
                count, deadline = 0, time.monotonic() + args.seconds
                while time.monotonic() < deadline:
                    reply = line.request({"type": "claim", "connections": [connection]})
                    line.request({"type": "release", "claimID": reply["claim"]["claimID"]})
                    count += 1
                emit({"suite": "open", "figure": "claims_per_second", "round": round_, "value": count / args.seconds})
        finally:
            stop(daemon)
            bus.close()


if __name__ == "__main__":
    main()
