"""What the D-Bus tests run: a private dbus-daemon with the system bus's rules and accmon's shipped policy, the real
accmond (``--simulate --dbus``) on it, and peers made of GLib's own client (glib_peer.py) or busctl (sd-bus), run as
the users a test picks.

Users: the tests run as root and act as three users that every Debian system has: ``www-data`` and ``nobody``,
members of the policy's group, and ``daemon``, who is not. The shipped policy names the group ``accmon``; the test
bus's copy names ``users`` instead (a group every Debian system has), so that no account is made on the host:
dbus-daemon takes a connection's groups from its socket (SO_PEERGROUPS), which ``setpriv --groups`` sets.
"""

from __future__ import annotations

import fcntl
import json
import os
import pwd
import queue
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

ROOT = Path(__file__).resolve().parents[2]
POLICY = ROOT / "packaging" / "dbus" / "org.accmon.Accmon1.conf"
INTERFACES = ROOT / "packaging" / "dbus" / "org.accmon.Accmon1.xml"
PEER_SCRIPT = Path(__file__).resolve().parent / "glib_peer.py"
BIN_DIR = Path(os.environ.get("ACCMON_BIN_DIR", ROOT / ".build" / "debug"))
ACCMOND = str(BIN_DIR / "accmond")
ACCMON = str(BIN_DIR / "accmon")
#: The group the test bus's policy lets talk to accmond (the shipped policy's `accmon`).
MEMBERS_GROUP = "users"
MEMBERS_GID = 100
SERVICE = "org.accmon.Accmon1"
MANAGER = "/org/accmon/Accmon1"
ACCESSORY_INTERFACE = "org.accmon.Accmon1.Accessory"
SUBSCRIPTION_INTERFACE = "org.accmon.Accmon1.Subscription"

#: The system bus's rules on a socket of the test's (with {socket}, {limits} and {policies} to fill in); the bus bench
#: (bench/bus_rig.py) reads the same file.
BUS_CONFIG = (Path(__file__).resolve().parent / "system-bus.conf.in").read_text()


def user_ids(name: str) -> tuple[int, int]:
    entry = pwd.getpwnam(name)
    return entry.pw_uid, entry.pw_gid


def as_user(user: Optional[str], member: bool = True, groups: Sequence[int] = ()) -> List[str]:
    """The command prefix that runs a program as `user` (``None``: root), with the members' group (and `groups`) or
    with no supplementary group at all."""
    if user is None:
        return []
    uid, gid = user_ids(user)
    wanted = ([MEMBERS_GID] if member else []) + list(groups)
    chosen = ["--groups", ",".join(map(str, wanted))] if wanted else ["--clear-groups"]
    return ["setpriv", "--reuid", str(uid), "--regid", str(gid), *chosen]


class PrivateBus:
    """A dbus-daemon with the system bus's rules and accmon's policy (group renamed), on a socket in a temporary
    directory every user can reach."""

    def __init__(self, limits: str = "") -> None:
        self.directory = tempfile.mkdtemp(prefix="accmon-bus-")
        os.chmod(self.directory, 0o755)
        self.socket = os.path.join(self.directory, "bus.sock")
        self.address = f"unix:path={self.socket}"
        policies = os.path.join(self.directory, "system.d")
        os.mkdir(policies)
        policy = POLICY.read_text().replace('group="accmon"', f'group="{MEMBERS_GROUP}"')
        Path(policies, "org.accmon.Accmon1.conf").write_text(policy)
        self.config = os.path.join(self.directory, "bus.conf")
        Path(self.config).write_text(BUS_CONFIG.format(socket=self.socket, policies=policies, limits=limits))
        self.log = os.path.join(self.directory, "dbus-daemon.log")
        self.process: Optional[subprocess.Popen[bytes]] = None
        self.start()

    def start(self) -> None:
        if os.path.exists(self.socket):
            os.unlink(self.socket)
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                ["dbus-daemon", "--config-file", self.config, "--nofork", "--nopidfile"], stdout=log, stderr=log
            )
        eventually(lambda: os.path.exists(self.socket), 10, "dbus-daemon to listen")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)

    def restart(self) -> None:
        self.stop()
        self.start()

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)

    def busctl(self, *arguments: str, user: Optional[str] = None, member: bool = True) -> "subprocess.CompletedProcess[str]":
        """busctl (sd-bus's own command) on this bus, as `user`."""
        return subprocess.run(
            [*as_user(user, member), "busctl", f"--address={self.address}", *arguments],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip


class GLibPeer:
    """glib_peer.py as `user`: a GLib D-Bus connection that records every message it receives."""

    def __init__(self, bus: PrivateBus, user: Optional[str] = None, member: bool = True, manager: bool = False,
                 groups: Sequence[int] = ()) -> None:  # fmt: skip
        command = [*as_user(user, member, groups), "/usr/bin/python3", str(PEER_SCRIPT), bus.address]
        if manager:
            command.append("--manager")
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1
        )
        self.lines: "queue.Queue[Optional[str]]" = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        ready = self._answer(20)
        assert ready.get("ready"), ready
        self.name: str = ready["name"]
        self.next_message = 0

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _answer(self, timeout: float) -> Dict[str, Any]:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"glib peer: no answer within {timeout} s") from None
        if line is None:
            stderr = self.process.stderr.read() if self.process.stderr else ""
            raise AssertionError(f"glib peer exited ({self.process.poll()}): {stderr}")
        return json.loads(line)

    def send(self, command: Dict[str, Any], timeout: float = 20) -> Dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        return self._answer(timeout)

    def call(self, path: str, interface: str, member: str, args: Optional[str] = None) -> Dict[str, Any]:
        return self.send({"op": "call", "path": path, "interface": interface, "member": member, "args": args})

    def ok(self, path: str, interface: str, member: str, args: Optional[str] = None) -> Any:
        answer = self.call(path, interface, member, args)
        assert "ok" in answer, f"{interface}.{member} on {path}: {answer}"
        return answer["ok"]

    def objects(self) -> Dict[str, Any]:
        return self.send({"op": "objects"})["ok"]

    def messages(self, new: bool = False) -> List[Dict[str, Any]]:
        """Every message received so far (or only those since the last call with `new`)."""
        answer = self.send({"op": "messages", "from": self.next_message if new else 0})
        if new:
            self.next_message = answer["next"]
        return answer["ok"]

    def signals(self, member: str, path: Optional[str] = None) -> List[Dict[str, Any]]:
        return [
            message for message in self.messages()
            if message["type"] == "signal" and message["member"] == member and (path is None or message["path"] == path)
        ]  # fmt: skip

    def subscribe(self, options: str = "{}") -> str:
        """Manager.Subscribe with options in GVariant text (``{'restore-id': <'x'>}``); the subscription's path."""
        return self.ok(MANAGER, "org.accmon.Accmon1.Manager", "Subscribe", f"(@a{{sv}} {options},)")[0]

    def auto_ack(self, path: str) -> None:
        self.send({"op": "auto_ack", "path": path})

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                self.send({"op": "quit"}, timeout=5)
            except (AssertionError, OSError):
                pass
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.kill()


