"""The examples docs/DBUS.md shows, run as written: docs/examples/dbus_watch.py (GLib), gdbus and busctl commands."""

from __future__ import annotations

import os
import queue
import subprocess
import threading
from typing import Callable, List, Optional

from busrig import ACCMON, ROOT, PrivateBus, as_user, eventually

from accmon.simulator import SimulatedDaemon

EXAMPLE = ROOT / "docs" / "examples" / "dbus_watch.py"


class Lines:
    """A program's standard output, line by line, as it comes."""

    def __init__(self, command: List[str], environment: dict) -> None:
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                        env=environment)  # fmt: skip
        self.lines: "queue.Queue[Optional[str]]" = queue.Queue()
        self.seen: List[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def wait_for(self, predicate: Callable[[str], bool], timeout: float = 15) -> str:
        for line in self.seen:
            if predicate(line):
                return line
        while True:
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"no such line within {timeout} s; seen: {self.seen}") from None
            if line is None:
                stderr = self.process.stderr.read() if self.process.stderr else ""
                raise AssertionError(f"the example exited ({self.process.poll()}); seen {self.seen}; {stderr}")
            self.seen.append(line)
            if predicate(line):
                return line

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


def test_the_glib_example_watches_and_gets_what_it_missed(bus: PrivateBus, daemon: SimulatedDaemon) -> None:
    environment = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=bus.address)
    command = [*as_user("www-data"), "/usr/bin/python3", str(EXAMPLE), "--restore-id", "demo"]
    present = daemon.plug("usb", vendor="1546", product="01a7", name="u-blox GPS")
    first = Lines(command, environment)
    try:
        first.wait_for(lambda line: line.startswith(f"present {present}: usb 1546:01a7 'u-blox GPS' com.acme.gps"))
        first.wait_for(lambda line: line.startswith("snapshot at") and f"[{present}]" in line)
        cable = daemon.plug("serial", vendor="0403", product="6001", name="Cable")
        first.wait_for(lambda line: line.startswith(f"added {cable}: serial 0403:6001 'Cable' com.acme.cable"))
        first.wait_for(lambda line: line.startswith("event") and f"connect {cable}:" in line)
        daemon.unplug(present)
        first.wait_for(lambda line: line == f"removed /org/accmon/Accmon1/accessories/{present}")
        first.wait_for(lambda line: f"disconnect {present}:" in line)
    finally:
        first.stop()
    # Away: what changes now is kept for it, and given to it once when it is back.
    eventually(lambda: "restore:demo" in subprocess.run(
        [ACCMON, "--socket", daemon.socket, "status"], capture_output=True,
        text=True).stdout, 10, "the session preserved")  # fmt: skip
    missed = daemon.plug("usb", vendor="1546", product="0002", name="Missed")
    second = Lines(command, environment)
    try:
        second.wait_for(lambda line: line.startswith("snapshot at") and "(restored)" in line and f"{cable}" in line)
        second.wait_for(lambda line: line.startswith("event") and f"connect {missed}:" in line)
        assert not [line for line in second.seen if f"connect {cable}:" in line], second.seen
    finally:
        second.stop()


def test_the_gdbus_and_busctl_commands_of_the_docs(bus: PrivateBus, daemon: SimulatedDaemon) -> None:
    environment = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=bus.address)
    gps = daemon.plug("usb", vendor="1546", product="01a7", name="u-blox GPS")

    def run(*command: str) -> str:
        done = subprocess.run([*as_user("www-data"), *command], capture_output=True, text=True, env=environment,
                              timeout=30)  # fmt: skip
        assert done.returncode == 0, (command, done.stderr)
        return done.stdout

    managed = run("gdbus", "call", "--system", "--dest", "org.accmon.Accmon1", "--object-path",
                  "/org/accmon/Accmon1", "--method", "org.freedesktop.DBus.ObjectManager.GetManagedObjects")
    assert f"objectpath '/org/accmon/Accmon1/accessories/{gps}'" in managed and "'u-blox GPS'" in managed
    name = run("gdbus", "call", "--system", "--dest", "org.accmon.Accmon1", "--object-path",
               f"/org/accmon/Accmon1/accessories/{gps}", "--method", "org.freedesktop.DBus.Properties.Get",
               "org.accmon.Accmon1.Accessory", "Name")
    assert name.strip() == "(<'u-blox GPS'>,)"
    tree = run("busctl", "--system", "tree", "org.accmon.Accmon1")
    assert f"/org/accmon/Accmon1/accessories/{gps}" in tree
    kind = run("busctl", "--system", "get-property", "org.accmon.Accmon1", f"/org/accmon/Accmon1/accessories/{gps}",
               "org.accmon.Accmon1.Accessory", "Kind")
    assert kind.strip() == 's "usb"'
    subscribed = run("busctl", "--system", "call", "org.accmon.Accmon1", "/org/accmon/Accmon1",
                     "org.accmon.Accmon1.Manager", "Subscribe", "a{sv}", "1", "kind", "s", "usb")
    assert subscribed.startswith('o "/org/accmon/Accmon1/subscriptions/')




OPEN_EXAMPLE = ROOT / "docs" / "examples" / "dbus_open.py"


def test_the_open_example_waits_opens_reads_and_is_told_when_broken(bus: PrivateBus, daemon: SimulatedDaemon) -> None:
    from busrig import PrivatePty

    environment = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=bus.address)
    pty = PrivatePty(daemon.nodes_dir, group=20, mode=0o660)
    example = Lines([*as_user("www-data", groups=[20]), "/usr/bin/python3", str(OPEN_EXAMPLE), "com.acme.gps"],
                    environment)  # fmt: skip
    try:
        example.wait_for(lambda line: line == "waiting for an accessory that speaks com.acme.gps")
        connection = daemon.plug("serial", vendor="1546", product="01a8", nodes=[pty.node])
        example.wait_for(lambda line: line.startswith(f"opened /org/accmon/Accmon1/accessories/{connection} as "))
        os.write(pty.master, b"$GPGGA,1")
        example.wait_for(lambda line: line == "read $GPGGA,1")
        daemon.break_claim(connection, reason="survey done")
        example.wait_for(lambda line: line == "claim broken: survey done")
        assert example.process.wait(10) == 0
    finally:
        if example.process.poll() is None:
            example.stop()
        pty.close()
