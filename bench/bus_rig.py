"""The bus bench's private bus (bench/bus_stream.py, bench/bus_memory.py): a dbus-daemon with the system bus's rules,
as Tests/dbus/busrig.py makes it, with accmon's shipped policy (its group `accmon` replaced by `users`, a group every
Debian system has, so that no account is made on the host) and the bench's floor relay's policy (tools/bus_relay.c:
the same rules for its own name). The bus clients run as `nobody` in the group `users`, as a desktop user in the
group `accmon` would: the policy lets them talk to both names, and accmond applies to them what it applies to a user
that is not root (its per-user limits and loop share).

dbus-daemon's limits are its defaults for the system bus unless `limits` says otherwise (a `<limit>` element each):
max_connections_per_user 256, max_replies_per_connection 128, max_match_rules_per_connection 512, 127 MB queued per
connection."""
import os
import shutil
import subprocess
import time

ACCMON_NAME = "org.accmon.Accmon1"
FLOOR_NAME = "org.accmon.bench.BusFloor"
MEMBERS_GROUP, MEMBERS_GID = "users", 100
CLIENT_USER = "nobody"

# The system bus's rules, as the D-Bus tests run them (with {socket}, {limits} and {policies} to fill in).
BUS_CONFIG = open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "Tests", "dbus",
                               "system-bus.conf.in")).read()

FLOOR_POLICY = f"""<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <!-- The bench's floor relay (bench/tools/bus_relay.c): accmon's rules for a name of its own. -->
  <policy user="root">
    <allow own_prefix="{FLOOR_NAME}"/>
    <allow send_destination="{FLOOR_NAME}"/>
    <allow send_destination="{FLOOR_NAME}.Full"/>
  </policy>
  <policy group="{MEMBERS_GROUP}">
    <allow send_destination="{FLOOR_NAME}"/>
    <allow send_destination="{FLOOR_NAME}.Full"/>
  </policy>
  <policy context="default">
    <deny send_destination="{FLOOR_NAME}"/>
    <deny send_destination="{FLOOR_NAME}.Full"/>
  </policy>
</busconfig>
"""


def member_manifest(work):
    """Lets the bench's bus user see the bench's accessories: the manifest bench/common.py wrote in `work` (one entry,
    vendor 1209) gets the access the shipped default gives the group `accmon` and root, for the group `users`."""
    import json
    path = os.path.join(work, "manifest.json")
    with open(path) as source:
        manifest = json.load(source)
    for entry in manifest["accessories"]:
        entry["access"] = {"users": [0], "groups": [MEMBERS_GROUP]}
    with open(path, "w") as out:
        json.dump(manifest, out)


def as_member():
    """The command prefix that runs a program as the bench's bus user: `nobody`, with the group `users` only."""
    import pwd
    entry = pwd.getpwnam(CLIENT_USER)
    return ["setpriv", "--reuid", str(entry.pw_uid), "--regid", str(entry.pw_gid), "--groups", str(MEMBERS_GID)]


class PrivateBus:
    """A dbus-daemon with the system bus's rules, accmon's policy (from `policy`, the build's
    packaging/dbus/org.accmon.Accmon1.conf) and the floor's, on a socket in a directory of its own that every user can
    reach. `address` is for DBUS_SYSTEM_BUS_ADDRESS."""

    def __init__(self, policy, limits="", env=None):
        import tempfile
        self.directory = tempfile.mkdtemp(prefix="accmon-bench-dbus-")
        os.chmod(self.directory, 0o755)
        self.socket = os.path.join(self.directory, "bus.sock")
        self.address = f"unix:path={self.socket}"
        policies = os.path.join(self.directory, "system.d")
        os.mkdir(policies)
        with open(policy) as source:
            text = source.read().replace('group="accmon"', f'group="{MEMBERS_GROUP}"')
        with open(os.path.join(policies, "org.accmon.Accmon1.conf"), "w") as out:
            out.write(text)
        with open(os.path.join(policies, f"{FLOOR_NAME}.conf"), "w") as out:
            out.write(FLOOR_POLICY)
        config = os.path.join(self.directory, "bus.conf")
        with open(config, "w") as out:
            out.write(BUS_CONFIG.format(socket=self.socket, policies=policies, limits=limits))
        log = open(os.path.join(self.directory, "log"), "w")
        self.process = subprocess.Popen(["dbus-daemon", "--config-file", config, "--nofork", "--nopidfile"],
                                        stdout=subprocess.DEVNULL, stderr=log, env=env)
        deadline = time.time() + 10
        while not os.path.exists(self.socket):
            if time.time() > deadline or self.process.poll() is not None:
                raise SystemExit(f"bus bench: dbus-daemon did not listen: {self.log()}")
            time.sleep(0.02)

    @property
    def pid(self):
        return self.process.pid

    def log(self):
        with open(os.path.join(self.directory, "log")) as source:
            return source.read()[-2000:]

    def owner(self, name, env):
        """The unique name that owns `name` now, or None."""
        done = subprocess.run(["busctl", f"--address={self.address}", "call", "org.freedesktop.DBus",
                               "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetNameOwner", "s", name],
                              capture_output=True, text=True, env=env)
        return done.stdout.split()[-1].strip('"') if done.returncode == 0 else None

    def wait_for_name(self, name, env, timeout=15):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.owner(name, env):
                return
            time.sleep(0.05)
        raise SystemExit(f"bus bench: nobody owns {name} on the bench's bus")

    def close(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
        shutil.rmtree(self.directory, ignore_errors=True)