def eventually(condition: Callable[[], Any], timeout: float, what: str, interval: float = 0.02) -> Any:
    """Polls `condition` until it is truthy (and returns it) or `timeout` seconds pass (and fails naming `what`)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def status(socket_path: str) -> Dict[str, Any]:
    """accmond's status as ``accmon status --json`` prints it (as root: every session)."""
    done = subprocess.run([ACCMON, "--socket", socket_path, "status", "--json"], capture_output=True, text=True,
                          timeout=30)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout)["status"])


def bus_sessions(socket_path: str) -> List[Dict[str, Any]]:
    """The live sessions `accmon status` marks as bus subscriptions (not those preserved for a restore id)."""
    return [client for client in status(socket_path)["clients"]
            if client.get("transport") == "bus" and client["state"] != "preserved"]  # fmt: skip


def accessory_path(connection_id: int) -> str:
    return f"{MANAGER}/accessories/{connection_id}"


def apply_events(view: Dict[int, Dict[str, Any]], events: Sequence[Sequence[Any]]) -> None:
    """Applies a subscription's ``Events`` (change, sequence, fields) to a view by connection id."""
    for change, _sequence, fields in events:
        connection = fields["ConnectionID"]
        if change == "connect":
            view[connection] = fields
        else:
            view.pop(connection, None)


class PrivatePty:
    """A pseudo-terminal in a devpts instance of its own mounted below `directory` (accmond's --simulated-nodes, where
    it enforces claims itself): its device node (what a simulated serial accessory names) and its master end, the
    other end of the line."""

    TIOCGPTN = 0x80045430
    TIOCSPTLCK = 0x40045431

    def __init__(self, directory: str, group: int = 20, mode: int = 0o660) -> None:
        self.mount_point = os.path.join(directory, "pts")
        os.makedirs(self.mount_point, exist_ok=True)
        subprocess.run(["mount", "-t", "devpts", "-o", f"newinstance,ptmxmode=0666,mode={mode:o},gid={group}",
                        "devpts", self.mount_point], check=True)  # fmt: skip
        self.master = os.open(os.path.join(self.mount_point, "ptmx"), os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
        fcntl.ioctl(self.master, self.TIOCSPTLCK, struct.pack("i", 0))
        number = struct.unpack("i", fcntl.ioctl(self.master, self.TIOCGPTN, struct.pack("i", 0)))[0]
        self.node = os.path.join(self.mount_point, str(number))
        # Raw, so that what one end writes reaches the other as it is.
        self.raw(self.master)

    @staticmethod
    def raw(descriptor: int) -> None:
        attributes = termios.tcgetattr(descriptor)
        attributes[3] &= ~(termios.ICANON | termios.ECHO)
        termios.tcsetattr(descriptor, termios.TCSANOW, attributes)

    def read(self, timeout: float = 5) -> bytes:
        ready, _, _ = select.select([self.master], [], [], timeout)
        return os.read(self.master, 4096) if ready else b""

    def close(self) -> None:
        os.close(self.master)
        subprocess.run(["umount", "-l", self.mount_point], check=False)


def open_descriptors(pid: int) -> int:
    """How many descriptors process `pid` has open."""
    return len(os.listdir(f"/proc/{pid}/fd"))


def python_path() -> str:
    return str(ROOT / "clients" / "python" / "src")


if python_path() not in sys.path:
    sys.path.insert(0, python_path())
