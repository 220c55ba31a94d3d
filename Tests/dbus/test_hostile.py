"""Bad input and hostile peers on the bus: every wrong call gets an error of accmon's own saying where and why; a peer
that floods calls, never reads, or makes a thousand subscriptions delays no other user's events and grows accmond's
memory by no more than its budget."""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any, Callable, Dict, List

import pytest
from busrig import (
    ACCESSORY_INTERFACE, MANAGER, SUBSCRIPTION_INTERFACE, GLibPeer, PrivateBus, accessory_path, bus_sessions, eventually,
    status,
)
from conftest import start_daemon

from accmon.simulator import SimulatedDaemon

ERROR = "org.accmon.Accmon1.Error."


def test_wrong_calls_are_refused_with_accmons_errors_saying_where_and_why(
    daemon: SimulatedDaemon, peers: Callable[..., GLibPeer]
) -> None:
    peer = peers(user="www-data")
    gps = accessory_path(daemon.plug("usb", vendor="1546", product="01a7"))
    properties = "org.freedesktop.DBus.Properties"
    manager = "org.accmon.Accmon1.Manager"
    cases: List[tuple[str, str, str, Any, str, str]] = [
        (MANAGER, manager, "Subscribe", "('usb',)", "InvalidArguments", "takes arguments of type 'a{sv}', not 's'"),
        (MANAGER, manager, "Subscribe", None, "InvalidArguments", "not ''"),
        (MANAGER, manager, "Explode", None, "UnknownMethod", "no method Explode"),
        (MANAGER, "org.example.Nope", "Hello", None, "UnknownInterface", "no interface org.example.Nope"),
        ("/org/accmon/Accmon1/nothing", manager, "Subscribe", None, "UnknownObject", "no such object"),
        (accessory_path(999999), properties, "GetAll", f"('{ACCESSORY_INTERFACE}',)", "UnknownObject", "no such"),
        (gps, properties, "Get", f"('{ACCESSORY_INTERFACE}', 'Colour')", "UnknownProperty", "no property 'Colour'"),
        (gps, properties, "Get", "('org.example.Nope', 'Name')", "UnknownInterface", "no interface"),
        (gps, properties, "Set", f"('{ACCESSORY_INTERFACE}', 'Name', <'x'>)", "ReadOnlyProperty", "Name is read-only"),
        (gps, properties, "Set", f"('{ACCESSORY_INTERFACE}', 'Colour', <'x'>)", "UnknownProperty", "'Colour'"),
        (MANAGER, manager, "Subscribe", "({'colour': <'red'>},)", "InvalidOption", "unknown option 'colour'"),
        (MANAGER, manager, "Subscribe", "({'kind': <uint32 1>},)", "InvalidOption", "'kind' must be of type 's'"),
        (MANAGER, manager, "Subscribe", "({'kind': <'toaster'>},)", "InvalidOption", "'toaster' is none of"),
        (MANAGER, manager, "Subscribe", "({'vendor-id': <'12345'>},)", "InvalidOption", "not 1 to 4 hex digits"),
        (MANAGER, manager, "Subscribe", "({'suspend-while-inactive': <true>},)", "NoLoginSessions", "logind does not run"),
        (MANAGER, manager, "Reload", None, "AccessDenied", "neither root nor an admin"),
    ]
    for path, interface, member, args, name, words in cases:
        answer = peer.call(path, interface, member, args)
        assert answer.get("error") == ERROR + name, (member, args, answer)
        assert words in answer["message"], (member, args, answer)
    subscription = peer.subscribe()
    answer = peer.call(subscription, SUBSCRIPTION_INTERFACE, "Ack", "('7',)")
    assert answer.get("error") == ERROR + "InvalidArguments", answer
    # After all that, the peer is served as before.
    assert gps in peer.ok(MANAGER, "org.freedesktop.DBus.ObjectManager", "GetManagedObjects")[0]


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def _every_event_reaches(peer: GLibPeer, path: str, connections: List[int]) -> bool:
    seen = {e[2]["ConnectionID"] for s in peer.signals("Events", path) for e in s["body"][0] if e[0] == "connect"}
    return set(connections) <= seen


#: The output budget of the hostile test's accmond (--max-output-bytes): what all sessions' buffers may hold.
OUTPUT_BUDGET = 4 << 20


