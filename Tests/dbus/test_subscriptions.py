"""Bus subscriptions are sessions like the socket's: acknowledged, suspended and coalesced, restored by their restore
id (one namespace per user across both transports) after the subscriber or accmond restarts."""

from __future__ import annotations

import json
import os
import random
import socket
import threading
import time
from typing import Any, Callable, Dict, List

import pytest
from busrig import SUBSCRIPTION_INTERFACE, GLibPeer, PrivateBus, bus_sessions, eventually
from conftest import start_daemon, wait_for_name

from accmon.simulator import SimulatedDaemon


def _events(peer: GLibPeer, path: str) -> List[List[Any]]:
    return [event for signal in peer.signals("Events", path) for event in signal["body"][0]]


def _view(peer: GLibPeer, path: str) -> Dict[int, int]:
    """Connection → last sequence, from the (last) Snapshot and the Events after it."""
    view: Dict[int, int] = {}
    for message in peer.messages():
        if message["type"] != "signal" or message["path"] != path:
            continue
        if message["member"] == "Snapshot":
            view = {fields["ConnectionID"]: message["body"][0] for fields in message["body"][1]}
        elif message["member"] == "Events":
            for change, sequence, fields in message["body"][0]:
                if change == "connect":
                    assert fields["ConnectionID"] not in view, f"connect of {fields['ConnectionID']} twice"
                    view[fields["ConnectionID"]] = sequence
                else:
                    assert fields["ConnectionID"] in view, f"disconnect of {fields['ConnectionID']}, not connected"
                    del view[fields["ConnectionID"]]
    return view


def _property(peer: GLibPeer, path: str, name: str) -> Any:
    return peer.ok(path, "org.freedesktop.DBus.Properties", "Get", f"('{SUBSCRIPTION_INTERFACE}', '{name}')")[0]


def test_a_subscriber_that_does_not_acknowledge_is_suspended_and_its_events_coalesced(
    bus: PrivateBus, monkeypatch: pytest.MonkeyPatch, peers: Callable[..., GLibPeer]
) -> None:
    daemon = start_daemon(bus, monkeypatch, ["--max-bus-unacknowledged", "4096"])
    try:
        slow = peers(user="nobody")
        healthy = peers(user="www-data")
        slow_path = slow.subscribe()
        healthy_path = healthy.subscribe()
        healthy.auto_ack(healthy_path)
        # Each change once the healthy subscriber has the one before (its buffer holds a handful of events too).
        plugged: List[int] = []
        for n in range(40):
            plugged.append(daemon.plug("usb", vendor="1546", product=f"{n:04x}", serial=f"N{n}"))
            eventually(lambda: plugged[-1] in _view(healthy, healthy_path), 10, "the healthy subscriber's connect")
        for connection in plugged[:30]:
            daemon.unplug(connection)
            eventually(lambda: connection not in _view(healthy, healthy_path), 10, "its disconnect")
        marker = daemon.plug("usb", vendor="1546", product="ffff", name="marker")
        # The other user's subscriber got every event meanwhile.
        eventually(lambda: marker in _view(healthy, healthy_path), 10, "the healthy subscriber's marker")
        assert len(_events(healthy, healthy_path)) == 71
        # The slow one stopped at its buffer's bound, was told it is suspended, and holds a bounded queue.
        eventually(lambda: _property(slow, slow_path, "State") == "suspended", 10, "the slow subscriber suspended")
        changed = slow.signals("PropertiesChanged", slow_path)
        assert changed and changed[0]["body"][1] == {"State": "suspended"}
        received = len(_events(slow, slow_path))
        assert 0 < received < 20, received
        queued = _property(slow, slow_path, "QueuedEvents")
        assert queued <= 2 * 41, queued
        bus_clients = bus_sessions(daemon.socket)
        assert {c["uid"] for c in bus_clients} == {33, 65534}, bus_clients
        assert any(c["state"] == "suspended" for c in bus_clients)
        # It acknowledges what it got, again and again: the coalesced rest follows, and its view is the truth.
        for _ in range(100):
            events = _events(slow, slow_path)
            slow.ok(slow_path, SUBSCRIPTION_INTERFACE, "Ack", f"(uint64 {events[-1][1]},)")
            if marker in _view(slow, slow_path):
                break
            time.sleep(0.05)
        assert set(_view(slow, slow_path)) == set(plugged[30:]) | {marker}
        # Coalesced: the connects and disconnects of connections it never saw cancelled out.
        assert len(_events(slow, slow_path)) < 71
        eventually(lambda: _property(slow, slow_path, "State") == "live", 10, "the slow subscriber live again")
    finally:
        daemon.close()


