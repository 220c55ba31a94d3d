"""The claims suite: claim to command running (`accmon claim -- CMD`) and release to the next waiter's command running
(p50/p99), beside two floors measured in the same rounds: starting the same command directly, and `accmon list` from
start to exit (the CLI's start, one request and reply); claims per second on one daemon (claim and release round trips
of one client, each grant saved to disk before its reply). With a build that has claims across the fleet, in the same
rounds on the same accmond: `accmon claim --broker -- CMD` to the command running, and claims per second through one
broker (claims_remote.py). One JSON line per figure."""
import argparse, json, os, socket, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(__file__))
import claims_remote  # noqa: E402
from common import accmond_arguments, emit, stop, wait_for_socket  # noqa: E402


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


class Line:
    """A protocol connection: send a request, read the reply with its id (notices are kept aside)."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(path)
        self.file = self.sock.makefile("rb")
        self.notices = []
        self.next_id = 1

    def request(self, body):
        body = dict(body, id=self.next_id)
        self.next_id += 1
        self.sock.sendall(json.dumps(body).encode() + b"\n")
        while True:
            message = json.loads(self.file.readline())
            if message.get("id") == body["id"]:
                return message
            self.notices.append(message)

    def notice(self):
        if self.notices:
            return self.notices.pop(0)
        return json.loads(self.file.readline())


def stamp_of(output):
    return int(output.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("bin")
    parser.add_argument("tools")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--samples", type=int, default=60)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--source", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    args = parser.parse_args()
    remote = claims_remote.supported(args.bin)
    accmon = os.path.join(args.bin, "accmon")
    clockstamp = os.path.join(args.tools, "clockstamp")
    with tempfile.TemporaryDirectory(prefix="accmon-bench-claims-") as work:
        os.chmod(work, 0o700)
        path = os.path.join(work, "s")
        arguments = accmond_arguments(args.bin, work)
        if remote:
            with open(os.path.join(work, "manifest.json"), "w") as out:
                json.dump(claims_remote.manifest(), out)
        daemon = subprocess.Popen(
            [os.path.join(args.bin, "accmond"), "--socket", path, "--simulate", "--no-udev", "--log-level", "warning",
             *arguments], stderr=subprocess.DEVNULL)
        rig = None
        try:
            wait_for_socket(path)
            if remote:
                rig = claims_remote.RemoteRig(args.bin, work, path, args.source)
            admin = Line(path)
            connection = admin.request({"type": "simulate", "action": "connect", "accessory": {
                "kind": "serial", "vendorID": "1209", "productID": "0001", "serialNumber": "BENCH1",
                "deviceNodes": [os.path.join(work, "ttyBENCH1")]}})["connectionID"]
            command = [accmon, "--socket", path, "claim", "--connection", str(connection), "--", clockstamp]
            remote_command = [accmon, "claim", *(rig.login() if rig else []), "--connection",
                              f"{claims_remote.HOST}:{connection}", "--", clockstamp]
            for round_ in range(args.repeats):
                direct, listed, claimed, passed, remote_claimed = [], [], [], [], []
                for _ in range(args.samples):
                    start = time.monotonic_ns()
                    direct.append(stamp_of(subprocess.run([clockstamp], capture_output=True, text=True).stdout) - start)
                    # The CLI's own floor: start, connect, one request and its reply, exit.
                    start = time.monotonic_ns()
                    subprocess.run([accmon, "--socket", path, "list"], capture_output=True)
                    listed.append(time.monotonic_ns() - start)
                    start = time.monotonic_ns()
                    run = subprocess.run(command, capture_output=True, text=True)
                    claimed.append(stamp_of(run.stdout) - start)
                    if rig:
                        start = time.monotonic_ns()
                        run = subprocess.run(remote_command, capture_output=True, text=True)
                        if run.returncode != 0:
                            raise SystemExit(f"bench: accmon claim --broker: {run.stderr}")
                        remote_claimed.append(stamp_of(run.stdout) - start)
                    # Release to the next waiter running: hold it here, start a waiter, release once it waits.
                    holder = Line(path)
                    holder_claim = holder.request({"type": "claim", "connections": [connection]})["claim"]
                    waiter = subprocess.Popen(
                        [accmon, "--socket", path, "claim", "--connection", str(connection), "--wait", "--",
                         clockstamp], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
                    while holder.notice().get("kind") != "contention":
                        pass
                    start = time.monotonic_ns()
                    holder.request({"type": "release", "claimID": holder_claim["claimID"]})
                    passed.append(stamp_of(waiter.communicate()[0]) - start)
                    holder.sock.close()
                figures = [("direct", direct), ("accmon_list_exit", listed), ("claim", claimed),
                           ("release_to_next", passed)]
                if rig:
                    figures.append(("remote_claim", remote_claimed))
                for name, values in figures:
                    emit({"suite": "claims", "figure": f"{name}_to_command_us", "round": round_,
                          "p50": percentile(values, 0.5) / 1000, "p99": percentile(values, 0.99) / 1000,
                          "samples": len(values)})
                # Claims per second: one client claiming and releasing as fast as the replies come.
                line = Line(path)
                count = 0
                deadline = time.monotonic() + args.seconds
                while time.monotonic() < deadline:
                    reply = line.request({"type": "claim", "connections": [connection]})
                    line.request({"type": "release", "claimID": reply["claim"]["claimID"]})
                    count += 1
                line.sock.close()
                emit({"suite": "claims", "figure": "claims_per_second", "round": round_,
                      "value": count / args.seconds})
                if rig:
                    emit({"suite": "claims", "figure": "remote_claims_per_second", "round": round_,
                          "value": claims_remote.claims_per_second(rig, connection, args.seconds)})
        finally:
            if rig:
                rig.close()
            stop(daemon)


if __name__ == "__main__":
    main()
