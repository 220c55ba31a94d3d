"""Accessory.Open: a claimed node's descriptor handed to the caller over the bus (EASession's analog), on the
simulated accessories' ptys accmond enforces itself (--simulated-nodes). The test bus has no polkit: a caller who
could not open the node by its own permissions is refused, one who could gets the descriptor without seeing /dev."""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Dict, Iterator

import pytest
from busrig import ACCESSORY_INTERFACE, MANAGER, GLibPeer, PrivatePty, accessory_path, eventually, open_descriptors

from accmon.simulator import SimulatedDaemon

DIALOUT = 20
CLAIM = "org.accmon.Accmon1.Claim"
ERROR = "org.accmon.Accmon1.Error."


@pytest.fixture
def pty(daemon: SimulatedDaemon) -> Iterator[PrivatePty]:
    made = PrivatePty(daemon.nodes_dir, group=DIALOUT, mode=0o660)
    try:
        yield made
    finally:
        made.close()


def _serial(daemon: SimulatedDaemon, pty: PrivatePty, serial: str = "GPS1") -> int:
    return daemon.plug("serial", vendor="1546", product="01a8", name="GPS console", serial=serial, nodes=[pty.node],
                       port="1-4")  # fmt: skip


def _open(peer: GLibPeer, connection: int, node: str = "", options: str = "{}") -> Dict[str, Any]:
    return peer.call(accessory_path(connection), ACCESSORY_INTERFACE, "Open", f"('{node}', @a{{sv}} {options})")


def _claim_property(peer: GLibPeer, path: str, name: str) -> Any:
    return peer.ok(path, "org.freedesktop.DBus.Properties", "Get", f"('{CLAIM}', '{name}')")[0]


def test_open_hands_a_working_descriptor_of_the_held_node(
    daemon: SimulatedDaemon, pty: PrivatePty, peers: Callable[..., GLibPeer]
) -> None:
    app = peers(user="www-data", groups=[DIALOUT], manager=True)
    connection = _serial(daemon, pty)
    opened = _open(app, connection)
    assert "ok" in opened, opened
    descriptor, claim = opened["ok"][0]["fd"], opened["ok"][1]
    assert claim.startswith("/org/accmon/Accmon1/claims/")
    app.send({"op": "fd_write", "fd": descriptor, "data": "ping"})
    assert pty.read() == b"ping"
    os.write(pty.master, b"pong")
    assert app.send({"op": "fd_read", "fd": descriptor})["ok"] == "pong"
    assert _claim_property(app, claim, "Holder") == "www-data"
    assert _claim_property(app, claim, "State") == "held"
    assert _claim_property(app, claim, "Accessories") == [accessory_path(connection)]
    # Everyone who sees the accessory sees it claimed; accmon claims lists it as any claim.
    eventually(lambda: app.objects()[accessory_path(connection)][ACCESSORY_INTERFACE]["ClaimHolder"] == "www-data",
               10, "the accessory's ClaimHolder")  # fmt: skip
    assert [c.holder.user for c in daemon.claims().claims] == ["www-data"]
    # A second Open by the holder: another descriptor on the same claim.
    again = _open(app, connection, node=pty.node)
    assert again["ok"][1] == claim and again["ok"][0]["fd"] != descriptor
    app.ok(claim, CLAIM, "Release")
    assert not daemon.claims().claims
    eventually(lambda: app.objects()[accessory_path(connection)][ACCESSORY_INTERFACE]["ClaimHolder"] == "", 10,
               "the release seen")  # fmt: skip


def test_another_user_is_refused_naming_the_holder_or_waits_its_turn(
    daemon: SimulatedDaemon, pty: PrivatePty, peers: Callable[..., GLibPeer]
) -> None:
    holder = peers(user="www-data", groups=[DIALOUT])
    other = peers(user="nobody", groups=[DIALOUT])
    connection = _serial(daemon, pty)
    claim = _open(holder, connection, options="{'reason': <'flashing'>}")["ok"][1]
    refused = _open(other, connection)
    assert refused.get("error") == ERROR + "Held", refused
    assert "www-data" in refused["message"] and "flashing" in refused["message"]
    contention = eventually(lambda: holder.signals("Contention", claim), 10, "the holder told")
    assert contention[0]["body"][0]["by-uid"] == 65534
    # With wait, in line: granted when the holder releases.
    other.send({"op": "async_call", "tag": "wait", "path": accessory_path(connection), "interface": ACCESSORY_INTERFACE,
                "member": "Open", "args": "('', {'wait': <true>})"})  # fmt: skip
    eventually(lambda: _claim_property(holder, claim, "Waiting") == 1, 10, "the waiter counted")
    assert other.send({"op": "async_result", "tag": "wait"})["ok"] is None
    holder.ok(claim, CLAIM, "Release")
    result = eventually(lambda: other.send({"op": "async_result", "tag": "wait"})["ok"], 10, "the waiter served")
    assert "ok" in result, result
    other.send({"op": "fd_write", "fd": result["ok"][0]["fd"], "data": "next"})
    assert pty.read() == b"next"