def test_a_subscriber_that_acknowledges_every_signal_keeps_up_with_a_burst(
    daemon: SimulatedDaemon, peers: Callable[..., GLibPeer]
) -> None:
    # 3,000 plugs sent at once on one socket connection (a burst of ~30 events a loop turn) to a subscriber that
    # acknowledges each Events signal as it arrives. Its Acks come back through dbus-daemon and its own loop, so it
    # is hundreds of events behind at times; with the socket's 256 KiB window it was suspended and its events
    # coalesced, now it is never suspended (the default --max-bus-unacknowledged, 4 MiB).
    peer = peers(user="www-data")
    path = peer.subscribe()
    peer.auto_ack(path)
    burst = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    burst.connect(daemon.socket)
    lines = [json.dumps({"type": "simulate", "id": n, "action": "connect", "accessory": {
        "kind": "usb", "vendorID": "1546", "productID": f"{n % 65536:04x}", "serialNumber": f"burst{n}"}})
        for n in range(3000)]  # fmt: skip
    reader = threading.Thread(target=lambda: burst.makefile("rb").readlines(), daemon=True)
    reader.start()
    burst.sendall(("\n".join(lines) + "\n").encode())
    eventually(lambda: len(_events(peer, path)) >= 3000, 60, "the burst's 3,000 connects")
    burst.close()
    assert [event[0] for event in _events(peer, path)] == ["connect"] * 3000
    states = [signal["body"][1].get("State") for signal in peer.signals("PropertiesChanged", path)]
    assert "suspended" not in states, f"suspended {states.count('suspended')} times"


def test_suspend_and_resume_cancel_what_came_and_went_meanwhile(
    daemon: SimulatedDaemon, peers: Callable[..., GLibPeer]
) -> None:
    peer = peers(user="www-data")
    path = peer.subscribe("{'kind': <'usb'>}")
    peer.auto_ack(path)
    kept = daemon.plug("usb", vendor="1546", product="0001")
    eventually(lambda: kept in _view(peer, path), 10, "the first connect")
    peer.ok(path, SUBSCRIPTION_INTERFACE, "Suspend")
    assert _property(peer, path, "State") == "suspended"
    came_and_went = daemon.plug("usb", vendor="1546", product="0002")
    daemon.unplug(came_and_went)
    daemon.plug("serial", vendor="1546", product="0003")  # not usb: filtered out
    stayed = daemon.plug("usb", vendor="1546", product="0004")
    daemon.unplug(kept)
    time.sleep(0.2)
    assert len(_events(peer, path)) == 1, "events went out while suspended"
    assert _property(peer, path, "QueuedEvents") == 2
    peer.ok(path, SUBSCRIPTION_INTERFACE, "Resume")
    eventually(lambda: len(_events(peer, path)) == 3, 10, "the queued events")
    assert [(e[0], e[2]["ConnectionID"]) for e in _events(peer, path)[1:]] == [("connect", stayed),
                                                                                 ("disconnect", kept)]  # fmt: skip
    filters = peer.ok(path, "org.freedesktop.DBus.Properties", "GetAll", f"('{SUBSCRIPTION_INTERFACE}',)")[0]
    assert filters["Filter"] == {"kind": "usb"} and filters["RestoreID"] == ""


def _storm(daemon: SimulatedDaemon, stop: threading.Event, plugged: List[int], seed: int) -> None:
    rng = random.Random(seed)
    step = 0
    while not stop.is_set():
        if plugged and rng.random() < 0.45:
            daemon.unplug(plugged.pop(rng.randrange(len(plugged))))
        else:
            plugged.append(daemon.plug("usb", vendor="1546", product=f"{step % 65536:04x}", serial=f"S{step}"))
        step += 1
        time.sleep(rng.uniform(0, 0.003))


def _subscribe_when_free(peer: GLibPeer, options: str) -> str:
    """Subscribes, waiting while accmond has not yet seen the previous holder of the restore id go."""

    def attempt() -> str:
        answer = peer.call("/org/accmon/Accmon1", "org.accmon.Accmon1.Manager", "Subscribe", f"(@a{{sv}} {options},)")
        if "ok" in answer:
            return str(answer["ok"][0])
        assert answer["error"] == "org.accmon.Accmon1.Error.RestoreIDInUse", answer
        return ""

    return str(eventually(attempt, 10, "the restore id to be free"))


def test_a_subscriber_killed_during_a_storm_gets_each_net_change_once_with_its_restore_id(
    daemon: SimulatedDaemon, peers: Callable[..., GLibPeer]
) -> None:
    seed = int(os.environ.get("ACCMON_TEST_SEED", random.randrange(1 << 32)))
    stop = threading.Event()
    plugged: List[int] = []
    storm = threading.Thread(target=_storm, args=(daemon, stop, plugged, seed))
    first = peers(user="www-data")
    first_path = first.subscribe("{'restore-id': <'app'>}")
    first.auto_ack(first_path)
    storm.start()
    try:
        eventually(lambda: len(_events(first, first_path)) > 30, 10, "events before the crash")
        first.kill()
        time.sleep(0.2)  # the storm goes on while the app is away
        second = peers(user="www-data")
        second_path = _subscribe_when_free(second, "{'restore-id': <'app'>}")
        second.auto_ack(second_path)
        time.sleep(0.2)
    finally:
        stop.set()
        storm.join(30)
    snapshot = eventually(lambda: second.signals("Snapshot", second_path), 10, "the Snapshot")[0]
    assert snapshot["body"][2] is True, "not restored"
    # What it missed is newer than what its first run acknowledged, and it ends with the truth.
    assert all(sequence > snapshot["body"][0] for _, sequence, _ in _events(second, second_path))
    truth = {accessory.connection_id for accessory in daemon.list()}
    eventually(lambda: set(_view(second, second_path)) == truth, 15, f"the truth, seed {seed}")