def test_flooding_hoarding_and_silent_peers_delay_no_other_users_events(
    bus: PrivateBus, monkeypatch: pytest.MonkeyPatch, peers: Callable[..., GLibPeer]
) -> None:
    daemon = start_daemon(bus, monkeypatch, ["--max-output-bytes", str(OUTPUT_BUDGET), "--max-bus-unacknowledged", str(2 << 20)])
    try:
        assert daemon.pid is not None
        healthy = peers(user="www-data", manager=True)
        healthy_path = healthy.subscribe()
        healthy.auto_ack(healthy_path)
        for n in range(50):
            daemon.plug("usb", vendor="1546", product=f"{n:04x}", serial=f"base{n}")
        started_rss = _rss_kib(daemon.pid)
        hostile = peers(user="nobody", manager=True)
        # A thousand subscriptions: the user's share of sessions (--max-connections-per-user, 64), then refusals.
        hostile.send({"op": "flood", "count": 1000, "path": MANAGER, "interface": "org.accmon.Accmon1.Manager",
                      "member": "Subscribe", "args": "(@a{sv} {},)"})  # fmt: skip
        results = eventually(
            lambda: sum(hostile.send({"op": "flood_result"})["ok"].values()) == 1000
            and hostile.send({"op": "flood_result"})["ok"], 60, "the thousand Subscribe replies")
        # The rest are refused by accmond (its limit) or by dbus-daemon first (its pending replies per connection).
        assert results.pop("ok") == 64, results
        assert results.get(ERROR + "LimitReached", 0) > 0, results
        assert set(results) <= {ERROR + "LimitReached", "org.freedesktop.DBus.Error.LimitsExceeded"}, results
        # Thousands of calls at once, then the peer stops reading (SIGSTOP) with its 64 subscriptions unacknowledged.
        hostile.send({"op": "flood", "count": 3000, "path": MANAGER, "interface": "org.freedesktop.DBus.ObjectManager",
                      "member": "GetManagedObjects", "args": None})  # fmt: skip
        os.kill(hostile.process.pid, signal.SIGSTOP)
        try:
            storm: List[int] = []
            for n in range(400):
                storm.append(daemon.plug("usb", vendor="1546", product=f"{n:04x}", serial=f"storm{n}"))
                if n % 2:
                    daemon.unplug(storm[-2])
            # Every event reached the healthy subscriber and its object manager.
            eventually(lambda: _every_event_reaches(healthy, healthy_path, storm), 30, "every storm event")
            live = {accessory.connection_id for accessory in daemon.list()}
            eventually(lambda: set(healthy.objects()) == {accessory_path(c) for c in live}, 30, "the objects")
            grown = _rss_kib(daemon.pid) - started_rss
            # The hoarder's 64 sessions hold at most the output budget between them (their queues coalesce to
            # 2 x the accessories); what the bus thread holds for a peer that does not read is bounded by dbus-daemon,
            # which takes what accmond sends and queues it itself.
            assert grown < 2 * OUTPUT_BUDGET // 1024 + 16 * 1024, f"RSS grew by {grown} KiB"
        finally:
            os.kill(hostile.process.pid, signal.SIGCONT)
        # Another user may still subscribe; the hoarder's sessions go with it.
        hostile.kill()
        eventually(lambda: len(bus_sessions(daemon.socket)) <= 1, 15, "the hoarder's subscriptions to end")
        peers(user="daemon").subscribe()
    finally:
        daemon.close()


def test_an_app_leaving_the_bus_ends_its_subscriptions(
    daemon: SimulatedDaemon, peers: Callable[..., GLibPeer]
) -> None:
    peer = peers(user="www-data")
    for _ in range(3):
        peer.subscribe()
    kept = peer.subscribe("{'restore-id': <'keep'>}")
    assert len(bus_sessions(daemon.socket)) == 4
    peer.kill()
    eventually(lambda: len(bus_sessions(daemon.socket)) == 0, 10, "the subscriptions to end")
    # The one with a restore id is preserved for the user.
    clients = status(daemon.socket)["clients"]
    assert [c["sessionID"] for c in clients if c["state"] == "preserved"] == ["restore:keep"], (kept, clients)


def test_a_storm_to_many_subscriptions_keeps_the_bus_connection(
    bus: PrivateBus, monkeypatch: pytest.MonkeyPatch, peers: Callable[..., GLibPeer]
) -> None:
    # 500 subscriptions (5 peers of one user, 100 each) and 300 plugs: 150,000 Events signals, more than dbus-daemon
    # takes at once. A bus that reads, however far behind, is not dropped (accmond dropped it at 50,000 messages
    # waiting, every peer then counting as gone); every subscription gets every connect.
    daemon = start_daemon(bus, monkeypatch, ["--max-connections-per-user", "512"])
    try:
        subscribers = [peers(user="www-data") for _ in range(5)]
        paths: Dict[GLibPeer, List[str]] = {}
        for peer in subscribers:
            paths[peer] = [peer.subscribe() for _ in range(100)]
            for path in paths[peer]:
                peer.auto_ack(path)
        plugged = [daemon.plug("usb", vendor="1546", product=f"{n:04x}", serial=f"many{n}") for n in range(300)]
        for peer in subscribers:
            for path in paths[peer][::33]:
                eventually(lambda: "connection lost" in daemon.log() or _every_event_reaches(peer, path, plugged), 60,
                           f"every connect at {path}")  # fmt: skip
                assert "connection lost" not in daemon.log(), daemon.log()[-1000:]
        assert len(bus_sessions(daemon.socket)) == 500
    finally:
        daemon.close()


def test_a_bus_that_takes_nothing_is_left_and_joined_again(
    bus: PrivateBus, monkeypatch: pytest.MonkeyPatch, peers: Callable[..., GLibPeer]
) -> None:
    # dbus-daemon stopped (SIGSTOP) while accmond has signals for a watcher: after --max-bus-stall without the bus
    # taking anything, accmond closes the connection, and serves again on a new one once the bus is back.
    daemon = start_daemon(bus, monkeypatch, ["--max-bus-stall", "2"])
    try:
        # Three watchers and 4,000 plugs: 12,000 InterfacesAdded of about 2 KiB, more than the socket to dbus-daemon
        # holds (9 MB here) and sd-bus's queue (1,024 messages) together.
        for _ in range(3):
            peers(user="www-data", manager=True).objects()
        os.kill(bus.process.pid, signal.SIGSTOP)
        try:
            for n in range(4000):
                daemon.plug("usb", vendor="1546", product=f"{n:04x}", serial=f"stall{n}")
            eventually(lambda: "the bus took nothing" in daemon.log(), 30, "accmond to find the bus stuck")
        finally:
            os.kill(bus.process.pid, signal.SIGCONT)
        eventually(lambda: daemon.log().count("bus: serving org.accmon.Accmon1") == 2, 60, "accmond to serve again")
        # A peer of the bus as it is now is served, with every accessory.
        assert len(peers(user="www-data", manager=True).objects()) == 4000
    finally:
        daemon.close()