def test_the_holder_killed_releases_at_once_and_the_waiter_is_served(
    daemon: SimulatedDaemon, pty: PrivatePty, peers: Callable[..., GLibPeer]
) -> None:
    holder = peers(user="www-data", groups=[DIALOUT])
    waiter = peers(user="nobody", groups=[DIALOUT])
    connection = _serial(daemon, pty)
    assert "ok" in _open(holder, connection)
    waiter.send({"op": "async_call", "tag": "wait", "path": accessory_path(connection), "interface": ACCESSORY_INTERFACE,
                 "member": "Open", "args": "('', {'wait': <true>})"})  # fmt: skip
    eventually(lambda: daemon.claims().waiters, 10, "the waiter in line")
    holder.kill()
    result = eventually(lambda: waiter.send({"op": "async_result", "tag": "wait"})["ok"], 10, "the waiter served")
    assert "ok" in result, result
    assert [c.holder.user for c in daemon.claims().claims] == ["nobody"]


def test_a_broken_claim_is_told_and_its_descriptor_hung_up(
    daemon: SimulatedDaemon, pty: PrivatePty, peers: Callable[..., GLibPeer]
) -> None:
    app = peers(user="www-data", groups=[DIALOUT])
    admin = peers()
    connection = _serial(daemon, pty)
    opened = _open(app, connection)["ok"]
    descriptor, claim = opened[0]["fd"], opened[1]
    admin.ok(MANAGER, "org.accmon.Accmon1.Manager", "ReleaseOther", f"(objectpath '{accessory_path(connection)}', 'bench needed')")
    broken = eventually(lambda: app.signals("Broken", claim), 10, "Broken")[0]["body"][0]
    assert broken["kind"] == "broken" and broken["reason"] == "bench needed"
    # TIOCVHANGUP: the descriptor is dead (a read ends, a write fails).
    read = app.send({"op": "fd_read", "fd": descriptor, "timeout": 5})
    assert read.get("ok") == "" or read.get("error") == "EIO", read
    wrote = app.send({"op": "fd_write", "fd": descriptor, "data": "x"})
    assert wrote.get("error") == "peer-exception" and "Input/output error" in wrote["message"], wrote
    assert app.call(claim, CLAIM, "Release").get("error") == ERROR + "UnknownObject"


def test_accmond_killed_keeps_a_bus_holders_claim_while_it_is_on_the_bus(
    bus: Any, daemon: SimulatedDaemon, pty: PrivatePty, peers: Callable[..., GLibPeer]
) -> None:
    from conftest import wait_for_name

    app = peers(user="www-data", groups=[DIALOUT])
    connection = _serial(daemon, pty)
    descriptor, claim = (lambda ok: (ok[0]["fd"], ok[1]))(_open(app, connection)["ok"])
    time.sleep(0.3)  # the claim on disk
    daemon.kill()
    daemon.start()
    wait_for_name(bus, daemon)
    eventually(lambda: [c.holder.user for c in daemon.claims().claims] == ["www-data"], 15, "the claim kept")
    eventually(lambda: "ok" in app.call(claim, "org.freedesktop.DBus.Properties", "Get", f"('{CLAIM}', 'State')"), 15,
               "the claim object back for its holder")  # fmt: skip
    # Never cut: the descriptor works on.
    app.send({"op": "fd_write", "fd": descriptor, "data": "still"})
    assert pty.read() == b"still"
    # The holder leaves: its claim ends at once.
    app.kill()
    eventually(lambda: not daemon.claims().claims, 10, "the claim ended with its holder")