def _hello(socket_path: str, restore_id: str) -> socket.socket:
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.connect(socket_path)
    connection.sendall(json.dumps({"type": "hello", "id": 1, "versions": [1], "client": "test",
                                   "restoreID": restore_id}).encode() + b"\n")  # fmt: skip
    return connection


def _reply(connection: socket.socket) -> Dict[str, Any]:
    data = b""
    while not data.endswith(b"\n"):
        data += connection.recv(65536)
    return json.loads(data.split(b"\n")[0])


def test_restore_ids_are_one_namespace_across_the_socket_and_the_bus(
    daemon: SimulatedDaemon, peers: Callable[..., GLibPeer]
) -> None:
    root = peers()
    held = _hello(daemon.socket, "shared")
    assert _reply(held)["type"] == "hello"
    held.sendall(b'{"type":"subscribe","id":2}\n')
    assert _reply(held)["type"] == "snapshot"
    answer = root.call("/org/accmon/Accmon1", "org.accmon.Accmon1.Manager", "Subscribe",
                       "(@a{sv} {'restore-id': <'shared'>},)")  # fmt: skip
    assert answer["error"] == "org.accmon.Accmon1.Error.RestoreIDInUse", answer
    assert "socket connection" in answer["message"]
    # Another user's same id is another session.
    peers(user="www-data").subscribe("{'restore-id': <'shared'>}")
    gone = daemon.plug("usb", vendor="1546", product="0001")
    held.close()
    path = _subscribe_when_free(root, "{'restore-id': <'shared'>}")
    snapshot = eventually(lambda: root.signals("Snapshot", path), 10, "the Snapshot")[0]
    assert snapshot["body"][2] is True
    eventually(lambda: gone in _view(root, path), 10, "what the socket session missed")
    again = _hello(daemon.socket, "shared")
    refused = _reply(again)
    assert refused["type"] == "error" and refused["code"] == "restore-id-in-use", refused
    again.close()


def test_accmond_killed_under_a_subscriber_hands_its_subscription_back_by_itself(
    bus: PrivateBus, daemon: SimulatedDaemon, peers: Callable[..., GLibPeer]
) -> None:
    peer = peers(user="www-data")
    path = peer.subscribe("{'restore-id': <'app'>}")
    peer.auto_ack(path)
    before = daemon.plug("usb", vendor="1546", product="0001")
    eventually(lambda: before in _view(peer, path), 10, "the first event")
    time.sleep(0.3)  # the acknowledgement reaches the state file (written at most every 100 ms)
    daemon.kill()
    daemon.start()
    wait_for_name(bus, daemon)
    after = daemon.plug("usb", vendor="1546", product="0002")
    # No new Subscribe: the same object's Snapshot (restored) and events come by themselves.
    eventually(lambda: len(peer.signals("Snapshot", path)) == 2, 15, "a second Snapshot on the same path")
    assert peer.signals("Snapshot", path)[1]["body"][2] is True
    eventually(lambda: set(_view(peer, path)) == {before, after}, 15, "the truth after the restart")
    assert _property(peer, path, "RestoreID") == "app"


def test_accmond_survives_a_restart_of_the_bus(
    bus: PrivateBus, daemon: SimulatedDaemon, peers: Callable[..., GLibPeer]
) -> None:
    first = peers(user="www-data")
    path = first.subscribe("{'restore-id': <'app'>}")
    first.auto_ack(path)
    gps = daemon.plug("usb", vendor="1546", product="0001")
    eventually(lambda: gps in _view(first, path), 10, "the first event")
    bus.restart()
    wait_for_name(bus, daemon)
    assert "bus: connection lost" in daemon.log()
    later = daemon.plug("usb", vendor="1546", product="0002")
    # A new peer on the new bus: the objects, and its subscription back by its restore id.
    second = peers(user="www-data", manager=True)
    eventually(lambda: len(second.objects()) == 2, 10, "both objects on the new bus")
    new_path = _subscribe_when_free(second, "{'restore-id': <'app'>}")
    assert second.signals("Snapshot", new_path) or eventually(
        lambda: second.signals("Snapshot", new_path), 10, "the Snapshot"
    )
    assert second.signals("Snapshot", new_path)[0]["body"][2] is True
    eventually(lambda: set(_view(second, new_path)) == {gps, later}, 10, "what it missed while the bus was down")
    # The socket served throughout.
    assert {accessory.connection_id for accessory in daemon.list()} == {gps, later}