def test_opens_that_cannot_be_are_refused_saying_why(
    daemon: SimulatedDaemon, pty: PrivatePty, peers: Callable[..., GLibPeer]
) -> None:
    connection = _serial(daemon, pty)
    outsider = peers(user="daemon")  # in the group of the bus's policy, not in dialout
    refused = _open(outsider, connection)
    assert refused.get("error") == ERROR + "NotAuthorized", refused
    assert "polkit" in refused["message"] and "own permissions" in refused["message"]
    app = peers(user="www-data", groups=[DIALOUT])
    cases = [
        (_open(app, connection, node="/dev/ttyS0"), "NoSuchNode", "is not a node of accessory"),
        (app.call(accessory_path(connection), ACCESSORY_INTERFACE, "OpenProtocol", "('com.other', @a{sv} {})"),
         "NoSuchProtocol", "speaks com.acme.gps"),
        (_open(app, connection, options="{'colour': <'red'>}"), "InvalidOption", "unknown option 'colour'"),
        (_open(app, connection, options="{'wait': <'yes'>}"), "InvalidOption", "'wait' must be of type 'b'"),
        (_open(app, connection, options="{'release-when-inactive': <true>}"), "NoLoginSessions", "logind"),
        (_open(app, 999999), "UnknownObject", "no such object"),
    ]  # fmt: skip
    for answer, name, words in cases:
        assert answer.get("error") == ERROR + name, answer
        assert words in answer["message"], answer
    # OpenProtocol by the accessory's protocol string opens its node.
    by_protocol = app.call(accessory_path(connection), ACCESSORY_INTERFACE, "OpenProtocol", "('com.acme.gps', @a{sv} {})")
    assert "ok" in by_protocol, by_protocol


def test_a_thousand_opens_and_releases_leave_no_descriptor_behind(
    daemon: SimulatedDaemon, pty: PrivatePty, peers: Callable[..., GLibPeer]
) -> None:
    app = peers(user="www-data", groups=[DIALOUT])
    connection = _serial(daemon, pty)
    assert daemon.pid is not None
    opened = _open(app, connection)["ok"]
    app.send({"op": "fd_close", "fd": opened[0]["fd"]})
    app.ok(opened[1], CLAIM, "Release")
    before = open_descriptors(daemon.pid)
    # A thousand opens: 100 claims of ten descriptors each, every descriptor closed and every claim released.
    cycles = app.send({"op": "open_cycles", "path": accessory_path(connection), "claims": 100, "opens": 10}, timeout=120)
    assert cycles == {"ok": 1000}, cycles
    assert open_descriptors(daemon.pid) == before
    # A waiter that leaves the bus before its turn: nothing is granted to it, nothing leaks.
    holder = peers(user="nobody", groups=[DIALOUT])
    held = _open(holder, connection)["ok"]
    app.send({"op": "async_call", "tag": "w", "path": accessory_path(connection), "interface": ACCESSORY_INTERFACE,
              "member": "Open", "args": "('', {'wait': <true>})"})  # fmt: skip
    eventually(lambda: daemon.claims().waiters, 10, "the waiter in line")
    app.kill()
    eventually(lambda: not daemon.claims().waiters, 10, "the waiter gone from the line")
    holder.ok(held[1], CLAIM, "Release")
    assert not daemon.claims().claims
    assert open_descriptors(daemon.pid) == before


def test_callers_that_leave_at_any_step_of_an_open_leave_nothing_behind(
    daemon: SimulatedDaemon, pty: PrivatePty, peers: Callable[..., GLibPeer]
) -> None:
    # 300 callers, each on a connection of its own, send an Open (waiting in line) and leave the bus 0 to 30 ms
    # later: before accmond reads the call, while it checks, while they wait in line, once claimed and while the node
    # is opened, or with the reply and its descriptor on the way. Each claim ends with its caller, no descriptor stays
    # in accmond, and the accessory is free after.
    app = peers(user="www-data", groups=[DIALOUT])
    connection = _serial(daemon, pty)
    assert daemon.pid is not None
    first = _open(app, connection)["ok"]
    app.send({"op": "fd_close", "fd": first[0]["fd"]})
    app.ok(first[1], CLAIM, "Release")
    before = open_descriptors(daemon.pid)
    log_start = os.path.getsize(daemon.log_path)
    left = app.send({"op": "open_and_leave", "path": accessory_path(connection), "count": 300, "spread": 300}, timeout=120)
    assert left == {"ok": 300}, left
    eventually(lambda: not daemon.claims().claims and not daemon.claims().waiters, 10, "every caller's claim ended")
    eventually(lambda: open_descriptors(daemon.pid) == before, 10, "accmond's descriptors as before")
    # The accessory is free: the next caller gets it at once.
    again = _open(app, connection)
    assert "ok" in again, again
    # Many callers had their claim (granted or in line) before they left: the windows after the claim were
    # exercised, not only the ones before.
    with open(daemon.log_path, encoding="utf-8", errors="replace") as log:
        ended = log.read()[log_start:].count("claim ended, its holder gone:")
    assert ended >= 60, f"only {ended} of 300 callers had a claim before leaving"


def test_accmon_open_runs_a_command_with_the_descriptor_as_fd_3(
    bus: Any, daemon: SimulatedDaemon, pty: PrivatePty, peers: Callable[..., GLibPeer]
) -> None:
    import subprocess

    from busrig import ACCMON, as_user

    connection = _serial(daemon, pty)
    environment = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=bus.address)

    def accmon_open(*arguments: str, user: str = "www-data", groups: tuple = (DIALOUT,), **popen: Any) -> Any:
        return subprocess.Popen([*as_user(user, groups=list(groups)), ACCMON, "open", *arguments], env=environment,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)  # fmt: skip

    # The command writes through descriptor 3 and reads the answer from it.
    run = accmon_open("--connection", str(connection), "--", "sh", "-c",
                      'echo "fd=$ACCMON_OPEN_FD node=$ACCMON_OPEN_NODE"; printf hi >&3; head -c 5 <&3')  # fmt: skip
    assert pty.read() == b"hi"
    os.write(pty.master, b"there")
    out, err = run.communicate(timeout=15)
    assert run.returncode == 0, err
    assert out == f"fd=3 node={pty.node}\nthere"
    eventually(lambda: not daemon.claims().claims, 10, "the claim released when the command ended")
    # Held by another: exit 75, naming the holder; with --kind and friends instead of --connection.
    holder = peers(user="nobody", groups=[DIALOUT])
    held = _open(holder, connection)["ok"]
    refused = accmon_open("--kind", "serial", "--vendor", "1546", "--", "true")
    out, err = refused.communicate(timeout=15)
    assert refused.returncode == 75 and "nobody" in err and "Held" in err, (refused.returncode, err)
    holder.ok(held[1], CLAIM, "Release")
    # Not permitted (no dialout, no polkit here): 77.
    denied = accmon_open("--connection", str(connection), "--", "true", groups=())
    out, err = denied.communicate(timeout=15)
    assert denied.returncode == 77 and "polkit" in err, (denied.returncode, err)
    # Broken while it runs: the command gets SIGTERM, accmon open exits 75.
    running = accmon_open("--connection", str(connection), "--", "sh", "-c", "printf up >&3; exec sleep 60")
    assert pty.read(timeout=15) == b"up"
    daemon.break_claim(connection, reason="maintenance")
    out, err = running.communicate(timeout=15)
    assert running.returncode == 75 and "broken" in err and "maintenance" in err, (running.returncode, err)


def test_a_user_with_too_many_opens_in_line_is_refused(
    bus: Any, monkeypatch: pytest.MonkeyPatch, peers: Callable[..., GLibPeer]
) -> None:
    from conftest import start_daemon

    daemon = start_daemon(bus, monkeypatch, ["--max-connections-per-user", "4"])
    pty = PrivatePty(daemon.nodes_dir, group=DIALOUT, mode=0o660)
    try:
        connection = _serial(daemon, pty)
        holder = peers(user="nobody", groups=[DIALOUT])
        assert "ok" in _open(holder, connection)
        greedy = peers(user="www-data", groups=[DIALOUT])
        for tag in range(4):
            greedy.send({"op": "async_call", "tag": str(tag), "path": accessory_path(connection),
                         "interface": ACCESSORY_INTERFACE, "member": "Open", "args": "('', {'wait': <true>})"})  # fmt: skip
        eventually(lambda: len(daemon.claims().waiters) == 4, 10, "four in line")
        refused = _open(greedy, connection, options="{'wait': <true>}")
        assert refused.get("error") == ERROR + "LimitReached", refused
        # Another user is not held back by it.
        assert _open(peers(user="daemon", groups=[DIALOUT]), connection).get("error") == ERROR + "Held"
    finally:
        pty.close()
        daemon.close()
